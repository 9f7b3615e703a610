// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation
// The shape of the part of Apple's UIKit SessionKit touches (the application's notifications, and the window that
// AuthenticationServices presents from), for `scripts/apple-typecheck`: declarations only, nothing here runs.
//
// SDK followed: iOS 26 (Xcode 26), transcribed from UIKit's documentation on developer.apple.com. UIKit's classes
// are `@MainActor`; the notification names are `nonisolated class let`, readable from any thread, as declared.

import Foundation

@available(iOS 2.0, tvOS 9.0, visionOS 1.0, *)
@MainActor
open class UIResponder: NSObject {}

@available(iOS 2.0, tvOS 9.0, visionOS 1.0, *)
@MainActor
open class UIView: UIResponder {}

@available(iOS 2.0, tvOS 9.0, visionOS 1.0, *)
@MainActor
open class UIWindow: UIView {}

@available(iOS 2.0, tvOS 9.0, visionOS 1.0, *)
@MainActor
open class UIApplication: UIResponder {
    open class var shared: UIApplication { shape() }
    open var isProtectedDataAvailable: Bool { shape() }

    nonisolated public static let didBecomeActiveNotification = NSNotification.Name(
        "UIApplicationDidBecomeActiveNotification")
    nonisolated public static let willResignActiveNotification = NSNotification.Name(
        "UIApplicationWillResignActiveNotification")
    nonisolated public static let didEnterBackgroundNotification = NSNotification.Name(
        "UIApplicationDidEnterBackgroundNotification")
    nonisolated public static let willEnterForegroundNotification = NSNotification.Name(
        "UIApplicationWillEnterForegroundNotification")
    @available(iOS 4.0, *)
    nonisolated public static let protectedDataWillBecomeUnavailableNotification = NSNotification.Name(
        "UIApplicationProtectedDataWillBecomeUnavailable")
    @available(iOS 4.0, *)
    nonisolated public static let protectedDataDidBecomeAvailableNotification = NSNotification.Name(
        "UIApplicationProtectedDataDidBecomeAvailable")
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
