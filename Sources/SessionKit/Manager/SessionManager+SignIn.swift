import Foundation

extension SessionManager {
    /// Signs `account` in with tokens obtained elsewhere (a grant the app ran, a test fixture).
    ///
    /// A sign-out of the same account still in progress (revoking, then purging) finishes first, and so does a
    /// purge of the account that failed earlier. A live session of the same account is ended before the new record
    /// is written (locally: its record is replaced, not purged), so nothing it was still writing can land after the
    /// new record.
    ///
    /// - Parameters:
    ///   - account: Who signed in.
    ///   - tokens: Their tokens.
    ///   - makeCurrent: Whether the new session becomes ``current``; other sessions stay alive either way.
    /// - Returns: The new session.
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`) when the credentials cannot be stored;
    ///   `CancellationError` when the calling task is cancelled before the session is installed (nothing is stored).
    @discardableResult
    public func signIn(_ account: Account, tokens: TokenSet, makeCurrent: Bool = true) async throws -> UserSession {
        try await signIn(account, makeCurrent: makeCurrent) { tokens }
    }

    /// Signs in by running `authenticate` (an OAuth grant, a device flow), publishing `authenticating` while it
    /// runs.
    ///
    /// If the sign-in fails or is cancelled while another account is current, the state returns to that account
    /// (it is still signed in) and the error is thrown to the caller.
    ///
    /// - Parameters:
    ///   - account: Who is signing in.
    ///   - makeCurrent: Whether the new session becomes ``current``.
    ///   - authenticate: Obtains the tokens.
    /// - Returns: The new session.
    /// - Throws: What `authenticate` throws (`userCancelled` returns the state to signed out), a storage error, or
    ///   `CancellationError` when the calling task is cancelled before the session is installed.
    @discardableResult
    public func signIn(
        _ account: Account,
        makeCurrent: Bool = true,
        authenticate: @Sendable () async throws -> TokenSet
    ) async throws -> UserSession {
        try await signIn(makeCurrent: makeCurrent) { (account, try await authenticate()) }
    }

    /// Signs in by running `authenticate`, which finds out who signed in as well as obtaining their tokens:
    /// usually from the ID token the grant returned (``Account/init(idToken:)``).
    ///
    /// Everything else is as for ``signIn(_:makeCurrent:authenticate:)``: `authenticating` is published while the
    /// closure runs, and a sign-in that fails or is cancelled returns the state to the account still current.
    ///
    /// ```swift
    /// let session = try await manager.signIn { [client] in
    ///     let tokens = try await client.exchange(code: code, pkce: pkce, redirectURI: redirectURI)
    ///     // No ID token, or one without `iss` and `sub`: malformedTokenResponse, and nothing is stored.
    ///     return (try Account(idToken: tokens.idToken ?? ""), tokens)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - makeCurrent: Whether the new session becomes ``current``.
    ///   - authenticate: Obtains the account and its tokens.
    /// - Returns: The new session, of the account `authenticate` returned.
    /// - Throws: What `authenticate` throws, a storage error, or `CancellationError` when the calling task is
    ///   cancelled before the session is installed.
    @discardableResult
    public func signIn(
        makeCurrent: Bool = true,
        authenticate: @Sendable () async throws -> (account: Account, tokens: TokenSet)
    ) async throws -> UserSession {
        if makeCurrent { apply(.signInStarted) }
        do {
            let (account, tokens) = try await authenticate()
            try await waitForSignOuts(of: account)
            try Task.checkCancellation()
            await finishInterruptedPurge(of: account)
            // The account's live session ends before the new record is written, so no credential write it admitted
            // (a refresh committing now) can land after the new record.
            for replaced in guarded.withLock({ $0.sessions.filter { $0.account == account } }) { replaced.end() }
            let session = makeSession(account: account, tokens: tokens)
            let write =
                makeCurrent
                ? session.markSelected(at: configuration.sessionConfiguration.clock.wallNow) : session.persistTokens()
            if let write, let error = await write.value {
                session.end()
                throw error as? SessionError ?? SessionError(.storageFailure, "could not store credentials")
            }
            install(session, makeCurrent: makeCurrent, event: .signedIn(account))
            return session
        } catch {
            if makeCurrent { abandonSignIn(error) }
            if error is CancellationError { throw error }
            if let error = error as? SessionError { throw error }
            throw SessionError(.authorizationFailed, "sign-in failed")
        }
    }

    /// Puts the state back after a sign-in that did not complete: to the account still current, if there is one;
    /// else signed out (cancelled) or failed.
    private func abandonSignIn(_ error: any Error) {
        apply { guarded in
            if let current = guarded.current, current.isActive { return .signInAbandoned(current.account) }
            if error is CancellationError { return .signedOut }
            guard let error = error as? SessionError else {
                return .signInFailed(SessionError(.authorizationFailed, "sign-in failed"))
            }
            return error.code == .userCancelled ? .userCancelled : .signInFailed(error)
        }
    }

    /// Waits until every sign-out of `account` in progress has purged: its purge deletes the account's record and
    /// directory, and would take a new sign-in's with them.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled meanwhile.
    private func waitForSignOuts(of account: Account) async throws {
        while let signOut = guarded.withLock({ $0.signOuts[account]?.first }) {
            try await signOut.value(
                deadline: nil, clock: configuration.sessionConfiguration.clock, timeoutError: CancellationError())
        }
    }

    /// Finishes a purge of `account` that failed or was interrupted earlier, before the account's new record is
    /// written; then forgets its intent whatever the outcome, so that no later launch takes the new session's data.
    ///
    /// Anything a failed step left behind belongs to the account that is signing in again: no other user's data is
    /// exposed by keeping it.
    private func finishInterruptedPurge(of account: Account) async {
        guard journal.isPending(account) else { return }
        let clock = configuration.sessionConfiguration.clock
        // An outbox set aside for the account is its own: kept for this very sign-in.
        _ = await purge(
            account,
            outbox: .keepForAccount,
            deadline: clock.now.advanced(by: SignOutOptions().localTimeout)
        )
        journal.complete(account)
    }
}
