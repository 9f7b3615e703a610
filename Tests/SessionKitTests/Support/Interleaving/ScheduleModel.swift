import Foundation
import SessionKitTesting

@testable import SessionKit
@testable import SessionKitOAuth

/// What one schedule knows about the sessions, calls and tokens it made: the ground truth the invariants are
/// checked against. Shared with the token endpoint and the revoker the schedule's manager calls.
final class ScheduleModel: Sendable {
    /// The step running `end()` through a manager call, so the end marker can tell which step ended a session.
    enum StepContext {
        @TaskLocal static var step: Int?
    }

    /// What a violation is about: the safety invariants, or one of the three kinds of liveness.
    enum Kind: String, Sendable, CaseIterable, Comparable {
        /// Identity at commit, no work after end, every request with its own token, store and memory agree.
        case safety
        /// A refresh token reached the token endpoint twice (a provider with reuse detection revokes the grant).
        case reused
        /// A session left `manager.sessions` though no step signed it out and the server rejected nothing of it.
        case spurious
        /// `manager.state` disagrees with `manager.current`, or a registered container is not bound to `current`.
        case mismatched
        /// The schedule did not finish within ``ScheduleRun/bound``: something awaited an answer that never came.
        case stuck

        static func < (lhs: Kind, rhs: Kind) -> Bool {
            allCases.firstIndex(of: lhs) ?? 0 < allCases.firstIndex(of: rhs) ?? 0
        }
    }

    struct SessionRecord {
        let session: UserSession
        let account: Int
        /// A screen's container, bound to this session alone for its whole life (not through the manager).
        let screen: SessionScoped<ScheduleRun.Loaded?>
        /// When the first end marker ran: after `isActive` went down.
        var endedAt: ContinuousClock.Instant?
        /// The system's wall time then, which DPoP proofs' `iat` is compared with.
        var endedAtWall: Date?
        /// The step whose manager call ended the session, if a step did.
        var endedByStep: Int?
        /// Every call of the session started before the end marker ran.
        var startedBeforeEnd: Set<Int> = []
        /// Per step that set out to end the session: the session's calls still running when the step started.
        var atStepStart: [Int: Set<Int>] = [:]
        /// Per step that ended the session: how many requests `end()` said it cancelled.
        var cancelled: [Int: Int] = [:]
        /// Bumped each time a step may have bound the session to the container.
        var bindGeneration = 0
        /// Whether the end marker registered after the last bind has run (the container was cleared by then).
        var containerCleared = false
        /// Whether a sign-out of it has started and not finished.
        var signOutInProgress = false
        /// The gate its sign-out's revocation is held at, if it is.
        var revocationHold: Gate?
        /// Why the session may leave `manager.sessions` (a step signed it out or replaced it, or the script made
        /// the server reject its grant); `nil` while nothing may take it out.
        var mayLeave: String?
    }

    struct CallRecord {
        let session: Int
        let what: String
        /// A forced refresh: its task starts the refresh, unless one is already in flight.
        var isRefresh = false
        var outstanding = true
        var cancelledByCaller = false
        var outcome = "…"
    }

    enum RefreshScript: CustomStringConvertible {
        case transient
        case rejected
        /// Held at a gate before the request reaches the token endpoint.
        case hold(Gate)
        /// Sent at once; its answer (the server has rotated the refresh token by then) is held at a gate.
        case holdAnswer(Gate)

        var description: String {
            switch self {
            case .transient: "transient failure"
            case .rejected: "invalid_grant"
            case .hold: "held before the token endpoint"
            case .holdAnswer: "answer held after the token endpoint rotated"
            }
        }
    }

    struct State {
        var sessions: [Int: SessionRecord] = [:]
        var nextSession = 1
        var calls: [Int: CallRecord] = [:]
        var nextCall = 1
        /// Every token the schedule saw issued, and the session it was issued to.
        var tokenOwner: [String: Int] = [:]
        /// The thumbprint of the DPoP key each session's tokens are bound to, for the sessions whose tokens are.
        var keys: [Int: String] = [:]
        /// Per session, its refreshes' calls of the token endpoint: when each began and, once it returned, when it
        /// returned.
        var refreshCalls: [Int: [(began: ContinuousClock.Instant, returned: ContinuousClock.Instant?)]] = [:]
        /// Tokens from refreshes that completed after their session ended.
        var lateTokens: Set<String> = []
        /// Refresh tokens that refreshes returned (rotations), as opposed to sign-ins.
        var rotatedRefreshTokens: Set<String> = []
        var scripts: [Int: [RefreshScript]] = [:]
        /// Revocations to hold, per session: a signal opened when the revocation arrives, and the gate it waits at.
        var revocationHolds: [Int: (arrived: Gate, gate: Gate)] = [:]
        /// Token endpoint calls not yet answered.
        var refreshesInProgress = 0
        var violations: [String] = []
        var kinds: Set<Kind> = []
        var reported: Set<String> = []
    }

    let state = Locked(State())
    /// The schedule's seed, which every violation names.
    let seed: UInt64

    init(seed: UInt64) {
        self.seed = seed
    }

    /// Records a violation once, with where it was first seen and the schedule's seed.
    func violation(_ message: String, at label: String, kind: Kind = .safety) {
        state.withLock { state in
            state.kinds.insert(kind)
            if state.reported.insert(message).inserted {
                state.violations.append(
                    "\(label) (seed \(seed)): \(kind == .safety ? "" : "[\(kind)] ")\(message)")
            }
        }
    }

    var violations: [String] { state.withLock { $0.violations } }

    /// Token endpoint calls not yet answered.
    var refreshesInProgress: Int { state.withLock { $0.refreshesInProgress } }

    /// How many sessions of the schedule have a refresh flight in progress. A flight outlives its token request: it
    /// reports its outcome (a rejected grant makes the manager queue the record's deletion) after the endpoint
    /// returned, so waiting for `refreshesInProgress` alone can end a schedule in that window.
    var flightsInProgress: Int {
        let sessions = state.withLock { $0.sessions.values.map(\.session) }
        return sessions.filter { $0.refresher?.hasFlightInProgress == true }.count
    }

    /// The kinds of the violations found.
    var kinds: Set<Kind> { state.withLock { $0.kinds } }

    /// Records that `ordinal` may leave `manager.sessions` from now on, and why (the first reason is kept).
    func mayLeave(_ ordinal: Int, because reason: String) {
        state.withLock { state in
            if state.sessions[ordinal]?.mayLeave == nil { state.sessions[ordinal]?.mayLeave = reason }
        }
    }

    func owner(of token: String?) -> Int? {
        guard let token else { return nil }
        return state.withLock { $0.tokenOwner[token] }
    }

    func ordinal(of session: UserSession) -> Int? {
        state.withLock { state in state.sessions.first { $0.value.session === session }?.key }
    }

    func record(_ ordinal: Int) -> SessionRecord? {
        state.withLock { $0.sessions[ordinal] }
    }

    func newOrdinal() -> Int {
        state.withLock { state in
            defer { state.nextSession += 1 }
            return state.nextSession
        }
    }

    func own(_ tokens: TokenSet, by ordinal: Int) {
        state.withLock { state in
            state.tokenOwner[tokens.accessToken] = ordinal
            if let refresh = tokens.refreshToken { state.tokenOwner[refresh] = ordinal }
            if let key = tokens.proofKey { state.keys[ordinal] = key.thumbprint }
        }
    }

    /// Registers an end marker on `ordinal`'s session; it records the end, and — registered after a step that
    /// may have bound the session to the container, so after the container's own handler — that the container
    /// was cleared.
    func mark(_ ordinal: Int) {
        let registration = state.withLock { state -> (UserSession, Int)? in
            guard var record = state.sessions[ordinal] else { return nil }
            record.bindGeneration += 1
            state.sessions[ordinal] = record
            return (record.session, record.bindGeneration)
        }
        guard let (session, generation) = registration else { return }
        session.onEnd { [state] in
            let now = ContinuousClock.now
            let wallNow = Date()
            let endingStep = StepContext.step
            state.withLock { state in
                guard var record = state.sessions[ordinal] else { return }
                if record.endedAt == nil {
                    record.endedAt = now
                    record.endedAtWall = wallNow
                    record.endedByStep = endingStep
                    record.startedBeforeEnd = Set(state.calls.filter { $0.value.session == ordinal }.keys)
                }
                if record.bindGeneration == generation { record.containerCleared = true }
                state.sessions[ordinal] = record
            }
        }
    }

    func takeScript(for ordinal: Int?) -> RefreshScript? {
        guard let ordinal else { return nil }
        return state.withLock { state in
            guard var scripts = state.scripts[ordinal], !scripts.isEmpty else { return nil }
            let first = scripts.removeFirst()
            state.scripts[ordinal] = scripts
            return first
        }
    }

    /// Records a refresh result for the session that presented `refreshToken`; late if that session had ended.
    func refreshed(_ tokens: TokenSet, presenting refreshToken: String, completedAt: ContinuousClock.Instant) {
        state.withLock { state in
            if let refresh = tokens.refreshToken { state.rotatedRefreshTokens.insert(refresh) }
            guard let ordinal = state.tokenOwner[refreshToken] else { return }
            state.tokenOwner[tokens.accessToken] = ordinal
            if let refresh = tokens.refreshToken { state.tokenOwner[refresh] = ordinal }
            if let endedAt = state.sessions[ordinal]?.endedAt, endedAt < completedAt {
                state.lateTokens.insert(tokens.accessToken)
                if let refresh = tokens.refreshToken { state.lateTokens.insert(refresh) }
            }
        }
    }

    /// Whether `refreshToken` came from a refresh.
    func isRotated(_ refreshToken: String) -> Bool {
        state.withLock { $0.rotatedRefreshTokens.contains(refreshToken) }
    }

    /// Every token the schedule saw issued: what its sessions held, sent or not.
    var tokensIssued: Set<String> { state.withLock { Set($0.tokenOwner.keys) } }

    func takeRevocationHold(for token: String) -> (arrived: Gate, gate: Gate)? {
        state.withLock { state in
            guard let ordinal = state.tokenOwner[token] else { return nil }
            return state.revocationHolds.removeValue(forKey: ordinal)
        }
    }
}

/// The schedule's token endpoint: the mock's OAuth client, with failures and holds the schedule scripts per
/// session, and every issued token recorded with the session it belongs to. A refresh of DPoP-bound tokens is sent
/// with a proof of the key the session passes.
struct ScheduleTokenEndpoint: TokenEndpoint {
    let client: OAuthClient
    let model: ScheduleModel
    /// The sessions' clock, which the returned tokens' expiry is measured on.
    let clock: any SessionClock

    func refresh(using refreshToken: String) async throws -> TokenSet {
        try await refresh(using: refreshToken, account: nil, proofKey: nil)
    }

    func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws -> TokenSet {
        try await refresh(using: refreshToken, account: account, proofKey: proofKey)
    }

    private func refresh(using refreshToken: String, account: Account?, proofKey: DPoPKey?) async throws -> TokenSet {
        model.state.withLock { $0.refreshesInProgress += 1 }
        defer { model.state.withLock { $0.refreshesInProgress -= 1 } }
        let owner = model.owner(of: refreshToken)
        let call = model.state.withLock { state -> Int? in
            guard let owner else { return nil }
            state.refreshCalls[owner, default: []].append((ContinuousClock.now, nil))
            return state.refreshCalls[owner, default: []].count - 1
        }
        // When the call returned, for `checkProofs`: set when it answered or threw, except when its exchange threw
        // after its session had ended (the end cancels it): that call stays "in flight", since its request may still
        // be on the wire, and the server can read it after the call returned and before the end marker's handler ran.
        let returned = { [model] in
            if let owner, let call {
                model.state.withLock { $0.refreshCalls[owner]?[call].returned = ContinuousClock.now }
            }
        }
        if let owner, let bound = model.state.withLock({ $0.keys[owner] }), proofKey?.thumbprint != bound {
            model.violation(
                "a refresh of #\(owner)'s DPoP-bound tokens was asked for "
                    + (proofKey == nil ? "without a key" : "with another key"), at: "refresh")
        }
        let send = { [client, model] () async throws -> TokenSet in
            do {
                guard let account else { return try await client.refresh(using: refreshToken) }
                return try await client.refresh(using: refreshToken, for: account, proofKey: proofKey)
            } catch {
                let session = owner.flatMap { owner in model.state.withLock { $0.sessions[owner]?.session } }
                if session?.isActive != false { returned() }
                throw error
            }
        }
        switch model.takeScript(for: owner) {
        case .transient?:
            returned()
            throw SessionError(.providerOutage, "scripted outage", statusCode: 503)
        case .rejected?:
            returned()
            throw SessionError(.refreshRejected, "scripted invalid_grant", statusCode: 400, oauthError: "invalid_grant")
        case .hold(let gate)?:
            await gate.wait()
        case .holdAnswer(let gate)?:
            let fresh = try await send()
            await gate.wait()
            returned()
            return answer(fresh, presenting: refreshToken)
        case nil:
            break
        }
        let fresh = try await send()
        returned()
        return answer(fresh, presenting: refreshToken)
    }

    private func answer(_ fresh: TokenSet, presenting refreshToken: String) -> TokenSet {
        model.refreshed(fresh, presenting: refreshToken, completedAt: .now)
        // Expiry on the schedule's clock, so `expire` steps reach the tokens a refresh returned too.
        return TokenSet(
            accessToken: fresh.accessToken, refreshToken: fresh.refreshToken, idToken: fresh.idToken,
            scope: fresh.scope, tokenType: fresh.tokenType, proofKey: fresh.proofKey, lifetime: fresh.lifetime,
            receivedAt: clock.now, receivedAtWall: clock.wallNow)
    }
}

/// The clock of a schedule whose sessions use DPoP: the schedule's manual clock for everything SessionKit decides
/// by (expiry, backoff, waits), and the system's wall clock, which a proof's `iat` is stamped with and which the
/// shared mock checks it against. (A manual wall clock would move an hour at each `expire` step; the mock's does not.)
struct ScheduleDPoPClock: SessionClock {
    let manual: ManualClock

    var now: ContinuousClock.Instant { manual.now }
    var wallNow: Date { Date() }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await manual.sleep(until: deadline)
    }
}

/// The schedule's revoker: the mock's OAuth client, held at a gate when the schedule asks.
struct ScheduleRevoker: TokenRevoker {
    let client: OAuthClient
    let model: ScheduleModel

    func revoke(_ token: String, hint: TokenTypeHint) async throws {
        if let hold = model.takeRevocationHold(for: token) {
            hold.arrived.open()
            await hold.gate.wait()
        }
        try await client.revoke(token, hint: hint)
    }
}

/// An in-memory credential store that remembers every refresh token it saved, and refuses, when a step asks, the
/// next saves of an account's rotated tokens (those a refresh returned) as a full disk or a failing keyring does.
final class RecordingCredentialStore: CredentialStore {
    private let inner = InMemoryCredentialStore()
    private let saved = Locked<[String]>([])
    /// Per account, how many more saves of rotated tokens to refuse; and the accounts whose record lags behind the
    /// session's memory because one was refused (until a later save of the account succeeds).
    private let refusals = Locked<(pending: [Account: Int], lagging: Set<Account>)>(([:], []))
    /// Whether a refresh token came from a refresh (rather than a sign-in).
    private let isRotated: @Sendable (String) -> Bool

    init(isRotated: @escaping @Sendable (String) -> Bool) {
        self.isRotated = isRotated
    }

    var savedRefreshTokens: [String] { saved.withLock { $0 } }

    /// Refuses the next `count` saves of `account`'s rotated tokens with a storage failure.
    func refuseRotations(of account: Account, count: Int) {
        refusals.withLock { $0.pending[account, default: 0] += count }
    }

    /// Whether `account`'s record holds older tokens than its session because a save of them was refused.
    func lags(_ account: Account) -> Bool { refusals.withLock { $0.lagging.contains(account) } }

    func save(_ record: CredentialRecord) async throws {
        let rotated = record.refreshToken.map(isRotated) ?? false
        let refused = refusals.withLock { refusals -> Bool in
            guard rotated, let pending = refusals.pending[record.account], pending > 0 else {
                refusals.lagging.remove(record.account)
                return false
            }
            refusals.pending[record.account] = pending - 1
            refusals.lagging.insert(record.account)
            return true
        }
        if refused { throw SessionError(.storageFailure, "scripted: the disk refused the rotated tokens") }
        if let token = record.refreshToken { saved.withLock { $0.append(token) } }
        await inner.save(record)
    }

    func load(for account: Account) async throws -> CredentialRecord? { await inner.load(for: account) }
    func delete(for account: Account) async throws {
        refusals.withLock { _ = $0.lagging.remove(account) }
        await inner.delete(for: account)
    }
    func deleteAll() async throws {
        refusals.withLock { $0.lagging.removeAll() }
        await inner.deleteAll()
    }
    func accounts() async throws -> [Account] { await inner.accounts() }
}
