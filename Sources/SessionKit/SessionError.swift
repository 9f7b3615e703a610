import Foundation

/// The one error type SessionKit throws, with a taxonomy callers can switch on.
///
/// Switch on ``code``; the cases are static values so new ones can be added without breaking callers:
///
/// ```swift
/// do { _ = try await session.data(for: request) }
/// catch let error as SessionError where error.code == .sessionEnded { /* signed out: drop the result */ }
/// ```
///
/// - Important: ``message`` never contains a token. SessionKit builds every message itself and redacts
///   credential material before it reaches an error, a log line or a description.
public struct SessionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a value callers can compare and switch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) { self.name = name }

        /// The access token expired or was rejected and could not be renewed.
        public static let accessExpired = Code("accessExpired")
        /// The authorization server rejected the refresh token (`invalid_grant`, RFC 6749 §5.2): sign in again.
        public static let refreshRejected = Code("refreshRejected")
        /// The server revoked the session: a fresh token was rejected too.
        public static let sessionRevoked = Code("sessionRevoked")
        /// The session ended (signed out or switched away) before or while the work ran.
        public static let sessionEnded = Code("sessionEnded")
        /// The network could not be reached, or the connection failed before an answer arrived.
        public static let networkUnavailable = Code("networkUnavailable")
        /// An HTTP exchange passed its wall-clock deadline (a session's or an OAuth client's `requestTimeout`).
        public static let timedOut = Code("timedOut")
        /// The server understood the credentials and refused the request (403, or `insufficient_scope`).
        public static let backendDenied = Code("backendDenied")
        /// The provider is failing (5xx, or 429); ``SessionError/retryAfter`` says when to try again, if known.
        public static let providerOutage = Code("providerOutage")
        /// Too many refreshes in too short a time: a loop was stopped.
        public static let excessiveRefresh = Code("excessiveRefresh")
        /// A caller waiting for a refresh gave up after its bound.
        public static let refreshTimedOut = Code("refreshTimedOut")
        /// The user cancelled a biometric or user-presence prompt guarding the credentials.
        public static let userCancelled = Code("userCancelled")
        /// The credential store failed to read or write.
        public static let storageFailure = Code("storageFailure")
        /// The credential store cannot be used on this machine (a library or a service is missing).
        public static let storeUnavailable = Code("storeUnavailable")
        /// A stored credential record is corrupt, truncated, of an unknown format, or for another account.
        public static let corruptCredentials = Code("corruptCredentials")
        /// A token endpoint answered with something that is not a valid token response.
        public static let malformedTokenResponse = Code("malformedTokenResponse")
        /// A server answered with something that is not a valid HTTP response for the request.
        public static let malformedResponse = Code("malformedResponse")
        /// A non-idempotent request failed after it may have reached the server: it may or may not have applied.
        public static let outcomeUnknown = Code("outcomeUnknown")
        /// A request carrying an `Idempotency-Key` was refused as a conflict (409 or 422); it is not retried.
        public static let idempotencyConflict = Code("idempotencyConflict")
        /// The authorization server returned an OAuth error other than the ones above (RFC 6749 §5.2).
        public static let authorizationFailed = Code("authorizationFailed")
        /// The user denied the authorization request (`access_denied`).
        public static let accessDenied = Code("accessDenied")
        /// A device code or authorization request expired before it was approved (`expired_token`).
        public static let authorizationExpired = Code("authorizationExpired")
        /// An argument or a configuration value is not acceptable.
        public static let invalidInput = Code("invalidInput")

        /// The code's name, for logs.
        public var description: String { name }
    }

    /// What went wrong.
    public let code: Code
    /// A human-readable explanation; never contains credential material.
    public let message: String
    /// The HTTP status that caused the error, when one did.
    public let statusCode: Int?
    /// The OAuth error code (RFC 6749 §5.2) the server sent, when it sent one, such as `invalid_grant`.
    public let oauthError: String?
    /// How long the server asked the client to wait before trying again (`Retry-After`), when it said.
    public let retryAfter: Duration?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: An explanation without credential material.
    ///   - statusCode: The HTTP status involved, if any.
    ///   - oauthError: The OAuth error code the server sent, if any.
    ///   - retryAfter: The server's requested wait, if any.
    public init(
        _ code: Code,
        _ message: String,
        statusCode: Int? = nil,
        oauthError: String? = nil,
        retryAfter: Duration? = nil
    ) {
        self.code = code
        self.message = message
        self.statusCode = statusCode
        self.oauthError = oauthError
        self.retryAfter = retryAfter
    }

    /// A one-line description: the code, then the message and what the server said.
    public var description: String {
        var parts = ["SessionError.\(code): \(message)"]
        if let statusCode { parts.append("status \(statusCode)") }
        if let oauthError { parts.append("oauth error \(oauthError)") }
        if let retryAfter { parts.append("retry after \(retryAfter)") }
        return parts.joined(separator: "; ")
    }

    /// Whether retrying later may succeed without the user doing anything (network, timeout, outage).
    public var isTransient: Bool {
        code == .networkUnavailable || code == .timedOut || code == .providerOutage
    }
}
