/// Something that happened to a session that its owner must react to.
enum SessionEvent: Sendable {
    /// The access token was refreshed and committed.
    case refreshed
    /// The authorization server rejected the refresh token: the account must sign in again.
    case refreshRejected(SessionError)
    /// A credential write failed; the session goes on with the tokens in memory.
    case storageFailed(any Error)
}
