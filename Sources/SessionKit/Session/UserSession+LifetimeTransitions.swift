import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The lifetime's transitions that no request's path takes (tokens committed, credential writes, writes, the
// URLSessions made on first use, the end, refused rotations): in a file of their own, so that a request's path reads
// one file of the lifetime (`UserSession+Lifetime.swift`). The transition table is in ``UserSession/Lifetime``'s
// documentation.
extension UserSession.Lifetime {
    /// Holds a refresh result if the session is active, keeping the refresh token it replaces when the result
    /// has none (RFC 6749 §6).
    ///
    /// - Returns: The tokens now held and whether they may be stored (no sign-out has sealed the record), or
    ///   `nil` when the session has ended (the result is dropped).
    mutating func commitRefreshed(
        _ refreshed: TokenSet, refreshedBy refresher: TokenRefresher?
    ) -> (tokens: TokenSet, storable: Bool)? {
        guard isActive else { return nil }
        var merged = refreshed
        if merged.refreshToken == nil { merged.refreshToken = tokens?.refreshToken }
        // A refresh answer may carry no ID token (OpenID Connect Core §12.2): the sign-in's stays the hint that
        // the provider's sign-out names the user by.
        if merged.idToken == nil { merged.idToken = tokens?.idToken }
        hold(merged, refreshedBy: refresher)
        return (merged, !credentialWritesSealed)
    }

    /// Holds tokens another process stored, if the session is active, keeping the ID token it holds when the
    /// record has none.
    ///
    /// - Returns: Whether the session was active (else the tokens are dropped).
    mutating func adopt(_ stored: TokenSet, refreshedBy refresher: TokenRefresher?) -> Bool {
        guard isActive else { return false }
        var adopted = stored
        // A record holds an ID token only with `storesIDToken`: the one this session signed in with stays the
        // hint the provider's sign-out names the user by.
        if adopted.idToken == nil { adopted.idToken = tokens?.idToken }
        hold(adopted, refreshedBy: refresher)
        return true
    }

    // MARK: Credential writes

    /// The tokens to store, or `nil` when none may be: the session ended, or a sign-out sealed its record.
    var storableTokens: TokenSet? {
        isActive && !credentialWritesSealed ? tokens : nil
    }

    /// Stops credential writes, if the session is active: from now on ``storableTokens`` is `nil` and refresh
    /// results are held, never stored.
    ///
    /// - Returns: `nil` when the session had ended; otherwise whether this call sealed them (`false`: a call
    ///   before did).
    mutating func sealCredentials() -> Bool? {
        guard isActive else { return nil }
        defer { credentialWritesSealed = true }
        return !credentialWritesSealed
    }

    /// Records that the session became the app's current one at `date`, if its record may still be written.
    ///
    /// - Returns: The tokens to store with the selection, or `nil` when nothing is written (nor recorded).
    mutating func select(at date: Date) -> TokenSet? {
        guard let tokens = storableTokens else { return nil }
        selectedAt = date
        return tokens
    }

    /// Takes the moment the session was last current from its stored record (at restore).
    mutating func restoreSelection(_ date: Date?) {
        selectedAt = date
    }

    // MARK: Writes

    /// Registers a write in flight with its policy, if the session is active.
    ///
    /// - Returns: Its id, for ``endWrite(_:)``; `nil` once the session has ended.
    mutating func beginWrite(_ write: UserSession.PendingWrite) -> Int? {
        guard isActive else { return nil }
        let id = allocateID()
        writes[id] = write
        return id
    }

    /// Forgets a write that returned.
    mutating func endWrite(_ id: Int) {
        writes.removeValue(forKey: id)
    }

    /// The writes in flight now.
    var pendingWrites: [UserSession.PendingWrite] { Array(writes.values) }

    /// The hand-off writes' URLSession with the token and the nonce for `url`, `.make` when none is made yet, or
    /// `.ended` once the session has ended (or holds no token to send).
    func handoffSupply(nonceFor url: URL?) -> Supply<URLSession> {
        guard isActive, let credential else { return .ended }
        guard let handoffSession else { return .make }
        return .use(handoffSession, credential, nonce: nonce(for: url, of: credential))
    }

    /// Keeps `made` as the hand-off writes' URLSession if none is kept yet and the session is active.
    ///
    /// - Returns: `.kept`, or `.spare(existing)`: `made` lost a race (or came after the end, `existing` `nil`) and
    ///   the caller invalidates it; nothing ever holds it.
    mutating func offerHandoff(_ made: URLSession) -> Offer<URLSession> {
        guard isActive else { return .spare(nil) }
        if let handoffSession { return .spare(handoffSession) }
        handoffSession = made
        return .kept
    }

    // MARK: Transfers

    /// The transfer URLSession with the token and the nonce for `url`, `.make` when none is made yet, or `.ended`
    /// once the session has ended.
    func transferSupply(nonceFor url: URL?) -> Supply<TransferSession> {
        guard isActive else { return .ended }
        guard let transfers else { return .make }
        return .use(transfers, credential, nonce: credential.flatMap { nonce(for: url, of: $0) })
    }

    /// Keeps `made` as the transfer URLSession, with the end handler that ends its tasks, if none is kept yet and
    /// the session is active: whoever sees the session active and the session kept sees the handler registered.
    ///
    /// - Returns: `.kept`, or `.spare(existing)`: the caller invalidates `made`, which no task was created on.
    mutating func offerTransfers(_ made: TransferSession) -> Offer<TransferSession> {
        guard isActive else { return .spare(nil) }
        if let transfers { return .spare(transfers) }
        transfers = made
        endHandlers[allocateID()] = { made.endAll() }
        return .kept
    }

    /// Where downloads go: the directory set with ``useDownloadsDirectory(_:)``, else `temporary()`, made on
    /// first use and removed at the end (a session without a manager has no account directory to be purged
    /// with).
    mutating func downloads(orTemporary temporary: () -> URL) -> URL {
        if let downloadsDirectory { return downloadsDirectory }
        let directory = temporary()
        downloadsDirectory = directory
        if isActive { endHandlers[allocateID()] = { try? FileManager.default.removeItem(at: directory) } }
        return directory
    }

    /// Sets where downloads go (the account's directory, for a session a manager made).
    mutating func useDownloadsDirectory(_ directory: URL?) {
        downloadsDirectory = directory
    }

    // MARK: The end

    /// Registers what runs at the end, if the session is active.
    ///
    /// - Returns: Its key, for ``removeEndHandler(_:)``; `nil` once the session has ended (the caller runs it).
    mutating func addEndHandler(_ handler: @escaping @Sendable () -> Void) -> Int? {
        guard isActive else { return nil }
        let key = allocateID()
        endHandlers[key] = handler
        return key
    }

    /// Forgets an end handler. Does nothing if it ran or was removed already.
    mutating func removeEndHandler(_ key: Int) {
        endHandlers.removeValue(forKey: key)
    }

    /// How many end handlers are registered.
    var endHandlerCount: Int { endHandlers.count }

    /// Sets who hears about the session's events.
    mutating func setEventHandler(_ handler: (@Sendable (SessionEvent) -> Void)?) {
        eventHandler = handler
    }

    /// Who hears about the session's events, or `nil` once it has ended: an ended session reports nothing.
    var activeEventHandler: (@Sendable (SessionEvent) -> Void)? { isActive ? eventHandler : nil }

    /// Ends the session: lowers ``isActive`` for good, forgets the tokens, and takes everything registered.
    ///
    /// - Returns: What the caller answers, cancels, runs and revokes once the lock is released, or `nil` if the
    ///   session had already ended.
    mutating func end() -> Ended? {
        guard isActive else { return nil }
        phase = .ended
        let ended = Ended(
            requests: requests, handlers: endHandlers, handoff: handoffSession, tokens: tokens,
            refreshTokenLeftInStore: refreshTokenLeftInStore)
        hold(nil, refreshedBy: nil)
        // Moved out whole, not copied: ending costs the same whatever is in flight.
        requests = [:]
        endHandlers = [:]
        return ended
    }

    // MARK: Refused rotations

    /// The store refused the write of rotated tokens; `presented` is the refresh token the record still holds.
    mutating func rotationRefused(leaving presented: String) {
        unstoredRotation = true
        refreshTokenLeftInStore = refreshTokenLeftInStore ?? presented
    }

    /// The store now holds `refreshToken` for this session (`nil`: the tokens the session holds): nothing is left
    /// behind if it is the session's current one; otherwise it is the retired token the record holds.
    mutating func stored(refreshToken: String?) {
        if let refreshToken, tokens?.refreshToken != refreshToken {
            refreshTokenLeftInStore = refreshToken
        } else {
            unstoredRotation = false
            refreshTokenLeftInStore = nil
        }
    }

    /// This process's refresher is about to delete the record of a grant the server rejected.
    mutating func beginDeletingRejectedGrant() {
        deletingRejectedGrant = true
    }
}

extension UserSession {
    /// An access token and the `Authorization` header value that sends it: worked out once when the session holds
    /// its tokens (``Lifetime/hold(_:refreshedBy:)``), read by every request.
    struct Credential {
        let token: String
        let authorization: String
        /// The DPoP key every request with the token carries a proof of, if the token is bound.
        let proofKey: DPoPKey?
        /// The proofs' `ath` for this token (RFC 9449 §4.2), when it is bound: the same for every proof.
        let proofTokenHash: String?

        init(tokens: TokenSet) {
            token = tokens.accessToken
            proofKey = tokens.proofKey
            proofTokenHash = tokens.proofKey == nil ? nil : DPoPProof.tokenHash(tokens.accessToken)
            authorization = (tokens.proofKey == nil ? "Bearer " : "DPoP ") + tokens.accessToken
        }
    }
}
