/// What a sign-out did, phase by phase.
public struct SignOutReport: Sendable, CustomStringConvertible {
    /// The outcome of one server-side step.
    public enum StepOutcome: Sendable, Hashable, CustomStringConvertible {
        /// The app did not ask for this step.
        case notRequested
        /// The step succeeded.
        case succeeded
        /// The step failed; the local sign-out went on.
        case failed(SessionError.Code)
        /// The step did not finish within the bound.
        case timedOut
        /// The step runs in the background, within its bound.
        case inBackground

        /// The outcome's name.
        public var description: String {
            switch self {
            case .notRequested: "not requested"
            case .succeeded: "succeeded"
            case .failed(let code): "failed (\(code))"
            case .timedOut: "timed out"
            case .inBackground: "in background"
            }
        }
    }

    /// The account signed out.
    public let account: Account
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
    /// What was purged, in order: the credential record, the account's directory, each registered resource.
    public internal(set) var purged: [String] = []
    /// Purge steps that failed, with the error code; they are retried at next launch.
    public internal(set) var purgeFailures: [String] = []
    /// How long the local phases (detach, clear, cancel) took.
    public internal(set) var localPhasesDuration = Duration.zero

    init(account: Account) { self.account = account }

    /// A multi-line summary for logs; it contains no credential material.
    public var description: String {
        """
        sign-out of \(account): \(cancelledRequests) requests cancelled; writes waited \(writesWaitedFor), \
        abandoned \(writesAbandoned), handed off \(writesHandedOff), discarded \(writesDiscarded); \
        revocation \(refreshTokenRevocation); purged \(purged.joined(separator: ", "))\
        \(purgeFailures.isEmpty ? "" : "; purge failures \(purgeFailures.joined(separator: ", "))")
        """
    }
}
