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
/// As a `LocalizedError`, its `errorDescription` (and so `localizedDescription`) is ``message``. The error that
/// caused it, when there was one, is kept typed in ``underlyingError``: a `URLError` stays a `URLError`, with its
/// code, for callers that need more than the taxonomy.
///
/// - Important: ``message`` never contains a token. SessionKit builds every message itself and redacts
///   credential material before it reaches an error, a log line or a description; text a server sent (an OAuth
///   `error_description`) has every credential the request carried replaced by a redaction marker.
public struct SessionError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// What went wrong, as a value callers can compare and switch on.
    ///
    /// An enum, so that a `switch` over it is checked for completeness: a code added in a later version is a
    /// compile error where an app handles every code by name, which is where it should decide (the CHANGELOG names
    /// each new code).
    public enum Code: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
        /// The access token expired or was rejected and could not be renewed.
        case accessExpired
        /// The authorization server rejected the refresh token (`invalid_grant`, RFC 6749 §5.2): sign in again.
        case refreshRejected
        /// The server revoked the session: a fresh token was rejected too.
        case sessionRevoked
        /// The session ended (signed out or switched away) before or while the work ran.
        case sessionEnded
        /// The network could not be reached, or the connection failed before an answer arrived.
        case networkUnavailable
        /// An HTTP exchange passed its wall-clock deadline (a session's or an OAuth client's `requestTimeout`).
        case timedOut
        /// The server understood the credentials and refused the request (403, or `insufficient_scope`).
        case backendDenied
        /// The provider is failing (5xx, or 429); ``SessionError/retryAfter`` says when to try again, if known.
        case providerOutage
        /// Too many refreshes in too short a time: a loop was stopped.
        case excessiveRefresh
        /// A caller waiting for a refresh gave up after its bound.
        case refreshTimedOut
        /// The user cancelled a biometric or user-presence prompt guarding the credentials.
        case userCancelled
        /// The credential store failed to read or write.
        case storageFailure
        /// The credential store cannot be used on this machine (a library or a service is missing).
        case storeUnavailable
        /// A stored credential record is corrupt, truncated, of an unknown format, or for another account.
        case corruptCredentials
        /// A token endpoint answered with something that is not a valid token response.
        case malformedTokenResponse
        /// A server answered with something that is not a valid HTTP response for the request.
        case malformedResponse
        /// A non-idempotent request failed after it may have reached the server: it may or may not have applied.
        case outcomeUnknown
        /// A request carrying an `Idempotency-Key` was refused as a conflict (409 or 422); it is not retried.
        case idempotencyConflict
        /// The authorization server returned an OAuth error other than the ones above (RFC 6749 §5.2).
        case authorizationFailed
        /// The user denied the authorization request (`access_denied`).
        case accessDenied
        /// A device code or authorization request expired before it was approved (`expired_token`).
        case authorizationExpired
        /// An argument or a configuration value is not acceptable.
        case invalidInput
        /// The app's own code that SessionKit ran threw an error that is not a ``SessionError``: a sign-in closure
        /// (`authenticate`, `openID`, `identify`). ``SessionError/underlyingError`` is that error, unchanged; the
        /// ``SessionError/message`` names only its type, never its text, which may quote a code or a token.
        case appError
        /// The authorization server has no revocation endpoint (RFC 7009) that SessionKit knows of: the client's
        /// configuration names none, and neither does the provider's metadata (its discovery document, then its
        /// RFC 8414 authorization server metadata). Nothing was sent; the token stays valid until it expires.
        case noRevocationEndpoint
        /// A credential would travel over plain HTTP: a request to an `http` origin that is neither loopback nor
        /// named in ``UserSession/CredentialScope/plainHTTPOrigins``, or a redirect from `https` to `http`.
        case insecureTransport
        /// The request's origin is not one the session sends its token to (``UserSession/CredentialScope/origins``).
        case originNotServed
        /// An OpenID Connect ID token failed validation; ``SessionError/idTokenCheck`` names the check it failed
        /// (OpenID Connect Core §3.1.3.7). Nobody was signed in with it.
        case idTokenRejected
        /// A provider's discovery document or key set is unusable: its `issuer` is not the one asked for, an
        /// endpoint is not `https`, a required member is missing (OpenID Connect Discovery 1.0 §4.3, RFC 8414 §3.3).
        case providerMetadataRejected
        /// An OpenID Connect Back-Channel Logout token failed validation; ``SessionError/idTokenCheck`` names the
        /// check it failed (Back-Channel Logout 1.0 §2.6). Nothing was ended.
        case logoutTokenRejected

        /// The code's name, for logs.
        public var description: String { rawValue }
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
    /// The error that caused this one, when there was one: the `URLError` of a failed transfer, for instance.
    ///
    /// Not part of equality or hashing: two errors with the same code, message and server details are equal.
    public let underlyingError: (any Error & Sendable)?
    /// The ID token check that failed, for ``Code/idTokenRejected``; `nil` otherwise.
    public let idTokenCheck: IDTokenCheck?

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: What went wrong.
    ///   - message: An explanation without credential material.
    ///   - statusCode: The HTTP status involved, if any.
    ///   - oauthError: The OAuth error code the server sent, if any.
    ///   - retryAfter: The server's requested wait, if any.
    ///   - underlyingError: The error that caused this one, if any.
    ///   - idTokenCheck: The ID token check that failed, if that is what went wrong.
    public init(
        _ code: Code,
        _ message: String,
        statusCode: Int? = nil,
        oauthError: String? = nil,
        retryAfter: Duration? = nil,
        underlyingError: (any Error & Sendable)? = nil,
        idTokenCheck: IDTokenCheck? = nil
    ) {
        self.code = code
        self.message = message
        self.statusCode = statusCode
        self.oauthError = oauthError
        self.retryAfter = retryAfter
        self.underlyingError = underlyingError
        self.idTokenCheck = idTokenCheck
    }

    /// ``message``, for `LocalizedError` (and so `localizedDescription`).
    public var errorDescription: String? { message }

    /// Whether two errors have the same code, message and server details; ``underlyingError`` is not compared.
    public static func == (lhs: SessionError, rhs: SessionError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.statusCode == rhs.statusCode
            && lhs.oauthError == rhs.oauthError && lhs.retryAfter == rhs.retryAfter
            && lhs.idTokenCheck == rhs.idTokenCheck
    }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(statusCode)
        hasher.combine(oauthError)
        hasher.combine(retryAfter)
        hasher.combine(idTokenCheck)
    }

    /// The same error with every occurrence of `secrets` in its message replaced by a redaction marker: for
    /// messages that quote what a server said, which may echo a credential the request carried.
    ///
    /// - Parameter secrets: The credentials the request carried.
    /// - Returns: The error, redacted.
    package func redacting(_ secrets: [String]) -> SessionError {
        var message = message
        // Longest first, so that a secret containing another is replaced whole.
        for secret in Set(secrets).sorted(by: { $0.count > $1.count }) where !secret.isEmpty {
            message = message.replacingOccurrences(of: secret, with: Redaction.redact(secret))
        }
        return SessionError(
            code, message, statusCode: statusCode, oauthError: oauthError, retryAfter: retryAfter,
            underlyingError: underlyingError, idTokenCheck: idTokenCheck)
    }

    /// A one-line description: the code, then the message and what the server said.
    public var description: String {
        var parts = ["SessionError.\(code): \(message)"]
        if let statusCode { parts.append("status \(statusCode)") }
        if let oauthError { parts.append("oauth error \(oauthError)") }
        if let retryAfter { parts.append("retry after \(retryAfter)") }
        if let idTokenCheck { parts.append("failed check \(idTokenCheck)") }
        return parts.joined(separator: "; ")
    }

    /// Whether retrying later may succeed without the user doing anything (network, timeout, outage).
    public var isTransient: Bool {
        code == .networkUnavailable || code == .timedOut || code == .providerOutage
    }
}

extension SessionError {
    /// Whether a refresh that failed so has lost the grant: the server rejected it (`refreshRejected`), or its
    /// answer named someone else (`idTokenRejected`; the server rotated the refresh token in that answer, which
    /// SessionKit will not adopt). Either way the account must sign in again.
    package var endsGrant: Bool { code == .refreshRejected || code == .idTokenRejected }

    /// The same error, keeping `underlying` as its cause.
    package func keeping(_ underlying: (any Error & Sendable)?) -> SessionError {
        SessionError(
            code, message, statusCode: statusCode, oauthError: oauthError, retryAfter: retryAfter,
            underlyingError: underlying, idTokenCheck: idTokenCheck)
    }
}
