import Foundation
import SessionKitOAuth

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
    ///   - provider: The ``Provider`` whose client issued the tokens, which refreshes and revokes them from now on;
    ///     `nil` for the default one.
    ///   - makeCurrent: Whether the new session becomes ``current``; other sessions stay alive either way.
    /// - Returns: The new session.
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`) when the credentials cannot be stored;
    ///   `invalidInput` for a provider that is not configured or is of another issuer; `CancellationError` when the
    ///   calling task is cancelled before the session is installed (nothing is stored).
    @discardableResult
    public func signIn(
        _ account: Account, tokens: TokenSet, through provider: Provider.ID? = nil, makeCurrent: Bool = true
    ) async throws -> UserSession {
        try await signIn(through: provider, makeCurrent: makeCurrent, authenticate: { (account, tokens) })
    }

    /// Signs in the account an OpenID Connect sign-in proved: the account comes from the ID token's validated
    /// claims (`iss`, `sub`), never from the app.
    ///
    /// ```swift
    /// let session = try await manager.signIn(through: "id.example", openID: {
    ///     try await provider.authorizeInBrowser { url in openInBrowser(url) }
    /// })
    /// ```
    ///
    /// - Parameters:
    ///   - provider: The ``Provider`` the grant runs against (``Provider/init(id:openID:)``); `nil` for the default.
    ///   - makeCurrent: Whether the new session becomes ``current``.
    ///   - openID: Runs the sign-in: ``OpenIDProvider/authorizeInBrowser(scope:additionalParameters:listener:timeout:open:)``,
    ///     ``OpenIDProvider/signIn(code:for:)`` or ``OpenIDProvider/pollDeviceAuthorization(_:receivedAt:)``.
    /// - Returns: The new session.
    /// - Throws: As ``signIn(through:makeCurrent:authenticate:)``.
    @discardableResult
    public func signIn(
        through provider: Provider.ID? = nil,
        makeCurrent: Bool = true,
        openID: @Sendable () async throws -> OpenIDSignIn
    ) async throws -> UserSession {
        try await signIn(through: provider, makeCurrent: makeCurrent) { () -> (account: Account, tokens: TokenSet) in
            let signIn = try await openID()
            return (signIn.account, signIn.tokens)
        }
    }

    /// Signs in by running `authenticate`, a grant the app runs (an authorization code, a device flow), which
    /// obtains the tokens and says whose they are: usually from the ID token the grant returned
    /// (``Account/init(idToken:)``), or an account the app already knows.
    ///
    /// `authenticating` is published while the closure runs. If the sign-in fails or is cancelled while another
    /// account is current, the state returns to that account (it is still signed in) and the error is thrown to the
    /// caller.
    ///
    /// ```swift
    /// let session = try await manager.signIn { [client] in
    ///     let tokens = try await client.exchange(code: code, for: authorizationRequest)
    ///     // No ID token, or one without `iss` and `sub`: malformedTokenResponse, and nothing is stored.
    ///     return (try Account(idToken: tokens.idToken ?? ""), tokens)
    /// }
    /// ```
    ///
    /// The kinds of sign-in and their shapes: tokens you already hold, ``signIn(_:tokens:through:makeCurrent:)``;
    /// an OpenID Connect sign-in (browser, code or device flow), ``signIn(through:makeCurrent:openID:)``; a grant
    /// that says who signed in, this one; a grant that does not, ``signIn(through:makeCurrent:authenticate:identify:)``.
    ///
    /// - Parameters:
    ///   - provider: The ``Provider`` the grant runs against, which refreshes and revokes the account's tokens from
    ///     now on; `nil` for the default one.
    ///   - makeCurrent: Whether the new session becomes ``current``.
    ///   - authenticate: Obtains the account and its tokens.
    /// - Returns: The new session, of the account `authenticate` returned.
    /// - Throws: Only ``SessionError``s, and `CancellationError` when the calling task is cancelled before the
    ///   session is installed: a ``SessionError`` `authenticate` throws, unchanged; any other error it throws as
    ///   ``SessionError/Code/appError``, whose ``SessionError/underlyingError`` is that error and whose message names
    ///   only its type, so that no text of the app's error (which may quote a code or a token) reaches a log; a
    ///   storage error; `invalidInput` for a provider that is not configured (checked before `authenticate` runs)
    ///   or is of another issuer than the account. While another account is current the state goes back to it;
    ///   otherwise it becomes ``SessionState/failed(_:)`` with the very error thrown (``SessionState/signedOut``
    ///   for a cancellation or a `userCancelled` error).
    @discardableResult
    public func signIn(
        through provider: Provider.ID? = nil,
        makeCurrent: Bool = true,
        authenticate: @Sendable () async throws -> (account: Account, tokens: TokenSet)
    ) async throws -> UserSession {
        if makeCurrent { apply(.signInStarted) }
        do {
            // An unknown name is refused before the user is sent through a grant whose tokens could not be kept.
            if let provider, !configuration.providers.contains(where: { $0.id == provider }) {
                throw SessionError(.invalidInput, "no provider named \(provider) is configured")
            }
            // What the OAuth client does meanwhile (a DPoP nonce it is asked for) is told through the manager's sink.
            let (account, tokens) = try await DiagnosticContext.with(
                configuration.sessionConfiguration, account: nil, authenticate)
            let resolved = try configuration.provider(provider, for: account)
            try await waitForSignOuts(of: account)
            try Task.checkCancellation()
            await finishInterruptedPurge(of: account)
            // The account's live session ends before the new record is written, so no credential write it admitted
            // (a refresh committing now) can land after the new record; its refresh in flight is cancelled, not
            // left to store a rotation of the grant the new record replaces.
            for replaced in snapshot.sessions where replaced.account == account { replaced.finish() }
            let session = makeSession(account: account, tokens: tokens, provider: resolved)
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
            // The caller and the state see the same error: a SessionError, with an app's own error underneath.
            let thrown = Self.signInError(error)
            if makeCurrent { abandonSignIn(thrown) }
            throw thrown
        }
    }

    /// Signs in by running `authenticate` for the tokens, then `identify` to learn whose they are, through a
    /// provisional session: for grants that return no ID token, where the app asks its own API (a "me" request)
    /// or the provider's userinfo endpoint.
    ///
    /// The provisional session holds the new tokens and sends requests as any session does, by the manager's
    /// ``UserSession/Configuration`` (its credential scope and redirect rules included), but it belongs to no
    /// account: it stores nothing, does not refresh, is in no list and no container, and ends as soon as `identify`
    /// returns or throws, its cache and cookies with it. Once the account is known, it signs in as
    /// ``signIn(through:makeCurrent:authenticate:)`` does, with the same tokens.
    ///
    /// ```swift
    /// let session = try await manager.signIn(through: "device") {
    ///     try await deviceGrant()
    /// } identify: { provisional in
    ///     let (data, _) = try await provisional.data(for: URLRequest(url: api.appendingPathComponent("me")))
    ///     return Account(issuer: issuer, subject: try JSONDecoder().decode(Me.self, from: data).id)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - provider: The ``Provider`` the grant runs against; `nil` for the default one.
    ///   - makeCurrent: Whether the new session becomes ``current``.
    ///   - authenticate: Obtains the tokens.
    ///   - identify: Finds out who they belong to, using the provisional session it is given.
    /// - Returns: The new session, of the account `identify` returned.
    /// - Throws: As ``signIn(through:makeCurrent:authenticate:)``: a ``SessionError`` `authenticate` or `identify`
    ///   throws, unchanged, any other error they throw as ``SessionError/Code/appError``.
    @discardableResult
    public func signIn(
        through provider: Provider.ID? = nil,
        makeCurrent: Bool = true,
        authenticate: @Sendable () async throws -> TokenSet,
        identify: @Sendable (_ provisional: UserSession) async throws -> Account
    ) async throws -> UserSession {
        try await signIn(through: provider, makeCurrent: makeCurrent) { [configuration] in
            let tokens = try await authenticate()
            let provisional = UserSession(
                account: Account.provisional(),
                tokens: tokens,
                configuration: configuration.sessionConfiguration,
                vault: nil,
                tokenEndpoint: nil,
                refreshPolicy: configuration.refreshPolicy
            )
            defer { provisional.end() }
            return (try await identify(provisional), tokens)
        }
    }

    /// Puts the state back after a sign-in that did not complete: to the account still current, if there is one;
    /// else signed out (cancelled) or failed, with `error`, what ``signInError(_:)`` made of the failure.
    private func abandonSignIn(_ error: any Error) {
        apply { guarded in
            if let current = guarded.current, current.isActive { return .signInAbandoned(current.account) }
            guard let error = error as? SessionError else { return .signedOut }
            return error.code == .userCancelled ? .userCancelled : .signInFailed(error)
        }
    }

    /// What a failed sign-in throws: a ``SessionError`` or a `CancellationError` as it is, any other error (the
    /// app's own, from its closure) as ``signInFailure(_:)``.
    static func signInError(_ error: any Error) -> any Error {
        if error is SessionError || error is CancellationError { return error }
        return signInFailure(error)
    }

    /// A sign-in whose closure threw an error of the app's own: ``SessionError/Code/appError`` naming its type,
    /// the error itself kept underneath. Not its text, which may quote what the grant handled (a code, a token).
    static func signInFailure(_ error: any Error) -> SessionError {
        let bridged = error as NSError
        let typeName = String(reflecting: type(of: error))
        var message = "sign-in failed: the sign-in closure threw \(typeName)"
        // A Foundation error's domain and code say more than its type (URLError, CocoaError); a Swift error's domain
        // is its type's name again.
        if bridged.domain != typeName { message += " (\(bridged.domain) \(bridged.code))" }
        return SessionError(.appError, message, underlyingError: error)
    }

    /// Waits until every sign-out of `account` in progress has purged: its purge deletes the account's record and
    /// directory, and would take a new sign-in's with them.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled meanwhile.
    private func waitForSignOuts(of account: Account) async throws {
        while let signOut = snapshot.signOuts[account]?.first {
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
