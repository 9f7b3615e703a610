import Foundation
import SessionKitOAuth

extension UserSession {
    /// What committing tokens to the session came to.
    enum RefreshCommit {
        /// The session had ended: the tokens were dropped, stored nowhere and used by nothing.
        case ended
        /// The session holds the tokens; `write` is their pending store write, if any.
        case committed(accessToken: String, write: Task<(any Error)?, Never>?)
    }

    // Every write below is enqueued under the lifetime lock, after the lifetime said the session may still store
    // credentials: a purge enqueued at `end()` or at a sign-out's seal runs behind every write the session admitted,
    // so the last operation on an ended account's record is its deletion.

    /// Stops the session storing credentials and runs `enqueue` at that instant, under the lock that admits
    /// credential writes: a deletion it enqueues runs behind every write the session admitted, and no write is
    /// admitted after it. The session stays active (its requests go on with the tokens in memory) until `end()`.
    ///
    /// - Parameter enqueue: Called once, if the session is active; it must only enqueue work.
    /// - Returns: Whether the session was active.
    @discardableResult
    func sealCredentials(thenEnqueue enqueue: () -> Void) -> Bool {
        lifetime(.seal) { action in
            guard case .sealed(let first?) = action else { return false }
            if first { enqueue() }
            return true
        }
    }

    /// Records that the session became the app's current one by a switch, and stores that with its record.
    ///
    /// With a store shared between processes the write holds the refresh lock and re-reads the record first: when
    /// another process has rotated the tokens since this one read them, the record keeps that process's tokens and
    /// only the selection changes, so a switch never writes back a refresh token the server has retired. A record
    /// that is gone (signed out elsewhere) is not written back.
    ///
    /// - Parameter date: When.
    /// - Returns: The pending store write, or `nil` when nothing is written.
    @discardableResult
    func markSwitchedTo(at date: Date) -> Task<(any Error)?, Never>? {
        guard let vault, let lock = vault.store.coordination else { return markSelected(at: date) }
        guard lifetime(.select(date)).tokens != nil else { return nil }
        let account = account
        return Task {
            // Without the lock (another process held it past the bound) the selection is not stored: it is not worth
            // a write that could put back a retired token.
            guard let held = try? await lock.lock(for: account) else { return nil }
            defer { held.release() }
            guard let stored = try? await vault.store.load(for: account) else { return nil }
            let write = lifetime(.storableTokens) { action -> Task<(any Error)?, Never>? in
                guard case .storable(let tokens?, _) = action else { return nil }
                var record = record(for: tokens, selectedAt: date)
                if stored.refreshToken != tokens.refreshToken {
                    record = stored
                    record.selectedAt = date
                }
                return vault.enqueueSave(record)
            }
            return await write?.value
        }
    }

    /// When the session last became the app's current one, as stored with its record; `nil` if never.
    var selectedAt: Date? {
        lifetime(.selectedAt).date
    }

    /// Takes the moment the session was last current from its stored record, at restore; writes nothing.
    func restoreSelection(_ date: Date?) {
        lifetime(.restoreSelection(date))
    }

    /// Records that the session became the app's current one, and stores that with its record.
    ///
    /// - Parameter date: When.
    /// - Returns: The pending store write, or `nil` when nothing is written.
    @discardableResult
    func markSelected(at date: Date) -> Task<(any Error)?, Never>? {
        let (write, written) = lifetime(.select(date)) { action -> (Task<(any Error)?, Never>?, String?) in
            guard let tokens = action.tokens else { return (nil, nil) }
            return (vault?.enqueueSave(record(for: tokens, selectedAt: date)), tokens.refreshToken)
        }
        guard let write else { return nil }
        // The record is written whole, with the session's tokens of that moment: once it lands, the store holds that
        // refresh token, not one an earlier refused rotation had left there, and a rejected grant's deletion must
        // recognise it.
        return Task {
            let error = await write.value
            if error == nil, let written { self.noteStored(refreshToken: written) }
            return error
        }
    }

    /// Records that the store now holds `refreshToken` for this session: nothing is left behind if it is the
    /// session's current one; otherwise it is the retired token the record holds.
    func noteStored(refreshToken: String) {
        lifetime(.stored(refreshToken: refreshToken))
    }

    /// Replaces the session's tokens with a refresh result and admits its credential write, in one step that
    /// first checks the session is still active.
    ///
    /// - Parameter tokens: The refresh result.
    /// - Returns: `.ended` when the session ended (the result is dropped), else the new access token and the
    ///   pending store write.
    func commitRefreshed(_ tokens: TokenSet) -> RefreshCommit {
        lifetime(.commitRefreshed(tokens, refreshedBy: refresher)) { action -> RefreshCommit in
            guard case .commit(let merged?, let storable, let selectedAt) = action else { return .ended }
            // A sign-out has queued the record's deletion: the tokens serve the session's last requests and its
            // revocation, and are stored nowhere.
            guard storable else { return .committed(accessToken: merged.accessToken, write: nil) }
            let record = record(for: merged, selectedAt: selectedAt)
            return .committed(accessToken: merged.accessToken, write: vault?.enqueueSave(record))
        }
    }

    /// Replaces the session's tokens with those another process stored, in one step that first checks the session
    /// is still active; writes nothing (they are the stored record already).
    ///
    /// - Parameter tokens: The tokens read from the store.
    /// - Returns: `.ended` when the session ended (the tokens are dropped), else the access token.
    func adoptStored(_ tokens: TokenSet) -> RefreshCommit {
        guard case .commit(_?, _, _) = lifetime(.adopt(tokens, refreshedBy: refresher)) else { return .ended }
        return .committed(accessToken: tokens.accessToken, write: nil)
    }

    /// Whether the store refused the write of rotated tokens this session holds (a locked device): until a write
    /// succeeds, the stored record holds a refresh token the server has retired, and a refresh in this process must
    /// store the session's tokens before it trusts the record.
    var hasUnstoredRotation: Bool {
        guard case .rotation(let unstored, _, _) = lifetime(.rotation) else { return false }
        return unstored
    }

    /// Whether this process's refresher is deleting the record of a grant the server rejected (set under the
    /// account's cross-process lock, just before the deletion): the record is then gone because of this session's
    /// own rejection, reported a moment later, not because another process signed the account out. Read as a
    /// sign-out elsewhere, it would hide the rejection: the user would be signed out instead of asked to sign in again.
    var isDeletingRejectedGrant: Bool {
        guard case .rotation(_, _, let deleting) = lifetime(.rotation) else { return false }
        return deleting
    }

    /// Records that the session's tokens reached the store, after a write of rotated ones had been refused.
    func storedPendingRotation() {
        lifetime(.stored(refreshToken: nil))
    }

    /// Writes the tokens the session holds now, after a store refused a rotation of them: on success the manager
    /// hears `.stored` and the record no longer holds a retired refresh token.
    ///
    /// - Returns: The write's error; `nil` when it succeeded, or when the session ended and nothing was written.
    func storeKeptTokens() async -> (any Error)? {
        guard let write = persistTokens() else { return nil }
        if let error = await write.value { return error }
        storedPendingRotation()
        report(.stored)
        return nil
    }

    /// Enqueues a write of the current tokens if the session is active.
    ///
    /// - Returns: The pending write, or `nil` when the session ended or has no vault.
    func persistTokens() -> Task<(any Error)?, Never>? {
        lifetime(.storableTokens) { action in
            guard case .storable(let tokens?, let selectedAt) = action else { return nil }
            return vault?.enqueueSave(record(for: tokens, selectedAt: selectedAt))
        }
    }

    /// Whether records written for this session hold the access token: when the app asked for it, or when the
    /// store is shared between processes (the others use the access token a refresh stored).
    var storesAccessToken: Bool {
        configuration.storesAccessToken || vault?.store.coordination != nil
    }

    /// The record that stores `tokens` for this session's account: the least the configuration needs, as the
    /// table in Getting Started says. The refresh token and the DPoP key it is bound to, always; the access token
    /// only when the app asked for it or other processes adopt it; the ID token only when the app asked for it
    /// (another process adopting a rotation keeps its own, so sharing the store needs no ID token on disk).
    func record(for tokens: TokenSet, selectedAt: Date?) -> CredentialRecord {
        var expiry: Date?
        let storesAccessToken = storesAccessToken
        if storesAccessToken, let lifetime = tokens.lifetime {
            expiry = tokens.receivedAtWall.addingTimeInterval(lifetime.timeInterval)
        }
        return CredentialRecord(
            account: account,
            refreshToken: tokens.refreshToken,
            accessToken: storesAccessToken ? tokens.accessToken : nil,
            accessTokenExpiresAt: expiry,
            idToken: configuration.storesIDToken ? tokens.idToken : nil,
            scope: tokens.scope,
            tokenType: tokens.tokenType,
            proofKey: tokens.proofKey,
            savedAt: configuration.clock.wallNow,
            selectedAt: selectedAt,
            provider: provider,
            providerSessionID: tokens.idToken.flatMap(JWT.sessionID(of:)) ?? restoredProviderSessionID
        )
    }
}
