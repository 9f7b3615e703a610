import Foundation
import SessionKitOAuth

extension SessionManager {
    /// The live session of `account`, loaded from the store when this process has none: how a server that acts for
    /// many users, as several instances on one shared store, finds the session of the user a request is for.
    ///
    /// The session is live but not made current (a server has no current user). A session another instance
    /// refreshed meanwhile adopts the stored tokens at its next refresh, through the store's coordination; one whose
    /// account another instance signs out ends when that instance announces it. Concurrent loads of one account make
    /// one session: the first installed is the one every caller gets.
    ///
    /// - Parameter account: The account.
    /// - Returns: The session; `nil` when the store has no record of the account (never signed in, or signed out,
    ///   also while the load ran), or the account is being signed out in this process or its purge is still pending.
    /// - Throws: ``SessionError``: what the store throws (`storeUnavailable` for a store that cannot be reached now:
    ///   the account is not signed out), `corruptCredentials` for a record that cannot be read, or an unknown
    ///   provider.
    public func session(for account: Account) async throws -> UserSession? {
        if let live = snapshot.sessions.first(where: { $0.account == account && $0.isActive }) { return live }
        guard !journal.isPending(account), let record = try await vault.load(for: account),
            let loaded = try restoredSession(of: account, from: record)
        else { return nil }
        guard case .live(let kept) = send(.installIfAbsent(loaded)) else { return nil }
        guard kept === loaded else {
            // Another load installed its session first; this one never sent anything.
            loaded.end()
            return kept
        }
        rebindContainers()
        registrar.withMutation(of: self, keyPath: \.sessions) {}
        diagnose(.info, .sessionLoaded, account: account, [:])
        // A sign-out elsewhere that deleted the record between the read above and the install was announced to a
        // manager that did not list this session yet, so no check ended it: read once more now that it is listed.
        do {
            if try await vault.load(for: account) == nil, loaded.isActive { loaded.endSignedOutElsewhere() }
        } catch {
            // A read that fails proves nothing, as for a notice's check: the session goes on.
        }
        return loaded.isActive ? loaded : nil
    }
}
