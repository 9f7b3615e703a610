// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation, AlwaysUseLowerCamelCase
// The shape of Apple's AuthenticationServices (Sign in with Apple's credential state, and ASWebAuthenticationSession),
// for `scripts/apple-typecheck`: declarations only, nothing here runs.
//
// SDK followed: iOS 26 / macOS 26 (Xcode 26), transcribed from AuthenticationServices' documentation on
// developer.apple.com (ASAuthorizationAppleIDProvider.h, ASWebAuthenticationSession.h,
// ASWebAuthenticationSessionCallback.h, ASFoundation.h), with the availability Apple declares. The Objective-C enums
// are open (NS_ENUM): this module is built with library evolution, so a `switch` over them needs `@unknown default`
// here as on Apple. `ASPresentationAnchor` is UIKit's `UIWindow`, as on iOS (on macOS it is AppKit's `NSWindow`).

import Foundation
import UIKit

// MARK: - ASFoundation.h

public typealias ASPresentationAnchor = UIWindow

// MARK: - ASAuthorizationAppleIDProvider.h

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, visionOS 1.0, *)
open class ASAuthorizationAppleIDProvider: NSObject {
    public enum CredentialState: Int, @unchecked Sendable {
        case revoked = 0
        case authorized = 1
        case notFound = 2
        case transferred = 3
    }

    override public init() { super.init() }

    open func getCredentialState(
        forUserID userID: String,
        completion: @escaping @Sendable (ASAuthorizationAppleIDProvider.CredentialState, (any Error)?) -> Void
    ) {
        shape()
    }

    /// The `async` form Swift imports for `getCredentialState(forUserID:completion:)`.
    open func credentialState(forUserID userID: String) async throws -> ASAuthorizationAppleIDProvider.CredentialState {
        shape()
    }

    public static let credentialRevokedNotification = NSNotification.Name(
        "ASAuthorizationAppleIDProviderCredentialRevokedNotification")
}

// MARK: - ASWebAuthenticationSession.h

@available(iOS 12.0, macOS 10.15, tvOS 16.0, watchOS 6.2, visionOS 1.0, *)
public let ASWebAuthenticationSessionErrorDomain = "com.apple.AuthenticationServices.WebAuthenticationSession"

/// Errors a web authentication session reports: an `NSError` of `ASWebAuthenticationSessionErrorDomain`, bridged as
/// Swift bridges every `NS_ERROR_ENUM` (so `catch ASWebAuthenticationSessionError.canceledLogin` matches).
@available(iOS 12.0, macOS 10.15, tvOS 16.0, watchOS 6.2, visionOS 1.0, *)
public struct ASWebAuthenticationSessionError: _BridgedStoredNSError {
    public static var _nsErrorDomain: String { ASWebAuthenticationSessionErrorDomain }
    public let _nsError: NSError
    public init(_nsError: NSError) { self._nsError = _nsError }

    public enum Code: Int, _ErrorCodeProtocol, @unchecked Sendable {
        public typealias _ErrorType = ASWebAuthenticationSessionError
        case canceledLogin = 1
        @available(iOS 13.0, macOS 10.15, tvOS 16.0, watchOS 6.2, *)
        case presentationContextNotProvided = 2
        @available(iOS 13.0, macOS 10.15, tvOS 16.0, watchOS 6.2, *)
        case presentationContextInvalid = 3
    }

    public static var canceledLogin: Code { .canceledLogin }
    @available(iOS 13.0, macOS 10.15, tvOS 16.0, watchOS 6.2, *)
    public static var presentationContextNotProvided: Code { .presentationContextNotProvided }
    @available(iOS 13.0, macOS 10.15, tvOS 16.0, watchOS 6.2, *)
    public static var presentationContextInvalid: Code { .presentationContextInvalid }
}

@available(iOS 13.0, macOS 10.15, visionOS 1.0, *)
@MainActor
public protocol ASWebAuthenticationPresentationContextProviding: NSObjectProtocol {
    func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor
}

@available(iOS 12.0, macOS 10.15, tvOS 16.0, watchOS 6.2, visionOS 1.0, *)
open class ASWebAuthenticationSession: NSObject {
    public typealias CompletionHandler = (URL?, (any Error)?) -> Void

    /// Matches the callback URL the session completes on (ASWebAuthenticationSessionCallback).
    @available(iOS 17.4, macOS 14.4, tvOS 17.4, watchOS 10.4, visionOS 1.1, *)
    open class Callback: NSObject {
        @available(*, unavailable)
        override public init() { shape() }

        open class func customScheme(_ customScheme: String) -> Self { shape() }
        open class func https(host: String, path: String) -> Self { shape() }
        open func matchesURL(_ url: URL) -> Bool { shape() }
    }

    public init(url URL: URL, callbackURLScheme: String?, completionHandler: @escaping CompletionHandler) {
        shape()
    }

    @available(iOS 17.4, macOS 14.4, tvOS 17.4, watchOS 10.4, visionOS 1.1, *)
    public init(url URL: URL, callback: Callback, completionHandler: @escaping CompletionHandler) { shape() }

    @available(iOS 13.0, macOS 10.15, tvOS 16.0, watchOS 6.2, *)
    open weak var presentationContextProvider: (any ASWebAuthenticationPresentationContextProviding)?

    @available(iOS 13.0, macOS 10.15, tvOS 16.0, watchOS 6.2, *)
    open var prefersEphemeralWebBrowserSession: Bool = false

    @available(iOS 17.4, macOS 14.4, tvOS 17.4, watchOS 10.4, visionOS 1.1, *)
    open var additionalHeaderFields: [String: String]?

    @available(iOS 13.4, macOS 10.15.4, tvOS 16.0, watchOS 6.2, *)
    open var canStart: Bool { shape() }

    open func start() -> Bool { shape() }
    open func cancel() { shape() }
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
