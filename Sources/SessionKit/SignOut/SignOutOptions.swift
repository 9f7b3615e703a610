import SessionKitOAuth

/// Which kinds of sign-out the app wants, and how long the server-side steps may take.
///
/// Local sign-out (detach, clear, cancel, purge) always happens and always completes within ``localTimeout``. The
/// server-side steps (``serverSteps``) are best effort and bounded by ``serverTimeout``: an offline device or a hung
/// endpoint never stops the local phases.
///
/// ```swift
/// let options = SignOutOptions(serverSteps: [
///     .revokeRefreshToken, .revokeAccessToken,
///     .backend { tokens in try await api.endSession(bearer: tokens.accessToken) },
///     .openID(.calling(provider, postLogoutRedirectURI: nil)),
/// ])
/// ```
public struct SignOutOptions: Sendable {
    /// Where the account's queued writes go.
    package enum OutboxDisposition: Sendable, Hashable {
        /// Delete them with the account's other data.
        case delete
        /// Keep them aside for the same account's next sign-in; never replayed as anyone else.
        case keepForAccount
    }

    /// What sign-out does on servers once the session has ended: revoking the refresh token, by default.
    ///
    /// The steps run at the same time, each on a client of its own, each within ``serverTimeout``, and each kind is
    /// reported in a field of its own (``SignOutReport``); the order of the list does not change when they start,
    /// except that several steps of one kind run one after the other, in the list's order. One order holds between
    /// kinds: the access token's revocation starts once every ``SignOutServerStep/backend(_:)`` step has finished,
    /// or half of ``serverTimeout`` has passed, so that a backend sign-out sees the token still valid.
    public var serverSteps: [SignOutServerStep]
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
    ///   - serverSteps: What is done on servers; the refresh token's revocation by default, none for a local
    ///     sign-out.
    ///   - serverTimeout: The bound on the server-side steps.
    ///   - waitForServer: Wait for them, or let them finish in the background.
    ///   - keepsOutbox: Keep the queued writes for the account's next sign-in instead of deleting them.
    ///   - localTimeout: The deadline of the local phases.
    public init(
        serverSteps: [SignOutServerStep] = [.revokeRefreshToken],
        serverTimeout: Duration = .seconds(5),
        waitForServer: Bool = true,
        keepsOutbox: Bool = false,
        localTimeout: Duration = .seconds(5)
    ) {
        self.serverSteps = serverSteps
        self.serverTimeout = serverTimeout
        self.waitForServer = waitForServer
        self.keepsOutbox = keepsOutbox
        self.localTimeout = localTimeout
    }

    /// What happens to the account's outbox.
    package var outbox: OutboxDisposition { keepsOutbox ? .keepForAccount : .delete }

    /// Local sign-out only: nothing is sent to any server.
    public static var localOnly: SignOutOptions { SignOutOptions(serverSteps: []) }
}

/// One thing a sign-out does on a server, after the session has ended, best effort and bounded
/// (``SignOutOptions/serverSteps``).
public struct SignOutServerStep: Sendable {
    enum Kind: Sendable {
        case revokeRefreshToken
        case revokeAccessToken
        case backend(@Sendable (TokenSet) async throws -> Void)
        case provider(@Sendable (Account) async throws -> Void)
        case openID(OpenIDLogout)
    }

    let kind: Kind

    /// Revoke the refresh token with RFC 7009 (which also ends its access tokens on most servers), at the session's
    /// ``TokenRevoker``; reported in ``SignOutReport/refreshTokenRevocation``. An empty refresh token is not sent.
    public static var revokeRefreshToken: SignOutServerStep { SignOutServerStep(kind: .revokeRefreshToken) }

    /// Revoke the access token too, for servers that keep access tokens alive after their refresh token; reported
    /// in ``SignOutReport/accessTokenRevocation``.
    ///
    /// It starts once every ``backend(_:)`` step has finished or half of ``SignOutOptions/serverTimeout`` has
    /// passed, so that a backend sign-out sees the token still valid. A session that never fetched an access token
    /// (restored offline) revokes none.
    public static var revokeAccessToken: SignOutServerStep { SignOutServerStep(kind: .revokeAccessToken) }

    /// Ends the user's session on the app's own backend, given the tokens the session held when it ended; reported in
    /// ``SignOutReport/serverSession``. It does not run for a session that ended holding no tokens.
    ///
    /// - Parameter step: The backend call; its error fails the step.
    /// - Returns: The step.
    public static func backend(_ step: @escaping @Sendable (TokenSet) async throws -> Void) -> SignOutServerStep {
        SignOutServerStep(kind: .backend(step))
    }

    /// Signs out of the identity provider by a call of the app's own; reported in ``SignOutReport/providerLogout``,
    /// beside any ``openID(_:)`` step (a failure of either shows).
    ///
    /// - Parameter step: The provider's sign-out; its error fails the step.
    /// - Returns: The step.
    public static func provider(_ step: @escaping @Sendable (Account) async throws -> Void) -> SignOutServerStep {
        SignOutServerStep(kind: .provider(step))
    }

    /// Signs out of the OpenID provider (RP-Initiated Logout) with the session's ID token as the hint; reported in
    /// ``SignOutReport/providerLogout``, beside any ``provider(_:)`` step (a failure of either shows).
    ///
    /// - Parameter logout: The provider and how the end-session URL reaches it.
    /// - Returns: The step.
    public static func openID(_ logout: OpenIDLogout) -> SignOutServerStep {
        SignOutServerStep(kind: .openID(logout))
    }
}
