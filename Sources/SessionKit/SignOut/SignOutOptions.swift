import SessionKitOAuth

/// Which kinds of sign-out the app wants, and how long the server-side steps may take.
///
/// Local sign-out (detach, clear, cancel, purge) always happens and always completes within ``localTimeout``. The
/// server-side steps are best effort and bounded by ``serverTimeout``: an offline device or a hung endpoint never
/// stops the local phases.
public struct SignOutOptions: Sendable {
    /// Where the account's queued writes go.
    package enum OutboxDisposition: Sendable, Hashable {
        /// Delete them with the account's other data.
        case delete
        /// Keep them aside for the same account's next sign-in; never replayed as anyone else.
        case keepForAccount
    }

    /// Revoke the refresh token with RFC 7009 (which also ends its access tokens on most servers).
    public var revokeRefreshToken: Bool
    /// Revoke the access token too, for servers that keep access tokens alive after their refresh token.
    ///
    /// Its revocation runs beside the refresh token's, and starts once ``terminateServerSession`` has finished or
    /// half of ``serverTimeout`` has passed, so that a backend sign-out sees the token still valid. A session that
    /// never fetched an access token (restored offline) revokes none.
    public var revokeAccessToken: Bool
    /// Ends the user's session on the app's own backend, given the tokens the session held (an injected step).
    public var terminateServerSession: (@Sendable (TokenSet) async throws -> Void)?
    /// Signs out of the identity provider (an injected step, such as an OIDC end-session call).
    public var providerLogout: (@Sendable (Account) async throws -> Void)?
    /// Signs out of the OpenID provider (RP-Initiated Logout) with the session's ID token as the hint; reported in
    /// ``SignOutReport/providerLogout`` (with ``providerLogout`` set too, both run and a failure of either shows).
    public var openIDLogout: OpenIDLogout?
    /// The bound on all server-side steps together; they run at the same time, each within it.
    public var serverTimeout: Duration
    /// Whether ``SessionManager/signOut(_:options:)`` waits for the server-side steps (within
    /// ``serverTimeout``) or lets them finish in the background.
    public var waitForServer: Bool
    /// Whether the account's ``Outbox`` is set aside for the same account's next sign-in
    /// (``SessionManager/restoreKeptOutbox(for:)``) instead of being deleted with its other data; never replayed
    /// as anyone else. Off by default.
    public var keepsOutbox: Bool
    /// One wall-clock deadline for the local phases together: waiting for writes in flight (``WritePolicy/wait(_:)``
    /// bounds each one further), deleting the credential record, and each registered resource's purge. A step
    /// still running at the deadline is reported as ``SignOutReport/StepOutcome/timedOut`` in the report's purge
    /// steps (``SignOutReport/isPurgeComplete`` is then `false`) and retried at the next launch or the account's next
    /// sign-in.
    public var localTimeout: Duration

    /// Creates options.
    ///
    /// - Parameters:
    ///   - revokeRefreshToken: Revoke the refresh token.
    ///   - revokeAccessToken: Revoke the access token.
    ///   - terminateServerSession: The app's backend sign-out step.
    ///   - providerLogout: The provider's sign-out step.
    ///   - openIDLogout: The OpenID provider's sign-out step.
    ///   - serverTimeout: The bound on the server-side steps.
    ///   - waitForServer: Wait for them, or let them finish in the background.
    ///   - keepsOutbox: Keep the queued writes for the account's next sign-in instead of deleting them.
    ///   - localTimeout: The deadline of the local phases.
    public init(
        revokeRefreshToken: Bool = true,
        revokeAccessToken: Bool = false,
        terminateServerSession: (@Sendable (TokenSet) async throws -> Void)? = nil,
        providerLogout: (@Sendable (Account) async throws -> Void)? = nil,
        openIDLogout: OpenIDLogout? = nil,
        serverTimeout: Duration = .seconds(5),
        waitForServer: Bool = true,
        keepsOutbox: Bool = false,
        localTimeout: Duration = .seconds(5)
    ) {
        self.revokeRefreshToken = revokeRefreshToken
        self.revokeAccessToken = revokeAccessToken
        self.terminateServerSession = terminateServerSession
        self.providerLogout = providerLogout
        self.openIDLogout = openIDLogout
        self.serverTimeout = serverTimeout
        self.waitForServer = waitForServer
        self.keepsOutbox = keepsOutbox
        self.localTimeout = localTimeout
    }

    /// What happens to the account's outbox.
    package var outbox: OutboxDisposition { keepsOutbox ? .keepForAccount : .delete }

    /// Local sign-out only: nothing is sent to any server.
    public static var localOnly: SignOutOptions { SignOutOptions(revokeRefreshToken: false) }
}
