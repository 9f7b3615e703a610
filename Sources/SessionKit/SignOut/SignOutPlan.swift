import SessionKitOAuth

/// The order of a sign-out, decided before anything runs: which phases, in which order, and which server steps.
///
/// A value, so the order the invariants need is read and tested in one place without sockets or sessions;
/// ``SessionManager/signOut(_:options:)`` performs the phases one by one and decides nothing of its own. The
/// detach that comes first (one step under the manager's lock, before the first suspension) is what makes the plan:
/// it learns whether the session was current.
///
/// The order, and why:
/// 1. ``Phase/seal``: the session stops admitting credential writes and its record's deletion is queued behind every
///    write it admitted, so the last operation on the record is its deletion.
/// 2. ``Phase/clear`` (only when the session was current): every container bound to it is emptied before the first
///    suspension, so no screen shows the account once it is gone.
/// 3. ``Phase/publish``: observers learn of the new sessions, current session and state, and a successor that became
///    current is marked so; still before the first suspension.
/// 4. ``Phase/settleWrites``: writes in flight wait, are handed off or discarded, per their policy, within the local
///    deadline; they still have their session to finish on.
/// 5. ``Phase/cancel``: the session ends; no request, refresh or credential write of it survives. Its tokens as they
///    were at the end are what the server steps get.
/// 6. ``Phase/startServerSteps``: the server steps start, each on a client of its own, bounded, beside the purge.
/// 7. ``Phase/purge``: the record (its deletion queued at the seal), the account's directory and outbox, every
///    registered resource.
/// 8. ``Phase/awaitServerSteps`` (only with ``SignOutOptions/waitForServer``): their outcomes join the report;
///    otherwise the report says which run in the background.
struct SignOutPlan: Sendable, Equatable {
    /// One phase of a sign-out after its detach.
    enum Phase: Sendable, Equatable, CaseIterable {
        case seal, clear, publish, settleWrites, cancel, startServerSteps, purge, awaitServerSteps
    }

    /// One step a sign-out takes on a server, each reported in a field of its own.
    enum ServerStep: String, Sendable, Equatable, CaseIterable {
        /// RFC 7009 revocation of the refresh token (``SignOutReport/refreshTokenRevocation``).
        case refreshTokenRevocation = "refresh_token_revocation"
        /// The app's backend sign-out (``SignOutReport/serverSession``).
        case serverSession = "server_session"
        /// RFC 7009 revocation of the access token (``SignOutReport/accessTokenRevocation``), once the backend step
        /// has finished or half the bound has passed, whichever comes first.
        case accessTokenRevocation = "access_token_revocation"
        /// The provider's sign-out: the app's own call and RP-initiated logout (``SignOutReport/providerLogout``).
        case providerLogout = "provider_logout"
    }

    /// The phases, in the order they run.
    let phases: [Phase]

    /// The plan for a session that was current or not, with `options`.
    init(wasCurrent: Bool, options: SignOutOptions) {
        phases = Phase.allCases.filter { phase in
            switch phase {
            case .clear: wasCurrent
            case .awaitServerSteps: options.waitForServer
            default: true
            }
        }
    }

    /// The server steps that run, decided once the session has ended from ``SignOutOptions/serverSteps``: a step
    /// runs when the list asks for it and there is something to send. A token that is empty (a restored session
    /// that never fetched an access token) is not revoked: there is nothing to revoke, and the server would only
    /// answer an error; with no revoker there is nowhere to send it. The app's backend step needs the tokens the
    /// session ended with; the provider's sign-out needs none.
    static func serverSteps(options: SignOutOptions, tokens: TokenSet?, canRevoke: Bool) -> [ServerStep] {
        let asked = Set(options.serverSteps.map(\.reportedAs))
        return ServerStep.allCases.filter { step in
            guard asked.contains(step) else { return false }
            switch step {
            case .refreshTokenRevocation: return canRevoke && tokens?.refreshToken?.isEmpty == false
            case .serverSession: return tokens != nil
            case .accessTokenRevocation: return canRevoke && tokens?.accessToken.isEmpty == false
            case .providerLogout: return true
            }
        }
    }

    /// Whether the access token's revocation waits (until the backend step has finished, or half the bound has
    /// passed) before it is sent: when both run, because a backend that authenticates its sign-out call with the
    /// access token must see it still valid.
    static func accessRevocationWaitsForBackend(_ planned: [ServerStep]) -> Bool {
        planned.contains(.serverSession) && planned.contains(.accessTokenRevocation)
    }
}

extension SignOutServerStep {
    /// The report's field this step's outcome is told in; steps told in one field run one after the other.
    var reportedAs: SignOutPlan.ServerStep {
        switch kind {
        case .revokeRefreshToken: .refreshTokenRevocation
        case .revokeAccessToken: .accessTokenRevocation
        case .backend: .serverSession
        case .provider, .openID: .providerLogout
        }
    }
}

extension SignOutReport {
    /// The outcome of one server step.
    subscript(step: SignOutPlan.ServerStep) -> StepOutcome {
        get {
            switch step {
            case .refreshTokenRevocation: refreshTokenRevocation
            case .serverSession: serverSession
            case .accessTokenRevocation: accessTokenRevocation
            case .providerLogout: providerLogout
            }
        }
        set {
            switch step {
            case .refreshTokenRevocation: refreshTokenRevocation = newValue
            case .serverSession: serverSession = newValue
            case .accessTokenRevocation: accessTokenRevocation = newValue
            case .providerLogout: providerLogout = newValue
            }
        }
    }
}
