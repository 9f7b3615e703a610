import Foundation
import SessionKitOAuth

extension UserSession {
    /// How a session sends requests.
    public struct Configuration: Sendable {
        /// The longest a single attempt of a request may take: a wall-clock deadline that SessionKit enforces
        /// from the moment the attempt starts to the last byte of its answer, however the server paces it. At the
        /// deadline the attempt is cancelled and fails with `timedOut` (`outcomeUnknown` for a request that is not
        /// replayable); it is measured in real time, whatever ``clock`` says.
        public var requestTimeout: Duration
        /// When requests are replayed after transport failures and retryable statuses.
        public var retryPolicy: RetryPolicy
        /// The byte bound of the session's private response cache; `0` disables caching.
        public var cacheMaximumBytes: Int
        /// Whether the access token is written to the credential store too (off: it stays in memory only, unless the
        /// store is shared between processes, which stores it for the others to use).
        public var storesAccessToken: Bool
        /// Whether the OpenID Connect ID token is written to the credential store (off: it stays in memory, and a
        /// sign-out after a restart has no `id_token_hint` for the provider's end-session endpoint). Turn it on when
        /// sign-out runs ``SignOutServerStep/openID(_:)``; the record, ID token included, is deleted at sign-out.
        public var storesIDToken: Bool
        /// The most bytes one request of a ``UserSession/download(for:progress:)`` asks for: a GET download is
        /// fetched in ranges of this size when the server honours ranges, so that memory stays bounded by it however
        /// slowly the disk takes the bytes; 16 MiB by default, `0` for one request per download.
        public var downloadSegmentBytes: Int
        /// The clock for expiry and backoff. ``requestTimeout`` runs in real time, not on this clock, so that a
        /// test's manual clock never ends a request in flight.
        public var clock: any SessionClock
        /// Where the session's credentials may go: which origins receive its token, plain HTTP, the app's own
        /// credential header fields, `https` to `http` redirects. By default every `https` origin and the loopback
        /// interface; a redirect to another origin never carries a credential, whatever the scope.
        public var credentialScope: CredentialScope
        /// Where the session, and a ``SessionManager`` given this configuration, send their ``DiagnosticEvent``s;
        /// `nil` (the default) sends none.
        public var diagnostics: Diagnostics?
        /// The transport the session's data route runs on (``TransportChoice``): the process's choice unless set.
        package var transport: TransportChoice = .process
        /// Tests only: runs between a request's or a transfer's task creation and its start, so a test can end the
        /// session in exactly that window. `nil` (one branch per request) everywhere else.
        var beforeStart: (@Sendable (UserSession) -> Void)?

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - requestTimeout: The wall-clock deadline of each attempt.
        ///   - retryPolicy: Replay rules.
        ///   - cacheMaximumBytes: Cache bound; `0` disables it.
        ///   - storesAccessToken: Whether the access token is persisted too.
        ///   - storesIDToken: Whether the ID token is persisted, for the provider's sign-out after a restart.
        ///   - downloadSegmentBytes: The range one request of a download asks for; `0` for one request.
        ///   - clock: The clock to read.
        ///   - credentialScope: Where the session's credentials may go.
        ///   - diagnostics: The sink for diagnostic events; `nil` for none.
        public init(
            requestTimeout: Duration = .seconds(30),
            retryPolicy: RetryPolicy = RetryPolicy(),
            cacheMaximumBytes: Int = 4 * 1024 * 1024,
            storesAccessToken: Bool = false,
            storesIDToken: Bool = false,
            downloadSegmentBytes: Int = 16 * 1024 * 1024,
            clock: (any SessionClock)? = nil,
            credentialScope: CredentialScope = CredentialScope(),
            diagnostics: Diagnostics? = nil
        ) {
            self.credentialScope = credentialScope
            self.diagnostics = diagnostics
            self.requestTimeout = requestTimeout
            self.retryPolicy = retryPolicy
            self.cacheMaximumBytes = cacheMaximumBytes
            self.storesAccessToken = storesAccessToken
            self.storesIDToken = storesIDToken
            self.downloadSegmentBytes = downloadSegmentBytes
            self.clock = clock ?? SystemClock()
        }
    }
}
