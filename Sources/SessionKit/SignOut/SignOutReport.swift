import SessionKitOAuth

/// What a sign-out did, phase by phase.
public struct SignOutReport: Sendable, CustomStringConvertible {
    /// The outcome of one step: a server step (revocation, the app's and the provider's sign-out) or a purge step.
    public enum StepOutcome: Sendable, Hashable, CustomStringConvertible {
        /// The step did not run: the app did not ask for it, or it had nothing to do (no data directory to remove;
        /// a session a re-login replaced, whose account's data belongs to the live session).
        case notRequested
        /// The step succeeded.
        case succeeded
        /// The step failed; the local sign-out went on.
        case failed(SessionError.Code)
        /// A local purge step did not finish within the bound.
        case timedOut
        /// A server step was sent (the revocation handed to the ``TokenRevoker``, which sends it at once, or the
        /// app's closure called) and no answer came within the bound. The server may well have acted on it: this
        /// says only that SessionKit never learned the outcome. The step is cancelled and left behind.
        case unanswered
        /// The bound had passed before a server step could be sent (the access token's revocation waits up to half
        /// the bound for the app's backend step): the server never heard of it.
        case notSent
        /// A revocation was not sent because the provider has no revocation endpoint: the ``TokenRevoker`` threw
        /// ``SessionError/Code/noRevocationEndpoint`` (an ``OpenIDProvider`` whose discovery document and RFC 8414
        /// metadata name none, and whose configuration names none either). Not an error of the app's input: the
        /// token stays valid at the server until it expires, unless the provider's sign-out ends it.
        case noEndpoint
        /// The step runs in the background, within its bound.
        case inBackground

        /// The outcome's name.
        public var description: String {
            switch self {
            case .notRequested: "not requested"
            case .succeeded: "succeeded"
            case .failed(let code): "failed (\(code))"
            case .timedOut: "timed out"
            case .unanswered: "sent, not answered within the bound"
            case .notSent: "not sent: the bound passed first"
            case .noEndpoint: "not sent: the provider has no revocation endpoint"
            case .inBackground: "in background"
            }
        }
    }

    /// The account signed out.
    public let account: Account
    /// Why the provider ended the account, for an ending (``SessionManager/endAccount(_:because:)``); `nil` for a
    /// sign-out the app asked for.
    public internal(set) var endedBy: AccountEnding?
    /// How many requests were in flight and cancelled.
    public internal(set) var cancelledRequests = 0
    /// Writes with the wait policy that completed within their bound.
    public internal(set) var writesWaitedFor = 0
    /// Writes with the wait policy that had not completed at their bound and were cancelled.
    public internal(set) var writesAbandoned = 0
    /// Writes handed off to complete in the background.
    public internal(set) var writesHandedOff = 0
    /// Writes discarded, to be reconciled at the account's next sign-in.
    public internal(set) var writesDiscarded = 0
    /// Refresh-token revocation.
    public internal(set) var refreshTokenRevocation = StepOutcome.notRequested
    /// Access-token revocation.
    public internal(set) var accessTokenRevocation = StepOutcome.notRequested
    /// The app's backend sign-out step.
    public internal(set) var serverSession = StepOutcome.notRequested
    /// The provider's sign-out step.
    public internal(set) var providerLogout = StepOutcome.notRequested
    /// Recording the intent to purge, durably when the manager has a data directory, before the session is
    /// detached: a purge that a kill interrupts is finished by the next ``SessionManager/restore()``. A failure
    /// (`storageFailure`) leaves the purge itself to go on; only its crash safety is lost.
    public internal(set) var purgeIntent = StepOutcome.notRequested
    /// Deleting the account's credential record from the store, behind every write the session had admitted.
    public internal(set) var credentialDeletion = StepOutcome.notRequested
    /// Destroying the DPoP key the session's tokens were bound to (RFC 9449): it lived in the account's credential
    /// record and in the session's memory, so this is the record's deletion for a session that had a key, and
    /// ``StepOutcome/notRequested`` for bearer tokens. Once it succeeded, a refresh token that a failed revocation
    /// left valid is refused by the server whoever presents it: no proof of its key can be made any more.
    public internal(set) var proofKeyDestruction = StepOutcome.notRequested
    /// Removing the account's directory (its files, downloads and outbox); ``StepOutcome/notRequested`` when the
    /// manager has no ``SessionManager/Configuration/dataDirectory``.
    public internal(set) var directoryRemoval = StepOutcome.notRequested
    /// Each registered ``UserScopedResource``'s purge, in registration order, by the resource's name.
    public internal(set) var resourcePurges: [(resource: String, outcome: StepOutcome)] = []
    /// Whether every local purge step that ran succeeded: `false` when any of ``purgeIntent``,
    /// ``credentialDeletion``, ``directoryRemoval`` or ``resourcePurges`` failed or timed out. A failed deletion,
    /// removal or resource purge is run again at the next launch or the account's next sign-in, whichever comes
    /// first.
    public var isPurgeComplete: Bool {
        ([purgeIntent, credentialDeletion, directoryRemoval] + resourcePurges.map { $0.outcome }).allSatisfy {
            $0 == .succeeded || $0 == .notRequested
        }
    }
    /// How long the local phases (detach, clear, cancel) took.
    public internal(set) var localPhasesDuration = Duration.zero

    init(account: Account) { self.account = account }

    /// A summary for logs that names every step with its outcome; it contains no credential material.
    public var description: String {
        let resources = resourcePurges.map { "\($0.resource) \($0.outcome)" }
        let why = endedBy.map { " (ended by the provider: \($0))" } ?? ""
        return """
            sign-out of \(account)\(why): \(cancelledRequests) requests cancelled; writes waited \(writesWaitedFor), \
            abandoned \(writesAbandoned), handed off \(writesHandedOff), discarded \(writesDiscarded); \
            refresh-token revocation \(refreshTokenRevocation), access-token revocation \(accessTokenRevocation), \
            server session \(serverSession), provider logout \(providerLogout); \
            purge intent \(purgeIntent), credentials \(credentialDeletion), DPoP key \(proofKeyDestruction), \
            directory \(directoryRemoval)\
            \(resources.isEmpty ? "" : ", " + resources.joined(separator: ", "))
            """
    }
}
