import SessionKitOAuth

/// Where the app's current session stands: a pure value-type state machine.
///
/// ``SessionManager`` feeds it `Event`s and publishes the result. Two rules shape the table:
/// a network error never signs anyone out (an offline launch with stored credentials is ``active(_:offline:)``
/// with `offline` set), and a cancelled biometric prompt changes nothing.
public enum SessionState: Sendable, Hashable, CustomStringConvertible {
    /// Reading stored credentials at launch, and finishing any purge a crash interrupted.
    case restoring
    /// No account is signed in.
    case signedOut
    /// A sign-in is under way.
    case authenticating
    /// An account is signed in; `offline` when the last attempt to reach the provider failed for the network.
    case active(Account, offline: Bool)
    /// An account is signed in and its access token is being refreshed.
    case refreshing(Account)
    /// The provider rejected the account's refresh token: the app shows sign-in for this account.
    case reauthenticationRequired(Account)
    /// The provider ended the current account, for the reason given (``SessionManager/endAccount(_:because:)``: Sign
    /// in with Apple revoked, a back-channel logout), and no other account is live: the app shows sign-in, saying
    /// why.
    case accountEnded(Account, AccountEnding)
    /// Sign-in or restore failed for a reason the user must see.
    case failed(SessionError)

    /// What happens to a session, as the manager reports it to the state machine.
    package enum Event: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// The app launched and restore began.
        case restoreStarted
        /// Restore found credentials for an account and the provider was reachable.
        case restored(Account)
        /// Restore found credentials for an account but the provider could not be reached.
        case restoredOffline(Account)
        /// Restore found no credentials.
        case restoredNothing
        /// Restore found credentials for an account, and the provider rejected its refresh token.
        case restoreRejected(Account)
        /// Restore could not read the stored credentials (the store is locked or unavailable, a record is
        /// unreadable, or the user cancelled the prompt guarding them). They are kept: restoring again may succeed.
        case restoreFailed(SessionError)
        /// A sign-in began.
        case signInStarted
        /// A sign-in completed for an account.
        case signedIn(Account)
        /// A sign-in failed.
        case signInFailed(SessionError)
        /// A sign-in failed or was cancelled while another account stayed signed in and current: back to it.
        case signInAbandoned(Account)
        /// A token refresh began.
        case refreshStarted
        /// A token refresh completed.
        case refreshSucceeded
        /// A refresh failed for the network or an outage: transient.
        case refreshFailedTransiently
        /// A refresh failed for a reason that is neither the network nor the provider's rejection (the loop guard,
        /// a malformed answer); the token in hand is unchanged.
        case refreshFailed
        /// The provider rejected the refresh token (`invalid_grant`).
        case refreshRejected
        /// The user cancelled a biometric or user-presence prompt.
        case userCancelled
        /// The current account was signed out and none other is current.
        case signedOut
        /// The app switched to another live account.
        case switched(Account)
        /// The provider ended the current account and none other is current.
        case accountEnded(Account, AccountEnding)

        /// Representative values of every case, for exhaustive tests.
        public static var allCases: [Event] {
            let account = Account(issuer: "https://issuer.example", subject: "example")
            return [
                .restoreStarted, .restored(account), .restoredOffline(account), .restoredNothing,
                .restoreRejected(account), .restoreFailed(SessionError(.storeUnavailable, "example")), .signInStarted,
                .signedIn(account), .signInFailed(SessionError(.authorizationFailed, "example")),
                .signInAbandoned(account), .refreshStarted, .refreshSucceeded, .refreshFailedTransiently,
                .refreshFailed, .refreshRejected, .userCancelled, .signedOut, .switched(account),
                .accountEnded(account, .backChannelLogout),
            ]
        }

        /// The event's name.
        public var description: String {
            switch self {
            case .restoreStarted: "restoreStarted"
            case .restored: "restored"
            case .restoredOffline: "restoredOffline"
            case .restoredNothing: "restoredNothing"
            case .restoreRejected: "restoreRejected"
            case .restoreFailed: "restoreFailed"
            case .signInStarted: "signInStarted"
            case .signedIn: "signedIn"
            case .signInFailed: "signInFailed"
            case .signInAbandoned: "signInAbandoned"
            case .refreshStarted: "refreshStarted"
            case .refreshSucceeded: "refreshSucceeded"
            case .refreshFailedTransiently: "refreshFailedTransiently"
            case .refreshFailed: "refreshFailed"
            case .refreshRejected: "refreshRejected"
            case .userCancelled: "userCancelled"
            case .signedOut: "signedOut"
            case .switched: "switched"
            case .accountEnded: "accountEnded"
            }
        }
    }

    /// The account the state is about, if any.
    public var account: Account? {
        switch self {
        case .active(let account, _), .refreshing(let account), .reauthenticationRequired(let account),
            .accountEnded(let account, _):
            account
        case .restoring, .signedOut, .authenticating, .failed: nil
        }
    }

    /// The state after `event`; an event that does not apply in this state leaves it unchanged.
    ///
    /// - Parameter event: What happened.
    /// - Returns: The next state.
    package func applying(_ event: Event) -> SessionState {
        switch (self, event) {
        // Restore begins only at launch-like moments, never in the middle of a live session.
        case (.signedOut, .restoreStarted), (.failed, .restoreStarted), (.accountEnded, .restoreStarted): .restoring
        case (.restoring, .restored(let account)): .active(account, offline: false)
        case (.restoring, .restoredOffline(let account)): .active(account, offline: true)
        case (.restoring, .restoredNothing): .signedOut
        case (.restoring, .restoreRejected(let account)): .reauthenticationRequired(account)
        // Credentials that could not be read are not the absence of credentials: not signed out, and restore can
        // be tried again from `failed`.
        case (.restoring, .restoreFailed(let error)): .failed(error)

        // A sign-in can begin from anywhere that is not already busy restoring or signing in.
        case (.signedOut, .signInStarted), (.failed, .signInStarted), (.reauthenticationRequired, .signInStarted),
            (.accountEnded, .signInStarted), (.active, .signInStarted), (.refreshing, .signInStarted):
            .authenticating
        case (.authenticating, .signedIn(let account)), (.reauthenticationRequired, .signedIn(let account)),
            (.accountEnded, .signedIn(let account)):
            .active(account, offline: false)
        case (.authenticating, .signInFailed(let error)): .failed(error)
        // The account that was current before the sign-in began is still signed in: the failure is the caller's
        // to show, and the app stays signed in.
        case (.authenticating, .signInAbandoned(let account)): .active(account, offline: false)
        // A cancelled prompt during sign-in returns to signed out, without an error screen.
        case (.authenticating, .userCancelled): .signedOut

        case (.active(let account, _), .refreshStarted): .refreshing(account)
        case (.refreshing(let account), .refreshSucceeded), (.active(let account, _), .refreshSucceeded):
            .active(account, offline: false)
        // The network never signs anyone out.
        case (.refreshing(let account), .refreshFailedTransiently),
            (.active(let account, _), .refreshFailedTransiently):
            .active(account, offline: true)
        // Not the network, not a rejection: the token in hand is unchanged and the account stays signed in.
        case (.refreshing(let account), .refreshFailed), (.active(let account, _), .refreshFailed):
            .active(account, offline: false)
        case (.refreshing(let account), .refreshRejected), (.active(let account, _), .refreshRejected):
            .reauthenticationRequired(account)
        // A cancelled prompt while refreshing leaves the account signed in as it was; nothing loops.
        case (.refreshing(let account), .userCancelled): .active(account, offline: false)

        case (.restoring, .signedOut), (.authenticating, .signedOut), (.active, .signedOut), (.refreshing, .signedOut),
            (.reauthenticationRequired, .signedOut), (.failed, .signedOut), (.accountEnded, .signedOut):
            .signedOut
        // The provider's ending of the current account, with nobody to succeed it: the app shows why.
        case (.active, .accountEnded(let account, let ending)), (.refreshing, .accountEnded(let account, let ending)),
            (.reauthenticationRequired, .accountEnded(let account, let ending)),
            (.failed, .accountEnded(let account, let ending)):
            .accountEnded(account, ending)
        case (.active, .switched(let account)), (.refreshing, .switched(let account)),
            (.reauthenticationRequired, .switched(let account)), (.signedOut, .switched(let account)),
            (.failed, .switched(let account)), (.accountEnded, .switched(let account)):
            .active(account, offline: false)

        default: self
        }
    }

    /// The state's name and account.
    public var description: String {
        switch self {
        case .restoring: "restoring"
        case .signedOut: "signedOut"
        case .authenticating: "authenticating"
        case .active(let account, let offline): "active(\(account)\(offline ? ", offline" : ""))"
        case .refreshing(let account): "refreshing(\(account))"
        case .reauthenticationRequired(let account): "reauthenticationRequired(\(account))"
        case .accountEnded(let account, let ending): "accountEnded(\(account), \(ending))"
        case .failed(let error): "failed(\(error.code))"
        }
    }
}
