// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation
// The shape of Apple's UserNotifications, for `scripts/apple-typecheck`: declarations only, nothing here runs.
//
// SDK followed: iOS 26 / macOS 26 (Xcode 26), transcribed from UserNotifications' documentation on
// developer.apple.com (UNUserNotificationCenter.h, UNNotificationRequest.h, UNNotification.h). The completion-handler
// methods are here with the `async` forms Swift imports for them (`getPendingNotificationRequests(completionHandler:)`
// is `pendingNotificationRequests() async`). The classes are not `Sendable`, as Apple declares them.

import Foundation

@available(iOS 10.0, macOS 10.14, tvOS 10.0, watchOS 3.0, visionOS 1.0, *)
open class UNNotificationContent: NSObject {
    open var title: String { shape() }
    open var body: String { shape() }
    open var userInfo: [AnyHashable: Any] { shape() }
    open var threadIdentifier: String { shape() }
}

@available(iOS 10.0, macOS 10.14, tvOS 10.0, watchOS 3.0, visionOS 1.0, *)
open class UNNotificationTrigger: NSObject {
    open var repeats: Bool { shape() }
}

@available(iOS 10.0, macOS 10.14, tvOS 10.0, watchOS 3.0, visionOS 1.0, *)
open class UNNotificationRequest: NSObject {
    public convenience init(identifier: String, content: UNNotificationContent, trigger: UNNotificationTrigger?) {
        shape()
    }

    open var identifier: String { shape() }
    open var content: UNNotificationContent { shape() }
    open var trigger: UNNotificationTrigger? { shape() }
}

@available(iOS 10.0, macOS 10.14, tvOS 10.0, watchOS 3.0, visionOS 1.0, *)
open class UNNotification: NSObject {
    open var date: Date { shape() }
    open var request: UNNotificationRequest { shape() }
}

@available(iOS 10.0, macOS 10.14, tvOS 10.0, watchOS 3.0, visionOS 1.0, *)
open class UNUserNotificationCenter: NSObject {
    open class func current() -> UNUserNotificationCenter { shape() }

    open func add(
        _ request: UNNotificationRequest,
        withCompletionHandler completionHandler: (@Sendable ((any Error)?) -> Void)? = nil
    ) {
        shape()
    }
    open func add(_ request: UNNotificationRequest) async throws { shape() }

    open func getPendingNotificationRequests(completionHandler: @escaping @Sendable ([UNNotificationRequest]) -> Void) {
        shape()
    }
    open func pendingNotificationRequests() async -> [UNNotificationRequest] { shape() }
    open func removePendingNotificationRequests(withIdentifiers identifiers: [String]) { shape() }
    open func removeAllPendingNotificationRequests() { shape() }

    @available(tvOS, unavailable)
    open func getDeliveredNotifications(completionHandler: @escaping @Sendable ([UNNotification]) -> Void) { shape() }
    @available(tvOS, unavailable)
    open func deliveredNotifications() async -> [UNNotification] { shape() }
    @available(tvOS, unavailable)
    open func removeDeliveredNotifications(withIdentifiers identifiers: [String]) { shape() }
    @available(tvOS, unavailable)
    open func removeAllDeliveredNotifications() { shape() }
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
