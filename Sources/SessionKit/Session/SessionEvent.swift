import SessionKitOAuth

/// Something that happened to a session that its owner must react to.
enum SessionEvent: Sendable {
    /// A refresh began.
    case refreshStarted
    /// A refresh failed without rejecting the refresh token (network, outage, user cancelled, loop guard).
    case refreshFailed(SessionError)
    /// The access token was refreshed and committed.
    case refreshed
    /// The authorization server rejected the refresh token: the account must sign in again.
    case refreshRejected(SessionError)
    /// A credential write failed; the session goes on with the tokens in memory.
    case storageFailed(any Error)
    /// A credential write succeeded.
    case stored
    /// Another process sharing the store signed the account out (its record is gone): the session ends.
    case signedOutElsewhere
}
