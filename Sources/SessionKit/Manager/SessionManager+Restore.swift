import Foundation
import SessionKitOAuth

extension SessionManager {
    /// Restores at launch: finishes any purge a crash interrupted, loads stored credentials, and decides the
    /// state.
    ///
    /// Every stored account gets a live session. The current one is the account that was current when the app
    /// last ran (the last signed in or switched to; for records saved before SessionKit kept that, the first by
    /// storage key). When it holds no usable access token it refreshes, and restore waits for that refresh at most
    /// ``Configuration/launchBudget`` (2 seconds by default): if the refresh succeeds meanwhile the state is active;
    /// if the provider cannot be reached, or has not answered within the budget, the state is active and offline
    /// while the refresh goes on (a network error never signs anyone out; its outcome then updates the state); if
    /// the provider rejects the refresh token, re-authentication required. A store that cannot be read (locked,
    /// unavailable, or the user cancelled the prompt guarding it) is not an empty one: when no account could be
    /// restored for that reason the state is ``SessionState/failed(_:)`` with the store's error, nothing is
    /// deleted, and calling `restore()` again tries again.
    ///
    /// - Returns: The state after restore.
    /// - Important: Call it once at launch, before anything signs in or sends a request: a purge that a crash
    ///   interrupted is finished first, so no request ever authenticates with credentials a sign-out had already
    ///   been asked to delete.
    @discardableResult
    public func restore() async -> SessionState {
        apply(.restoreStarted)
        let clock = configuration.sessionConfiguration.clock
        // An interrupted purge is finished before anything authenticates; an account whose purge still fails is
        // not restored.
        var purging: Set<Account> = []
        for account in journal.pending() {
            let deadline = clock.now.advanced(by: SignOutOptions().localTimeout)
            // An outbox set aside for the account stays for its next sign-in: the disposition asked at sign-out is
            // not known here, and keeping is never another user's gain.
            if !(await purge(account, outbox: .keepForAccount, deadline: deadline).succeeded) {
                purging.insert(account)
            }
        }
        let accounts: [Account]
        do {
            accounts = try await vault.store.accounts().filter { !purging.contains($0) }
        } catch {
            // Unreadable is not empty: nobody is signed out, and nothing is deleted; restore can run again, and
            // runs again by itself once a locked store opens.
            let failure = Self.restoreError(error)
            apply(.restoreFailed(failure))
            diagnose(.notice, .restoreFinished, account: nil, ["outcome": "failed", "code": "\(failure.code)"])
            if failure.code == .storeUnavailable { retryRestore(lockedAccounts: []) }
            return state
        }
        var restored: [(session: UserSession, selectedAt: Date?)] = []
        var unreadable: SessionError?
        var locked: Set<Account> = []
        for account in accounts {
            let loaded: CredentialRecord?
            do {
                loaded = try await vault.load(for: account)
            } catch {
                // Kept as it is (a cancelled prompt, a locked store): a later restore may read it.
                let failure = Self.restoreError(error)
                unreadable = unreadable ?? failure
                if failure.code == .storeUnavailable { locked.insert(account) }
                continue
            }
            guard let loaded else { continue }
            do {
                guard let session = try restoredSession(of: account, from: loaded) else { continue }
                restored.append((session, loaded.selectedAt))
            } catch {
                unreadable = unreadable ?? error
            }
        }
        // The account current when the app last ran: the rule sign-out follows for the account that follows.
        restored.sort { Self.precedes(($0.session.account, $0.selectedAt), ($1.session.account, $1.selectedAt)) }
        guard let first = restored.first?.session else {
            apply(unreadable.map { .restoreFailed($0) } ?? .restoredNothing)
            diagnose(
                unreadable == nil ? .info : .notice, .restoreFinished, account: nil,
                unreadable.map { ["outcome": "failed", "code": "\($0.code)", "unreadable": "\(locked.count)"] }
                    ?? ["outcome": "nothing"])
            if !locked.isEmpty { retryRestore(lockedAccounts: []) }
            return state
        }
        if !locked.isEmpty { retryRestore(lockedAccounts: locked) }
        for (session, _) in restored { install(session, makeCurrent: session === first) }
        guard first.tokens?.accessToken.isEmpty == true else {
            settleRestore(of: first, offline: false)
            diagnoseRestore(of: first, accounts: restored.count, unreadable: locked.count, reason: nil)
            return state
        }
        // The refresh runs on its own; restore waits for it only within the launch budget.
        let outcome = Broadcast<Bool>()
        Task {
            do {
                try await first.refreshTokens()
                outcome.resolve(.success(false))
            } catch let error as SessionError where error.code == .userCancelled {
                outcome.resolve(.success(false))
            } catch {
                outcome.resolve(.success(true))
            }
        }
        let budget = clock.now.advanced(by: configuration.launchBudget)
        let answered = try? await outcome.value(
            deadline: budget,
            clock: clock,
            timeoutError: SessionError(.timedOut, "the launch budget passed")
        )
        let offline = answered ?? true
        settleRestore(of: first, offline: offline)
        diagnoseRestore(
            of: first, accounts: restored.count, unreadable: locked.count,
            reason: answered == nil ? "launch_budget" : offline ? "network" : nil)
        // A rejected refresh token's record is deleted before restore returns, within the budget: a program that
        // restores and exits must not leave the dead token for every later launch to present. The session ended
        // with its deletion queued (rejectSession), so the vault's queue holds it by now.
        if !first.isActive { _ = await finishCredentialOperations(until: budget) }
        return state
    }

    /// Emits what restore came to: the account current now, how many restored, and why offline when it is.
    private func diagnoseRestore(of first: UserSession, accounts: Int, unreadable: Int, reason: String?) {
        guard configuration.sessionConfiguration.diagnostics != nil else { return }
        let outcome: String
        switch state {
        case .active(_, let offline): outcome = offline ? "offline" : "restored"
        case .reauthenticationRequired: outcome = "rejected"
        default: outcome = state.diagnosticName
        }
        var fields = ["outcome": outcome, "accounts": "\(accounts)"]
        if outcome == "offline", let reason { fields["reason"] = reason }
        if unreadable > 0 { fields["unreadable"] = "\(unreadable)" }
        diagnose(
            outcome == "restored" ? .info : .notice, .restoreFinished, account: current?.account ?? first.account,
            fields)
    }

    /// A session of `account` from its stored record, not yet installed; `nil` for a record filed under another
    /// account or holding no token.
    ///
    /// - Throws: ``SessionError`` when the record names a provider this configuration lacks: its tokens are good
    ///   only at the provider that issued them, so the record is kept as it is (a later build may have it again)
    ///   and not restored, rather than refreshed at another client, which would reject the token and sign the user
    ///   out for nothing.
    func restoredSession(of account: Account, from record: CredentialRecord) throws(SessionError) -> UserSession? {
        guard record.account == account, record.refreshToken != nil || record.accessToken != nil else { return nil }
        let provider = try configuration.provider(record.provider, for: account)
        let session = makeSession(
            account: account, tokens: record.tokens(clock: configuration.sessionConfiguration.clock),
            provider: provider, providerSessionID: record.providerSessionID)
        session.restoreSelection(record.selectedAt)
        return session
    }

    /// Ends restore with the state of what is current now, read under the lock that changes it: `first` rejected
    /// meanwhile (its session ended and left `current`) is re-authentication required, whatever the refresh's
    /// waiters saw.
    private func settleRestore(of first: UserSession, offline: Bool) {
        apply { guarded in
            guard guarded.current === first, first.isActive else {
                if let current = guarded.current { return .restored(current.account) }
                return .restoreRejected(first.account)
            }
            let usable = first.tokens.map { !$0.accessToken.isEmpty } ?? false
            return usable && !offline ? .restored(first.account) : .restoredOffline(first.account)
        }
    }

    /// Which of two accounts is current when the app has not said: the one current more recently (signed in or
    /// switched to); one never current comes after; ties by storage key. Restore applies it to the stored records,
    /// and sign-out to the sessions left when the current one goes, so a launch after a sign-out makes current the
    /// account the running app had made current.
    static func precedes(_ lhs: (account: Account, selectedAt: Date?), _ rhs: (account: Account, selectedAt: Date?))
        -> Bool
    {
        switch (lhs.selectedAt, rhs.selectedAt) {
        case (let l?, let r?) where l != r: return l > r
        case (.some, nil): return true
        case (nil, .some): return false
        default: return lhs.account.storageKey < rhs.account.storageKey
        }
    }

    /// The error a restore reports for a store that could not be read.
    fileprivate static func restoreError(_ error: any Error) -> SessionError {
        if let error = error as? SessionError { return error }
        return SessionError(.storageFailure, "the credential store could not be read (\(type(of: error)))")
    }
}
