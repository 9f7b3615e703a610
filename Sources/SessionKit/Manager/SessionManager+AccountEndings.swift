import Foundation
import SessionKitOAuth

/// What a back-channel logout did (``SessionManager/receiveBackChannelLogout(_:from:)``).
public struct BackChannelLogoutResult: Sendable {
    /// The validated logout token's claims: who, or which provider session, it named.
    public let claims: LogoutTokenClaims
    /// The accounts it ended: those with a live session here that it names, and those with only a record in the
    /// store that it names (their sessions in other processes on the store follow the record's deletion).
    public let endedAccounts: [Account]
    /// The report of each account it ended, in ``endedAccounts``' order: a sign-out's for a live session here, the
    /// record's deletion for an account with none.
    public let reports: [SignOutReport]
}

extension SessionManager {
    /// Ends `account` because the provider ended it: its session here as a sign-out ends one (detach, clear, cancel,
    /// purge, the record deleted, so every other process on the store ends its session too), without contacting any
    /// server, and says why: the report's ``SignOutReport/endedBy``, the state ``SessionState/accountEnded(_:_:)``
    /// when the account was current and no other is live, and a ``DiagnosticEvent/Kind/accountEnded`` event.
    ///
    /// The one entry point for every ending the user did not ask for in this app: Sign in with Apple revoked
    /// (``AppleIDCredentialMonitor``), a back-channel logout (``receiveBackChannelLogout(_:from:)``), or one the app
    /// learned of itself (``AccountEnding/init(_:)``). No revocation is sent: the provider ended the grant, and a
    /// revocation of a dead token would only wait on it.
    ///
    /// Writes in flight follow their ``WritePolicy`` as at a sign-out, within ``SignOutOptions/localTimeout``.
    ///
    /// - Parameters:
    ///   - account: The account the provider ended.
    ///   - ending: Why.
    /// - Returns: The sign-out's report when a session of `account` was live here; without one, a report of the
    ///   record's deletion (``SignOutReport/credentialDeletion``) when the store held one; `nil` when neither.
    @discardableResult
    public func endAccount(_ account: Account, because ending: AccountEnding) async -> SignOutReport? {
        await endAccount(account, because: ending, ifSessionID: nil)
    }

    /// ``endAccount(_:because:)``, of the account's provider session `sessionID` only when given: a record or a
    /// session of the account that belongs to another provider session (the user signed in again since) is left.
    func endAccount(
        _ account: Account, because ending: AccountEnding, ifSessionID sessionID: String?
    ) async -> SignOutReport? {
        let live = snapshot.sessions.first { $0.account == account && $0.isActive }
        if let live {
            guard sessionID == nil || live.providerSessionID == sessionID else { return nil }
            let report = await end(live, options: SignOutOptions(serverSteps: []), ending: ending)
            diagnose(
                .notice, .accountEnded, account: account,
                [
                    "reason": ending.name, "sessions": report == nil ? "0" : "1",
                    "record": report.map { "\($0.credentialDeletion)" } ?? "not found",
                ])
            return report
        }
        // No session here: the record alone, which the other processes' sessions follow.
        let deletion = vault.enqueueDelete(for: account) { record in
            sessionID == nil || record.providerSessionID == sessionID
        }
        let outcome: SignOutReport.StepOutcome
        switch await deletion.value {
        case .success(true): outcome = .succeeded
        case .success(false): outcome = .notRequested
        case .failure(let error): outcome = .failed((error as? SessionError)?.code ?? .storageFailure)
        }
        diagnose(
            .notice, .accountEnded, account: account,
            ["reason": ending.name, "sessions": "0", "record": outcome == .notRequested ? "not found" : "\(outcome)"])
        guard outcome != .notRequested else { return nil }
        var report = SignOutReport(account: account)
        report.endedBy = ending
        report.credentialDeletion = outcome
        return report
    }

    /// Validates a logout token the provider POSTed to the app's back-channel logout endpoint (OpenID Connect
    /// Back-Channel Logout 1.0) and ends every session it names, in this process and, through the store, in every
    /// other process on it.
    ///
    /// The token is checked by ``OpenIDProvider/validate(logoutToken:)``: the provider's signature, `iss`, `aud`,
    /// `iat` and `exp` on the provider's clock, the logout event, no `nonce`, a `sub` or a `sid`, a `jti` not seen
    /// before. A token that fails any check ends nothing.
    ///
    /// A token names the accounts of its issuer: with `sub`, that user's; with `sid`, the one whose session at the
    /// provider it is (``UserSession/providerSessionID``, kept in the account's record); with both, the user's when
    /// it is that session. Each account named ends as ``endAccount(_:because:)`` ends it, with
    /// ``AccountEnding/backChannelLogout``: its live session here, else its record in the store, deleted only if it
    /// still belongs to the named provider session.
    ///
    /// Answer the provider's POST with 200 when this returns, and with 400 when it throws
    /// ``SessionError/Code/logoutTokenRejected`` (§2.8); a thrown network error means the provider's keys could not
    /// be fetched: answer 501 or 503 and let the provider retry.
    ///
    /// - Parameters:
    ///   - logoutToken: The `logout_token` parameter of the POST's form body (``logoutToken(fromFormBody:)``).
    ///   - provider: The provider client the token is for: its issuer, client ID, keys and seen `jti`s.
    /// - Returns: The claims and what was ended.
    /// - Throws: `SessionError(.logoutTokenRejected)` naming the failed check, or what fetching the provider's
    ///   metadata and keys throws.
    @discardableResult
    public func receiveBackChannelLogout(
        _ logoutToken: String, from provider: OpenIDProvider
    ) async throws -> BackChannelLogoutResult {
        let claims: LogoutTokenClaims
        do {
            claims = try await provider.validate(logoutToken: logoutToken)
        } catch let error as SessionError where error.code == .logoutTokenRejected {
            diagnose(
                .warning, .backChannelLogout, account: nil,
                ["outcome": "refused", "check": error.idTokenCheck?.description ?? "format"])
            throw error
        }
        let named = { (account: Account) in
            account.issuer == claims.issuer && (claims.subject == nil || account.subject == claims.subject)
        }
        var accounts = snapshot.sessions.filter { $0.isActive && named($0.account) }.map(\.account)
        // Accounts with a record and no session here: a sid is matched against the record when the ending runs.
        if let stored = try? await vault.store.accounts() {
            for account in stored where named(account) && !accounts.contains(account) { accounts.append(account) }
        }
        var ended: [Account] = []
        var reports: [SignOutReport] = []
        for account in accounts {
            guard
                let report = await endAccount(account, because: .backChannelLogout, ifSessionID: claims.sessionID)
            else { continue }
            ended.append(account)
            reports.append(report)
        }
        let by = [claims.subject.map { _ in "sub" }, claims.sessionID.map { _ in "sid" }].compactMap { $0 }
        diagnose(
            .notice, .backChannelLogout, account: nil,
            ["outcome": "accepted", "by": by.joined(separator: "+"), "ended": "\(ended.count)"])
        return BackChannelLogoutResult(claims: claims, endedAccounts: ended, reports: reports)
    }

    /// The `logout_token` of a back-channel logout POST's body (`application/x-www-form-urlencoded`, §2.5).
    ///
    /// - Parameter body: The request's body, at most `OAuthLimits/maximumBodyBytes` bytes.
    /// - Returns: The logout token.
    /// - Throws: `SessionError(.logoutTokenRejected)` with check ``IDTokenCheck/format`` when the body is not a form
    ///   with exactly one non-empty `logout_token`.
    public static func logoutToken(fromFormBody body: Data) throws -> String {
        let refused = LogoutTokenValidator.refusal(.format, "is not the one \"logout_token\" of a form body")
        guard body.count <= OAuthLimits.maximumBodyBytes, let text = String(data: body, encoding: .utf8),
            let pairs = FormURLEncoding.decode(text)
        else { throw refused }
        let tokens = pairs.filter { $0.name == "logout_token" }.map(\.value)
        guard tokens.count == 1, let token = tokens.first, !token.isEmpty else { throw refused }
        return token
    }
}
