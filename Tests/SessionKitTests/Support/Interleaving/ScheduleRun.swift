import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Runs one schedule — a fresh `SessionManager` over a recording store, three accounts, one registered
/// `SessionScoped` container — against a batch's shared server, and checks the invariants after every step.
/// With `dpop`, every sign-in asks the server for tokens bound to a fresh DPoP key (RFC 9449), so every request and
/// refresh of the schedule carries a proof the server checks.
///
/// Steps run one after another; what they start (requests, forced refreshes, sign-outs whose revocation is held)
/// runs concurrently with the steps that follow, over real sockets, until a later step opens its gate, cancels
/// it, or ends its session. At the end every gate is opened, everything is awaited and checked, then every
/// account is signed out and checked again.
final class ScheduleRun: Sendable {
    /// What a call commits to the container: which session's call loaded it.
    struct Loaded: Sendable, Equatable {
        let session: Int
        let call: Int
    }

    /// The violations found (empty when none), their kinds, and what the schedule did.
    struct Outcome: Sendable {
        let violations: [String]
        let kinds: Set<ScheduleModel.Kind>
        let trace: [String]
    }

    /// The refresh policy's `waitTimeout`: short, since `outwaitRefresh` moves the clock past it.
    static let waitTimeout = Duration.seconds(5)
    /// How many switches `switchRace` starts at once.
    static let racingSwitches = 8

    private static let runs = Locked(0)

    let id: Int
    let world: InterleavingWorld
    /// Whether the sessions' tokens are DPoP-bound.
    let dpop: Bool
    let model: ScheduleModel
    let clock = ManualClock()
    /// The clock the sessions read: ``clock``, with the system's wall time under DPoP.
    let sessionClock: any SessionClock
    let store: RecordingCredentialStore
    let manager: SessionManager
    let container = SessionScoped<Loaded?>(empty: nil)
    /// A second registered container, so a rebinding that misses some of them shows.
    let badge = SessionScoped<Int>(empty: 0)
    /// How many of the registered resource's next purges fail.
    let purgeFailures = Locked(0)
    let accounts: [Account]
    let users: [String]
    private let background = Locked<[Task<Void, Never>]>([])
    private let callTasks = Locked<[Int: Task<Void, Never>]>([:])
    private let gates = Locked<[(name: String, gate: Gate)]>([])
    private let steps = Locked<[String]>([])

    /// Whether the schedule `seed` names uses DPoP-bound tokens: every other one.
    static func usesDPoP(seed: UInt64) -> Bool { seed & 1 == 1 }

    init(world: InterleavingWorld, seed: UInt64) throws {
        let id = Self.runs.withLock { runs in
            runs += 1
            return runs
        }
        self.id = id
        self.world = world
        dpop = Self.usesDPoP(seed: seed)
        model = ScheduleModel(seed: seed)
        store = RecordingCredentialStore(isRotated: { [weak model] in model?.isRotated($0) ?? false })
        sessionClock = dpop ? ScheduleDPoPClock(manual: clock) : clock
        users = ["alice", "bob", "carol"].map { "r\(id)-\($0)" }
        accounts = users.map { Account(issuer: world.mock.issuer, subject: $0) }
        for user in users { try world.mock.addUser(user) }
        manager = SessionManager(
            configuration: .init(
                store: store,
                tokenEndpoint: ScheduleTokenEndpoint(client: world.client, model: model, clock: sessionClock),
                revoker: ScheduleRevoker(client: world.client, model: model),
                sessionConfiguration: UserSession.Configuration(
                    cacheMaximumBytes: 0, clock: sessionClock, diagnostics: world.diagnostics),
                refreshPolicy: RefreshPolicy(
                    jitter: .zero, waitTimeout: Self.waitTimeout,
                    retryPolicy: RetryPolicy(maximumAttempts: 2, baseDelay: .zero))
            )
        )
        manager.register(container)
        manager.register(badge)
        manager.register(
            PurgeStep("notifications") { [purgeFailures] _ in
                let fail = purgeFailures.withLock { count -> Bool in
                    guard count > 0 else { return false }
                    count -= 1
                    return true
                }
                if fail { throw SessionError(.storageFailure, "scripted purge failure") }
            })
    }

    /// How long a schedule may take, its settling included: a schedule takes tens of milliseconds, and its longest
    /// bounds (the refresh policy's wait, the requests' timeouts) are seconds. Past it, something awaits an answer
    /// that never comes: that is a violation with the schedule's seed and trace, not a test that hangs.
    static let bound = Duration.seconds(120)

    /// Runs `schedule` and returns what it found.
    func run(_ schedule: [ScheduleStep]) async -> Outcome {
        let finished = await returns(within: Self.bound) { await self.play(schedule) }
        if !finished {
            let loop = await world.transportReport()
            let done = steps.withLock { $0.count }
            let at = done < schedule.count ? "in step \(done) (\(schedule[done].kind))" : "settling or signing out"
            model.violation(
                "the schedule did not finish within \(Self.bound), \(at); \(model.refreshesInProgress) token "
                    + "requests and \(model.flightsInProgress) refresh flights unanswered, \(clock.sleepers) waits on "
                    + "the manual clock\(loop.map { "; \($0)" } ?? "")",
                at: "bound", kind: .stuck)
        }
        let outcome = Outcome(violations: model.violations, kinds: model.kinds, trace: trace())
        world.noteTokensIssued(model.tokensIssued)
        world.forget(id)
        // The model holds the sessions, whose refreshers hold the endpoint, which holds the model.
        if finished { model.state.withLock { $0.sessions.removeAll() } }
        return outcome
    }

    private func play(_ schedule: [ScheduleStep]) async {
        for (index, step) in schedule.enumerated() {
            let did = await perform(step, index: index)
            steps.withLock { $0.append("\(index): \(step.kind) — \(did)") }
            for _ in 0..<3 { await Task.yield() }
            await check(at: "after step \(index) (\(step.kind))")
        }
        await settle()
        await check(at: "settled")
        for session in manager.sessions {
            if let ordinal = model.ordinal(of: session) { model.mayLeave(ordinal, because: "signed out at the end") }
            await manager.signOut(session, options: .localOnly)
        }
        await settle()
        await check(at: "after signing every account out")
        // Behind every credential operation already queued (a rejected session's deletion among them).
        for account in accounts { _ = try? await manager.vault.load(for: account) }
        if let remaining = try? await store.accounts(), !remaining.isEmpty {
            model.violation("\(remaining.count) credential records remain after every account signed out", at: "end")
        }
        if let value = container.value {
            model.violation("the container holds #\(value.session)'s data after every account signed out", at: "end")
        }
    }

    private func trace() -> [String] {
        let calls = model.state.withLock { state in
            state.calls.sorted { $0.key < $1.key }.map { "call \($0.key) (\($0.value.what)): \($0.value.outcome)" }
        }
        return steps.withLock { $0 } + calls
    }

    /// Opens every gate and waits for everything started to finish, refreshes whose callers left included.
    private func settle() async {
        while true {
            let open = gates.withLock { gates in
                defer { gates.removeAll() }
                return gates
            }
            for (_, gate) in open { gate.open() }
            let tasks = background.withLock { tasks in
                defer { tasks.removeAll() }
                return tasks
            }
            let calls = callTasks.withLock { calls in
                defer { calls.removeAll() }
                return Array(calls.values)
            }
            // A refresh that outlived its callers (they were cancelled or gave up waiting) goes on: wait for it too.
            let refreshing = model.refreshesInProgress + model.flightsInProgress
            if open.isEmpty && tasks.isEmpty && calls.isEmpty && refreshing == 0 { return }
            for task in tasks + calls { await task.value }
            guard refreshing > 0 else { continue }
            // Polled, not yielded to: a flight that waits on the network leaves nothing for this task to do.
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    // MARK: - Steps

    private func live() -> [(ordinal: Int, session: UserSession)] {
        manager.sessions.compactMap { session in model.ordinal(of: session).map { ($0, session) } }
            .sorted { $0.ordinal < $1.ordinal }
    }

    private func user(of ordinal: Int) -> String {
        model.record(ordinal).map { users[$0.account] } ?? "?"
    }

    private func perform(_ step: ScheduleStep, index: Int) async -> String {
        let live = live()
        let chosen = live.isEmpty ? nil : live[step.pick % live.count]
        switch step.kind {
        case .signIn:
            let idle = accounts.indices.filter { account in
                !live.contains { model.record($0.ordinal)?.account == account }
            }
            guard !idle.isEmpty else { return "no account to sign in" }
            return await signIn(idle[step.pick % idle.count], makeCurrent: step.variant != 0, step: index)
        case .signInAgain:
            guard let (ordinal, _) = chosen, let account = model.record(ordinal)?.account else {
                return "no live session"
            }
            prepareEnd(of: ordinal, step: index)
            model.mayLeave(ordinal, because: "replaced by a sign-in at step \(index)")
            return await signIn(account, makeCurrent: step.variant != 0, step: index) + ", replacing #\(ordinal)"
        case .request:
            guard let (ordinal, session) = chosen else { return "no live session" }
            let method = step.variant & 1 == 0 ? "GET" : "POST"
            return startCall(
                ordinal, session, method: method, slow: step.variant & 2 != 0, heldBeforeCommit: step.variant & 4 != 0)
        case .openGate:
            let gate = gates.withLock { gates -> (name: String, gate: Gate)? in
                gates.isEmpty ? nil : gates.remove(at: step.pick % gates.count)
            }
            guard let gate else { return "no gate held" }
            gate.gate.open()
            return "opened \(gate.name)"
        case .signOut:
            var target = chosen
            if step.variant & 1 == 0, let current = manager.current, let ordinal = model.ordinal(of: current) {
                target = (ordinal, current)
            }
            guard let (ordinal, session) = target else { return "no live session" }
            return await signOut(ordinal, session, localOnly: step.variant & 2 != 0, step: index)
        case .signOutHeld:
            guard let (ordinal, session) = chosen else { return "no live session" }
            return await signOutHeld(ordinal, session, step: index)
        case .signOutStale:
            let ended = model.state.withLock { state in
                state.sessions.filter { !$0.value.session.isActive }.map { ($0.key, $0.value.session) }
                    .sorted { $0.0 < $1.0 }
            }
            guard !ended.isEmpty else { return "no ended session" }
            let (ordinal, session) = ended[step.pick % ended.count]
            await ScheduleModel.StepContext.$step.withValue(index) {
                _ = await manager.signOut(session, options: .localOnly)
            }
            return "signed out #\(ordinal) (\(user(of: ordinal))) again, long after it ended"
        case .switchAccount:
            let current = manager.current
            let others = live.filter { $0.session !== current }
            guard !others.isEmpty else { return "no other live session" }
            let (ordinal, session) = others[step.pick % others.count]
            let switched: Bool = await ScheduleModel.StepContext.$step.withValue(index) {
                (try? await manager.switchTo(session)) != nil
            }
            model.mark(ordinal)
            return switched ? "switched to #\(ordinal)" : "switch to #\(ordinal) refused: it ended"
        case .switchEndingOthers:
            guard let (ordinal, session) = chosen else { return "no live session" }
            return await switchEndingOthers(ordinal, session, live: live, step: index)
        case .expire:
            clock.advance(by: .seconds(3601))
            return "every access token expired (clock +3601 s)"
        case .revokeOnServer:
            guard let (ordinal, session) = chosen else { return "no live session" }
            let account = model.record(ordinal)?.account
            for other in model.state.withLock({ $0.sessions.filter { $0.value.account == account }.keys }) {
                model.mayLeave(other, because: "its grant was revoked on the server at step \(index)")
            }
            world.mock.revokeAll(for: user(of: ordinal))
            guard step.variant & 1 == 1 else { return "revoked \(user(of: ordinal))'s grants on the server" }
            return "revoked \(user(of: ordinal))'s grants on the server; "
                + startCall(ordinal, session, method: "GET", slow: false)
        case .invalidateAccess:
            guard let (ordinal, session) = chosen else { return "no live session" }
            world.mock.invalidateAccessTokens(for: user(of: ordinal))
            return "invalidated \(user(of: ordinal))'s access tokens; "
                + startCall(ordinal, session, method: "GET", slow: false)
        case .refreshTransient, .refreshRejected, .refreshHeld:
            guard let (ordinal, session) = chosen else { return "no live session" }
            var scripts: [ScheduleModel.RefreshScript]
            switch step.kind {
            case .refreshTransient: scripts = step.variant & 1 == 0 ? [.transient] : [.transient, .transient]
            case .refreshRejected:
                scripts = [.rejected]
                model.mayLeave(ordinal, because: "the script rejected its refresh at step \(index)")
            default:
                let gate = Gate()
                let answer = step.variant & 1 == 1
                gates.withLock { $0.append(("\(answer ? "answer of the " : "")refresh of #\(ordinal)", gate)) }
                scripts = [answer ? .holdAnswer(gate) : .hold(gate)]
            }
            model.state.withLock { $0.scripts[ordinal, default: []] += scripts }
            return "next refresh of #\(ordinal): \(scripts.map { "\($0)" }.joined(separator: ", ")); "
                + startCall(ordinal, session, method: nil, slow: false)
        case .cancelCall:
            let running = model.state.withLock { state in
                state.calls.filter { $0.value.outstanding && !$0.value.cancelledByCaller }.keys.sorted()
            }
            guard !running.isEmpty else { return "no call in flight" }
            let call = running[step.pick % running.count]
            model.state.withLock { $0.calls[call]?.cancelledByCaller = true }
            callTasks.withLock { $0[call] }?.cancel()
            return "cancelled call \(call)"
        case .cancelRefreshCaller:
            let refreshing = model.state.withLock { state in
                state.calls.filter { $0.value.isRefresh && $0.value.outstanding && !$0.value.cancelledByCaller }.keys
                    .sorted()
            }
            guard !refreshing.isEmpty else { return "no forced refresh in flight" }
            let call = refreshing[step.pick % refreshing.count]
            model.state.withLock { $0.calls[call]?.cancelledByCaller = true }
            callTasks.withLock { $0[call] }?.cancel()
            return "cancelled call \(call), a forced refresh"
        case .outwaitRefresh:
            clock.advance(by: Self.waitTimeout + .seconds(1))
            return "the clock moved past the refresh wait timeout (+\(Self.waitTimeout + .seconds(1)))"
        case .failSaves:
            guard let (ordinal, session) = chosen, let account = model.record(ordinal)?.account else {
                return "no live session"
            }
            let count = 1 + step.variant & 1
            store.refuseRotations(of: accounts[account], count: count)
            return "the store refuses the next \(count) saves of \(users[account])'s rotated tokens; "
                + startCall(ordinal, session, method: nil, slow: false)
        case .refusedRedirect:
            guard let (ordinal, session) = chosen else { return "no live session" }
            return startCall(ordinal, session, method: "GET", slow: false, redirectLoop: true)
        case .failPurges:
            let count = 1 + step.variant & 1
            purgeFailures.withLock { $0 += count }
            return "the next \(count) purges of the registered resource fail"
        case .switchRace:
            return await switchRace(step, live: live, step: index)
        case .signInFails:
            let account = accounts[step.pick % accounts.count]
            let error =
                step.variant & 1 == 1
                ? SessionError(.userCancelled, "scripted: the user closed the sign-in sheet")
                : SessionError(.authorizationFailed, "scripted: the provider refused the grant")
            let makeCurrent = step.variant & 2 == 0
            let manager = manager
            do {
                _ = try await ScheduleModel.StepContext.$step.withValue(index) {
                    try await manager.signIn(makeCurrent: makeCurrent, authenticate: { throw error })
                }
                return "a sign-in of \(account.subject) whose grant failed succeeded"
            } catch {
                return "a sign-in of \(account.subject)\(makeCurrent ? " (to be current)" : "") failed: "
                    + "\((error as? SessionError)?.code.description ?? "\(type(of: error))")"
            }
        case .signInCancelled:
            let idle = accounts.indices.filter { account in
                !live.contains { model.record($0.ordinal)?.account == account }
            }
            guard !idle.isEmpty else { return "no account to sign in" }
            let signingOut = idle.filter { account in
                model.state.withLock { $0.sessions.values.contains { $0.account == account && $0.signOutInProgress } }
            }
            let candidates = signingOut.isEmpty ? idle : signingOut
            return await signIn(
                candidates[step.pick % candidates.count], makeCurrent: step.variant != 0, step: index, cancelled: true)
        }
    }

    private func switchRace(
        _ step: ScheduleStep, live: [(ordinal: Int, session: UserSession)], step index: Int
    ) async -> String {
        let idle = accounts.indices.filter { account in
            !live.contains { model.record($0.ordinal)?.account == account }
        }
        if step.variant & 1 == 1, let other = live.first(where: { $0.session !== self.manager.current }) ?? live.first,
            !idle.isEmpty
        {
            // A switch racing a sign-in that makes its session current.
            let account = idle[step.pick % idle.count]
            let manager = manager
            let target = other.session
            async let switched = ScheduleModel.StepContext.$step.withValue(index) {
                (try? await manager.switchTo(target)) != nil
            }
            let signedIn = await signIn(account, makeCurrent: true, step: index)
            let didSwitch = await switched
            model.mark(other.ordinal)
            let now = manager.current.flatMap { model.ordinal(of: $0) }.map { "#\($0)" } ?? "none"
            return "switched to #\(other.ordinal)\(didSwitch ? "" : " (refused)") while it \(signedIn); current: \(now)"
        }
        guard live.count >= 2 else { return "fewer than two live sessions" }
        let first = live[step.pick % live.count]
        let others = live.filter { $0.ordinal != first.ordinal }
        let second = others[(step.pick / live.count) % others.count]
        let manager = manager
        let switched = await ScheduleModel.StepContext.$step.withValue(index) {
            await withTaskGroup(of: Bool.self) { group in
                // Several at once, alternating, so that their unlocked parts overlap often enough to show.
                for target in Array(repeating: [first.session, second.session], count: Self.racingSwitches / 2).joined()
                {
                    group.addTask { (try? await manager.switchTo(target)) != nil }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        model.mark(first.ordinal)
        model.mark(second.ordinal)
        let now = manager.current.flatMap { model.ordinal(of: $0) }.map { "#\($0)" } ?? "none"
        return
            "switched to #\(first.ordinal) and #\(second.ordinal) \(Self.racingSwitches / 2) times each, all at once "
            + "(\(switched) of \(Self.racingSwitches) switched); current: \(now)"
    }

    /// Signs `account` in; `cancelled` runs the sign-in in a task that is cancelled at once (a screen that went
    /// away), and does not let a held sign-out of the account go first.
    private func signIn(_ account: Int, makeCurrent: Bool, step: Int, cancelled: Bool = false) async -> String {
        // A sign-in waits for the account's sign-out in progress; one held at a gate only a later step opens
        // would stall the schedule, so the sign-in lets it go first (and races its purge).
        let held = model.state.withLock { state in
            state.sessions.filter { $0.value.account == account && $0.value.signOutInProgress }
                .compactMap { $0.value.revocationHold }
        }
        func letSignOutsGo() {
            for gate in held { gate.open() }
            gates.withLock { gates in gates.removeAll { gate in held.contains { $0 === gate.gate } } }
        }
        if !cancelled { letSignOutsGo() }
        let ordinal = model.newOrdinal()
        let tokens: TokenSet
        do {
            tokens = try await grant(for: users[account])
        } catch {
            return "the mock refused to issue tokens: \(error)"
        }
        model.own(tokens, by: ordinal)
        let makeCurrent = makeCurrent || manager.current == nil
        let manager = manager
        let signedIn = Task {
            try await ScheduleModel.StepContext.$step.withValue(step) {
                try await manager.signIn(accounts[account], tokens: tokens, makeCurrent: makeCurrent)
            }
        }
        if cancelled {
            signedIn.cancel()
            // A cancelled sign-in should give up waiting for the sign-out; one that waits on regardless must not
            // stall the schedule: after a while the sign-out is let go.
            let done = Locked(false)
            let watcher = Task {
                _ = await signedIn.result
                done.withLock { $0 = true }
            }
            var yields = 0
            while !done.withLock({ $0 }) && yields < 1000 {
                await Task.yield()
                yields += 1
            }
            if !done.withLock({ $0 }) { letSignOutsGo() }
            await watcher.value
        }
        do {
            let session = try await signedIn.value
            // A screen made for this session: bound before the end marker, so its handler empties it first.
            let screen = SessionScoped<Loaded?>(empty: nil)
            screen.bind(to: session)
            model.state.withLock {
                $0.sessions[ordinal] = ScheduleModel.SessionRecord(session: session, account: account, screen: screen)
            }
            model.mark(ordinal)
            return "signed in \(users[account]) as #\(ordinal)\(makeCurrent ? " (current)" : "")"
                + (cancelled ? ", though its task was cancelled" : "")
        } catch {
            return "\(cancelled ? "cancelled " : "")sign-in of \(users[account]) failed: \(error)"
        }
    }

    /// A new grant's tokens for `user`, their expiry on the sessions' clock: issued by the mock directly, or under
    /// DPoP through the password grant with a proof of a fresh key, which the tokens are bound to.
    private func grant(for user: String) async throws -> TokenSet {
        guard dpop else { return try world.mock.issueTokens(for: user, clock: clock) }
        let fresh = try await world.dpopClient.password(username: user, password: "password")
        guard fresh.proofKey != nil, fresh.tokenType == "DPoP" else {
            throw SessionError(.malformedTokenResponse, "a DPoP sign-in got unbound tokens")
        }
        return TokenSet(
            accessToken: fresh.accessToken, refreshToken: fresh.refreshToken, scope: fresh.scope,
            tokenType: fresh.tokenType, proofKey: fresh.proofKey, lifetime: fresh.lifetime, receivedAt: clock.now,
            receivedAtWall: sessionClock.wallNow)
    }

    /// Records, before a step that may end `ordinal`, which of its calls run and which are held at the server.
    private func prepareEnd(of ordinal: Int, step: Int) {
        model.state.withLock { state in
            let outstanding = Set(
                state.calls.filter {
                    $0.value.session == ordinal && $0.value.outstanding && !$0.value.cancelledByCaller
                }
                .keys)
            state.sessions[ordinal]?.atStepStart[step] = outstanding
        }
    }

    private func signOut(_ ordinal: Int, _ session: UserSession, localOnly: Bool, step: Int) async -> String {
        prepareEnd(of: ordinal, step: step)
        model.mayLeave(ordinal, because: "signed out at step \(step)")
        model.state.withLock { $0.sessions[ordinal]?.signOutInProgress = true }
        let report = await ScheduleModel.StepContext.$step.withValue(step) {
            await manager.signOut(session, options: localOnly ? .localOnly : SignOutOptions())
        }
        model.state.withLock { state in
            state.sessions[ordinal]?.cancelled[step] = report?.cancelledRequests ?? 0
            state.sessions[ordinal]?.signOutInProgress = false
        }
        // The sign-out has completed: nothing of the account may remain in the store, unless another session
        // of it is live (none can be: the steps run one at a time).
        let account = accounts[model.record(ordinal)?.account ?? 0]
        if !manager.sessions.contains(where: { $0.account == account }),
            let record = try? await manager.vault.load(for: account)
        {
            let owner = model.owner(of: record.refreshToken).map { "#\($0)" } ?? "an unknown session"
            model.violation(
                "after signing #\(ordinal) out, the store still holds \(owner)'s credentials for its account",
                at: "step \(step)")
        }
        return
            "signed out #\(ordinal)\(localOnly ? " locally" : ""), \(report?.cancelledRequests ?? 0) requests cancelled"
    }

    private func signOutHeld(_ ordinal: Int, _ session: UserSession, step: Int) async -> String {
        prepareEnd(of: ordinal, step: step)
        model.mayLeave(ordinal, because: "signed out at step \(step)")
        let arrived = Gate()
        let hold = Gate()
        model.state.withLock { state in
            state.revocationHolds[ordinal] = (arrived, hold)
            state.sessions[ordinal]?.signOutInProgress = true
            state.sessions[ordinal]?.revocationHold = hold
        }
        gates.withLock { $0.append(("revocation of #\(ordinal)", hold)) }
        let model = model
        let manager = manager
        let task = Task {
            let report = await ScheduleModel.StepContext.$step.withValue(step) {
                await manager.signOut(session)
            }
            model.state.withLock { state in
                state.sessions[ordinal]?.cancelled[step] = report?.cancelledRequests ?? 0
                state.sessions[ordinal]?.signOutInProgress = false
            }
            arrived.open()
        }
        background.withLock { $0.append(task) }
        // Revocation starts after `end()` returned: from here on the session is over, its purge still to come.
        await arrived.wait()
        return "signing out #\(ordinal), its revocation held"
    }

    private func switchEndingOthers(
        _ ordinal: Int, _ session: UserSession, live: [(ordinal: Int, session: UserSession)], step: Int
    ) async -> String {
        let others = live.filter { $0.ordinal != ordinal }
        for other in others {
            prepareEnd(of: other.ordinal, step: step)
            model.mayLeave(other.ordinal, because: "signed out by a switch at step \(step)")
            model.state.withLock { $0.sessions[other.ordinal]?.signOutInProgress = true }
        }
        let reports = await ScheduleModel.StepContext.$step.withValue(step) {
            (try? await manager.switchTo(session, endingOthers: true, options: .localOnly)) ?? []
        }
        model.state.withLock { state in
            for other in others {
                state.sessions[other.ordinal]?.signOutInProgress = false
                if let report = reports.first(where: { $0.account == other.session.account }) {
                    state.sessions[other.ordinal]?.cancelled[step] = report.cancelledRequests
                }
            }
        }
        model.mark(ordinal)
        return "switched to #\(ordinal), signing out \(others.map { "#\($0.ordinal)" }.joined(separator: ", "))"
    }

    /// Starts a request (or, with `method` nil, a forced refresh) of `session` in a task of its own.
    private func startCall(
        _ ordinal: Int, _ session: UserSession, method: String?, slow: Bool, heldBeforeCommit: Bool = false,
        redirectLoop: Bool = false
    ) -> String {
        var what = method.map { "#\(ordinal) \($0) \(slow ? "slow" : "fast")" } ?? "#\(ordinal) refresh"
        if redirectLoop { what += " into a redirect loop" }
        if heldBeforeCommit { what += ", held before its commit" }
        let call = model.state.withLock { state -> Int in
            defer { state.nextCall += 1 }
            state.calls[state.nextCall] = ScheduleModel.CallRecord(
                session: ordinal, what: what, isRefresh: method == nil)
            return state.nextCall
        }
        var request: URLRequest?
        if let method {
            let (built, gate) = world.request(
                schedule: id, call: call, method: method, slow: slow, redirectLoop: redirectLoop)
            request = built
            if let gate { gates.withLock { $0.append(("call \(call)", gate)) } }
        }
        let expected = #"{"user":"\#(user(of: ordinal))"}"#
        let model = model
        let container = container
        let screen = model.record(ordinal)?.screen
        let processing = heldBeforeCommit ? Gate() : nil
        if let processing { gates.withLock { $0.append(("processing of call \(call)", processing)) } }
        let task = Task {
            var outcome: String
            do {
                if let request {
                    let (data, response) = try await session.data(for: request)
                    if response.statusCode == 200 {
                        let body = String(decoding: data, as: UTF8.self)
                        if body != expected {
                            model.violation("call \(call) of #\(ordinal) was answered \(body)", at: "call \(call)")
                        }
                        // The last await before the commit: the session may end meanwhile.
                        await processing?.wait()
                        let loaded = Loaded(session: ordinal, call: call)
                        let shown = screen?.commit(loaded, from: session) == true
                        let committed = container.commit(loaded, from: session)
                        outcome = (committed ? "committed" : "commit refused") + (shown ? ", shown" : "")
                    } else {
                        outcome = "HTTP \(response.statusCode)"
                    }
                } else {
                    try await session.refreshTokens()
                    outcome = "refreshed"
                }
            } catch let error as SessionError {
                outcome = "\(error.code)"
            } catch is CancellationError {
                outcome = "cancelled"
            } catch {
                outcome = "\(type(of: error))"
            }
            model.state.withLock { state in
                state.calls[call]?.outstanding = false
                state.calls[call]?.outcome = outcome
            }
        }
        callTasks.withLock { $0[call] = task }
        return "call \(call): \(what)"
    }

    // MARK: - Invariants

    private func check(at label: String) async {
        checkContainer(at: label)
        checkArrivals(at: label)
        await checkStore(at: label)
        checkReuse(at: label)
        checkSessionsStay(at: label)
        await checkAgreement(at: label)
        checkProofs(at: label)
    }

    // MARK: - DPoP

    /// With DPoP: the server saw no `jti` twice; no proof of an ended session's key was signed after its end, or
    /// reached the token endpoint after it unless its refresh was in flight then (and then only that request and
    /// its one retry with a nonce); no request of a bound session carried a bearer token.
    ///
    /// A proof's `iat` is whole seconds of the system's wall clock (floored), so `iat` more than a second after the
    /// wall time the end marker noted means the proof was made after the session ended. Resource requests already
    /// on their way at the end are judged by `checkArrivals`, by their DPoP token.
    private func checkProofs(at label: String) {
        guard dpop else { return }
        let state = model.state.withLock { $0 }
        var jtis: [String: Int] = [:]
        for (ordinal, thumbprint) in state.keys.sorted(by: { $0.key < $1.key }) {
            let proofs = world.mock.dpopProofs(keyThumbprint: thumbprint)
            for proof in proofs {
                if let jti = proof.jti { jtis[jti, default: 0] += 1 }
                if proof.refusal == .replayedJTI {
                    model.violation(
                        "a proof of #\(ordinal)'s key for \(proof.htm ?? "?") \(proof.htu ?? "?") reused a jti the "
                            + "server had seen", at: label)
                }
            }
            guard let record = state.sessions[ordinal], let endedAt = record.endedAt,
                let endedAtWall = record.endedAtWall
            else { continue }
            let late = proofs.filter { $0.arrivedAt > endedAt }
            for proof in late {
                guard let issuedAt = proof.issuedAt, issuedAt.timeIntervalSince(endedAtWall) > 1 else { continue }
                model.violation(
                    "a proof of #\(ordinal)'s key for \(proof.htm ?? "?") \(proof.htu ?? "?") was made after "
                        + "#\(ordinal) ended (iat \(issuedAt.timeIntervalSince1970), ended at "
                        + "\(endedAtWall.timeIntervalSince1970))",
                    at: label)
            }
            let lateRefreshes = late.filter { $0.endpoint == .token }.count
            let inFlight = (state.refreshCalls[ordinal] ?? []).filter { call in
                call.began < endedAt && call.returned.map { $0 > endedAt } ?? true
            }
            if lateRefreshes > 0, inFlight.isEmpty {
                model.violation(
                    "\(lateRefreshes) token requests with proofs of #\(ordinal)'s key reached the server after "
                        + "#\(ordinal) ended, though no refresh of it was in flight then", at: label)
            } else if lateRefreshes > 2 * inFlight.count {
                model.violation(
                    "\(lateRefreshes) token requests with proofs of #\(ordinal)'s key reached the server after "
                        + "#\(ordinal) ended: more than its refresh in flight and one retry with a nonce", at: label)
            }
        }
        for (jti, count) in jtis where count > 1 {
            model.violation("the server saw jti \(jti) \(count) times", at: label)
        }
        for arrival in world.arrivals(of: id) where arrival.scheme != "DPoP" {
            let caller = state.calls[arrival.call].map { "#\($0.session)" } ?? "an unknown session"
            model.violation(
                "call \(arrival.call) of \(caller), whose tokens are DPoP-bound, carried "
                    + (arrival.scheme.map { "a \($0) token" } ?? "no token"), at: label)
        }
    }

    // MARK: - Liveness

    /// No refresh token reached the token endpoint twice: a provider with reuse detection would have revoked the
    /// grant, signing a user out who did nothing wrong.
    private func checkReuse(at label: String) {
        let repeated = users.map { ($0, world.mock.repeatedRefreshTokenCount(for: $0)) }.filter { $0.1 > 0 }
        guard !repeated.isEmpty else { return }
        model.violation(
            "refresh tokens were presented to the token endpoint twice ("
                + repeated.map { "\($0.0): \($0.1)" }.joined(separator: ", ") + ")",
            at: label, kind: .reused)
    }

    /// No session left `manager.sessions` unless a step signed it out or replaced it, or the script made the
    /// server reject its grant.
    private func checkSessionsStay(at label: String) {
        let live = manager.sessions
        let records = model.state.withLock { state in
            state.sessions.filter { $0.value.mayLeave == nil }.map { ($0.key, $0.value.session) }
        }
        for (ordinal, session) in records.sorted(by: { $0.0 < $1.0 }) where !live.contains(where: { $0 === session }) {
            let calls = model.state.withLock { state in
                state.calls.filter { $0.value.session == ordinal && !$0.value.outstanding }.sorted { $0.key < $1.key }
                    .map { "call \($0.key): \($0.value.outcome)" }
            }
            model.violation(
                "#\(ordinal) (\(user(of: ordinal))) left the manager's sessions though nothing signed it out and the "
                    + "server rejected nothing of it (its calls: \(calls.joined(separator: "; ")))",
                at: label, kind: .spurious)
        }
    }

    /// `manager.state` agrees with `manager.current` — active or refreshing for the current session's account
    /// when there is one, neither when there is none — the current session is live, and every registered
    /// container is bound to it.
    ///
    /// The manager publishes the state, the current session and the bindings under separate locks, so a refresh
    /// finishing in the background is seen half-applied for an instant: a disagreement counts only if it is still
    /// there after the background work had many chances to finish: 2,000 yields and 100 ms, whichever is longer
    /// (a bounded wait that sleeps nowhere; the time bound is for a loaded machine, where a thread half-way through
    /// can stay descheduled for a while).
    private func checkAgreement(at label: String) async {
        var disagreement: String?
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(100))
        var yields = 0
        while true {
            disagreement = agreement()
            guard let seen = disagreement else { return }
            // Already found at an earlier check and still there: no need to wait for it again.
            if model.state.withLock({ $0.reported.contains(seen) }) { break }
            if yields >= 2_000 && ContinuousClock.now >= deadline { break }
            yields += 1
            await Task.yield()
        }
        if let disagreement { model.violation(disagreement, at: label, kind: .mismatched) }
    }

    private func agreement() -> String? {
        let current = manager.current
        let state = manager.state
        let live = manager.sessions
        let bindings = [("the container", container.session), ("the badge", badge.session)]
        guard manager.current === current else { return "the current session changed while it was being read" }
        func name(_ session: UserSession?) -> String {
            guard let session else { return "none" }
            return model.ordinal(of: session).map { "#\($0) (\(user(of: $0)))" } ?? "an unknown session"
        }
        if let current {
            guard live.contains(where: { $0 === current }) else {
                return "current is \(name(current)), which is not among the live sessions"
            }
            switch state {
            case .active(let account, _) where account == current.account: break
            case .refreshing(let account) where account == current.account: break
            default: return "state is \(state) while current is \(name(current))"
            }
        } else {
            switch state {
            case .active, .refreshing: return "state is \(state) while there is no current session"
            default: break
            }
        }
        for (container, bound) in bindings where bound !== current {
            return "\(container) is bound to \(name(bound)) while current is \(name(current))"
        }
        return nil
    }

    /// Identity at commit: the container holds nothing, or data of the session it is bound to, committed while
    /// that session was active.
    ///
    /// The binding is read before the value: between checks, bindings change only to `nil` (a sign-out or a
    /// rejected refresh in the background), which empties the value, so a value read afterwards was committed
    /// under the binding read.
    ///
    /// Which sessions had ended is read before both: a session that ends in the background after the value was
    /// read (a rejected refresh) did not end before the commit, and its container is emptied by the next check.
    private func checkContainer(at label: String) {
        let sessions = model.state.withLock { $0.sessions }
        for (ordinal, record) in sessions where record.containerCleared {
            if let value = record.screen.value {
                model.violation(
                    "the screen of #\(ordinal) shows call \(value.call)'s data, committed after #\(ordinal) ended",
                    at: label)
            }
        }
        let bound = container.session
        guard let value = container.value else { return }
        guard let owner = sessions[value.session] ?? model.record(value.session) else {
            model.violation("the container holds data of a session the schedule never made", at: label)
            return
        }
        if owner.session !== bound {
            let boundName = bound.flatMap { model.ordinal(of: $0) }.map { "#\($0)" } ?? "no session"
            model.violation(
                "the container holds #\(value.session)'s data (call \(value.call)) while bound to \(boundName)",
                at: label)
        }
        if owner.containerCleared {
            model.violation(
                "the container holds #\(value.session)'s data (call \(value.call)), committed after it ended", at: label
            )
        }
    }

    /// Every request carried its own session's token, never a late refresh's, and none reached the server after
    /// its session ended unless it was already on its way.
    private func checkArrivals(at label: String) {
        let arrivals = world.arrivals(of: id)
        let state = model.state.withLock { $0 }
        for arrival in arrivals {
            let caller = state.calls[arrival.call]?.session
            guard let token = arrival.token else {
                model.violation("call \(arrival.call) reached the server without a token", at: label)
                continue
            }
            guard let owner = state.tokenOwner[token] else {
                model.violation("call \(arrival.call) carried a token the schedule never saw issued", at: label)
                continue
            }
            if owner != caller {
                model.violation(
                    "call \(arrival.call) of #\(caller ?? 0) carried #\(owner)'s token", at: label)
            }
            if state.lateTokens.contains(token) {
                model.violation(
                    "call \(arrival.call) carried a token from a refresh that completed after #\(owner) ended",
                    at: label)
            }
        }
        for (ordinal, record) in state.sessions {
            guard let endedAt = record.endedAt else { continue }
            let late = arrivals.filter { arrival in
                arrival.arrivedAt > endedAt && arrival.token.flatMap { state.tokenOwner[$0] } == ordinal
                    && state.calls[arrival.call]?.cancelledByCaller != true
            }
            guard !late.isEmpty else { continue }
            let start = record.endedByStep.flatMap { record.atStepStart[$0] }
            let inFlight = start ?? record.startedBeforeEnd
            // Held at the server when the session ended: arrived before, answered after. (Taken at the end, not
            // at the step's start: a request held then may have been answered before `end()` ran, and then it
            // is not among those `end()` cancelled.)
            let parked = Set(
                arrivals.filter { arrival in
                    inFlight.contains(arrival.call) && arrival.arrivedAt <= endedAt
                        && (arrival.answeredAt.map { $0 > endedAt } ?? true)
                        && arrival.token.flatMap { state.tokenOwner[$0] } == ordinal
                }.map(\.call))
            var seen: Set<Int> = []
            for arrival in late {
                if !inFlight.contains(arrival.call) {
                    model.violation(
                        "call \(arrival.call) of #\(ordinal) reached the server after #\(ordinal) ended, "
                            + "though it was not in flight when it ended", at: label)
                }
                if parked.contains(arrival.call) {
                    model.violation(
                        "call \(arrival.call) of #\(ordinal) was sent again after #\(ordinal) ended", at: label)
                }
                if !seen.insert(arrival.call).inserted {
                    model.violation(
                        "call \(arrival.call) of #\(ordinal) reached the server twice after #\(ordinal) ended",
                        at: label)
                }
            }
            if let step = record.endedByStep, let cancelled = record.cancelled[step], cancelled >= parked.count,
                late.count > cancelled - parked.count
            {
                model.violation(
                    "\(late.count) requests of #\(ordinal) reached the server after it ended (calls "
                        + "\(late.map(\.call).sorted())), but end() cancelled \(cancelled), \(parked.count) of which were "
                        + "already at the server (calls \(parked.sorted()))", at: label)
            }
        }
    }

    /// The store and memory agree: a live session's record is its own, with its current refresh token; an ended
    /// session's record is gone once its sign-out completed; no late refresh result was ever saved.
    private func checkStore(at label: String) async {
        for account in accounts {
            if let session = manager.sessions.first(where: { $0.account == account }),
                let ordinal = model.ordinal(of: session)
            {
                let before = session.tokens?.refreshToken
                let stored = try? await manager.vault.load(for: account)
                let after = session.tokens?.refreshToken
                // A rejected refresh removes the session before it deletes the record: still live means no
                // deletion was queued ahead of this load.
                guard manager.sessions.contains(where: { $0 === session }), session.isActive else { continue }
                guard let stored else {
                    model.violation("#\(ordinal) is live but the store holds nothing for its account", at: label)
                    continue
                }
                let owner = model.owner(of: stored.refreshToken)
                if owner != ordinal {
                    model.violation(
                        "#\(ordinal) is live but the store holds \(owner.map { "#\($0)" } ?? "unknown")'s refresh "
                            + "token for its account", at: label)
                } else if before == after, stored.refreshToken != before, !store.lags(account) {
                    model.violation("the store and #\(ordinal)'s memory hold different refresh tokens", at: label)
                }
            } else {
                guard let first = try? await manager.vault.load(for: account),
                    let owner = model.owner(of: first.refreshToken), let record = model.record(owner),
                    !record.session.isActive
                else { continue }
                // Ended before this second load was queued: every write it admitted, and its deletion if one was
                // due, are ahead of it. Whether a sign-out is still running is read before the load is queued: one
                // that completes while the load waits enqueued its deletion behind it.
                let signOutDone = model.record(owner)?.signOutInProgress == false
                let again = try? await manager.vault.load(for: account)
                if model.owner(of: again?.refreshToken) == owner, signOutDone {
                    model.violation("#\(owner) has ended but its credentials are still stored", at: label)
                }
            }
        }
        let late = model.state.withLock { $0.lateTokens }
        if store.savedRefreshTokens.contains(where: late.contains) {
            model.violation("a refresh result that completed after its session ended was stored", at: label)
        }
    }
}
