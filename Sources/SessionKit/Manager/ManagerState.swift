import SessionKitOAuth

/// Everything of ``SessionManager`` that changes, and every decision about it, as a value: the live sessions and
/// the current one, the published state, what the app registered, the sign-outs in progress, the retries of a
/// locked store, the check against a shared store, the work that outlives its call, and the watchers the manager
/// stops when it goes.
///
/// Pure: no lock, no task, no clock, no I/O. The manager keeps it in its one lock and feeds it one ``Event`` per
/// critical section (`SessionManager.send(_:)`); each event returns an ``Answer``, which the manager acts on once
/// the lock is released (rebinding containers, ending sessions, telling observers, starting a task). The sessions
/// it holds are references the value stores and hands back; the only thing it asks of them is whether they are
/// still active, as the manager's decisions always did.
///
/// | Event                         | Decision                                                  | Answer                      |
/// |-------------------------------|-----------------------------------------------------------|-----------------------------|
/// | `configure`                   | keeps the sink, the clock and the watchers                | `.none`                     |
/// | `teardown`                    | gives the watchers back, forgets them                     | `.teardown`                 |
/// | `read`                        | nothing changes                                           | `.snapshot`                 |
/// | `subscribe(c)`                | keeps `c`; it is told the state now                        | `.id`                       |
/// | `unsubscribe(id)`             | forgets it                                                | `.none`                     |
/// | `decide(f)`                   | applies `f`'s event to the state, if any                  | `.flag(state changed)`      |
/// | `install(s, current?, e)`     | `s` replaces its account's sessions; current if asked or  | `.installed(replaced, Δ)`   |
/// |                               | if it replaced the current one, `e` applied only then     |                             |
/// | `installIfAbsent(s)`          | keeps the account's live session, else appends `s`        | `.live(the one kept)`       |
/// | `switchTo(s)`                 | if `s` is live and active: current, `.switched`           | `.switched(others or nil)`  |
/// | `signedOutElsewhere(s)`       | `s` leaves; if current, its successor follows             | `.left(…, successor, Δ)`    |
/// | `rejected(s)`                 | `s` leaves; if current, nobody is, `.refreshRejected`     | `.left(…, nil, Δ)`          |
/// | `detach(s?, done, e?)`        | see ``detach(_:until:ending:)``                           | `.detached`                 |
/// | `signOutFinished(a, done)`    | forgets `done` among `a`'s sign-outs                      | `.none`                     |
/// | `containersToBind`            | drops containers that are gone                            | `.bind(current, containers)`|
/// | `register…`                   | appends, in registration order                            | `.none`                     |
/// | `storageFailed(a, e)`         | remembers `e` for `a`                                     | `.none`                     |
/// | `stored(a)`                   | forgets `a`'s failure                                     | `.flag(there was one)`      |
/// | `storeRetry(k, starting)`     | starts a retry of kind `k` unless one runs; or ends it    | `.flag(start it)`           |
/// | `storeChanged(s)`             | starts a check of `s` unless one runs, else adds `s` to the next | `.scope(to check now?)` |
/// | `checked`                     | runs once more for the notices that came meanwhile, else stops | `.scope(again?)`     |
/// | `track(k, done)`, `untrack`   | keeps or forgets work that outlives its call              | `.id`, `.none`              |
///
/// Δ is whether the published state changed. Every change of the state is also kept in ``publications``, which
/// the manager tells the streams and the diagnostics sink inside the same critical section, so that every stream
/// sees the states in the order they happened.
struct ManagerState {
    // MARK: What is published

    var state = SessionState.signedOut
    var sessions: [UserSession] = []
    var current: UserSession?
    /// Rotated credentials that could not be stored, per account, until a later write succeeds.
    var storageFailures: [Account: SessionError] = [:]

    // MARK: What the app registered

    var containers: [WeakBindable] = []
    var resources: [any UserScopedResource] = []
    /// The resets of the current user's identity elsewhere (analytics), run inside sign-out's detach.
    var identityResets: [IdentityReset] = []
    var continuations: [Int: AsyncStream<SessionState>.Continuation] = [:]
    var nextID = 0

    // MARK: Work in progress

    /// Sign-outs in progress per account, until their purge has finished.
    var signOuts: [Account: [Broadcast<Void>]] = [:]
    /// Accounts whose tokens wait for a locked store to open.
    var storeRetryWrites: Set<Account> = []
    /// Whether a restore waits for a locked store to open.
    var storeRetryRestore = false
    /// Whether a check of the sessions against the shared store runs, and what the notices that came in during it
    /// ask to check next.
    var checking = false
    var checkNext: StoreChange.Scope?
    /// Work that outlives the call that started it (background server steps, handed-off writes), by id.
    var pendingWork: [Int: (kind: PendingWorkKind, done: Broadcast<Void>)] = [:]

    // MARK: What the manager keeps for its end, and for telling

    var changeWatch: (any StoreChangeWatch)?
    var unlockObserver: ObserverToken?
    var diagnostics: Diagnostics?
    var clock: (any SessionClock)?
    /// The state changes (and a new stream's first state) not yet told; the manager takes them in the critical
    /// section that made them.
    var publications: [Publication] = []

    /// One state to tell some streams, and, for a change, the diagnostics sink.
    struct Publication {
        let to: [AsyncStream<SessionState>.Continuation]
        let state: SessionState
        /// The state it replaced, for a change; `nil` for a new stream's first state.
        let from: SessionState?
    }

    /// A retry of a store that could not be read.
    enum StoreRetry: Equatable {
        /// The account's rotated tokens, which the store refused.
        case writes(Account)
        /// Restore, which found the store locked.
        case restore
    }

    enum Event {
        case configure(
            diagnostics: Diagnostics?, clock: (any SessionClock)?, watcher: (any StoreChangeWatch)?,
            observer: ObserverToken?)
        case teardown
        case read
        case subscribe(AsyncStream<SessionState>.Continuation)
        case unsubscribe(Int)
        case decide((ManagerState) -> SessionState.Event?)
        case install(UserSession, makeCurrent: Bool, event: SessionState.Event?)
        case installIfAbsent(UserSession)
        case switchTo(UserSession)
        case signedOutElsewhere(UserSession)
        case rejected(UserSession)
        case detach(UserSession?, until: Broadcast<Void>, ending: AccountEnding?)
        case signOutFinished(Account, Broadcast<Void>)
        case containersToBind
        case registerContainer(WeakBindable)
        case registerResource(any UserScopedResource)
        case registerIdentityReset(IdentityReset)
        case storageFailed(Account, SessionError)
        case stored(Account)
        case storeRetry(StoreRetry, starting: Bool)
        case storeChanged(StoreChange.Scope)
        case checked
        case track(PendingWorkKind, Broadcast<Void>)
        case untrack(Int)
    }

    enum Answer {
        case none
        case flag(Bool)
        case id(Int)
        case snapshot(ManagerState)
        case teardown((any StoreChangeWatch)?, ObserverToken?)
        /// The sessions a check of the shared store is to read, `nil` for none.
        case scope(StoreChange.Scope?)
        case installed(replaced: [UserSession], stateChanged: Bool)
        /// The other live sessions, `nil` when the session was not live.
        case switched(others: [UserSession]?, stateChanged: Bool)
        case left(wasCurrent: Bool, successor: UserSession?, stateChanged: Bool)
        case detached(Detached?)
        case bind(current: UserSession?, containers: [WeakBindable])
        /// The account's live session after a load, `nil` when it is being signed out.
        case live(UserSession?)

        var flag: Bool { if case .flag(let value) = self { value } else { false } }
        var checkScope: StoreChange.Scope? { if case .scope(let scope) = self { scope } else { nil } }
        var id: Int { if case .id(let value) = self { value } else { 0 } }
    }

    /// Feeds one event; the state changes it makes are appended to ``publications``.
    mutating func handle(_ event: Event) -> Answer {
        switch event {
        case .configure(let diagnostics, let clock, let watcher, let observer):
            (self.diagnostics, self.clock, changeWatch, unlockObserver) = (diagnostics, clock, watcher, observer)
            return .none
        case .teardown:
            defer { (changeWatch, unlockObserver) = (nil, nil) }
            return .teardown(changeWatch, unlockObserver)
        case .read:
            return .snapshot(self)
        case .subscribe(let continuation):
            nextID += 1
            continuations[nextID] = continuation
            publications.append(Publication(to: [continuation], state: state, from: nil))
            return .id(nextID)
        case .unsubscribe(let id):
            continuations.removeValue(forKey: id)
            return .none
        case .decide(let decide):
            guard let event = decide(self) else { return .flag(false) }
            return .flag(transition(event))
        case .install(let session, let makeCurrent, let event):
            return install(session, makeCurrent: makeCurrent, event: event)
        case .installIfAbsent(let session):
            // A session loaded for a request: the live one a concurrent load installed first wins, and none is
            // installed while the account is being signed out.
            if let live = sessions.first(where: { $0.account == session.account && $0.isActive }) {
                return .live(live)
            }
            guard signOuts[session.account] == nil else { return .live(nil) }
            sessions.removeAll { $0.account == session.account }
            sessions.append(session)
            return .live(session)
        case .switchTo(let session):
            guard sessions.contains(where: { $0 === session }) && session.isActive else {
                return .switched(others: nil, stateChanged: false)
            }
            current = session
            let changed = transition(.switched(session.account))
            return .switched(others: sessions.filter { $0 !== session }, stateChanged: changed)
        case .signedOutElsewhere(let session):
            sessions.removeAll { $0 === session }
            guard current === session else { return .left(wasCurrent: false, successor: nil, stateChanged: false) }
            let (successor, changed) = succeed()
            return .left(wasCurrent: true, successor: successor, stateChanged: changed)
        case .rejected(let session):
            sessions.removeAll { $0 === session }
            guard current === session else { return .left(wasCurrent: false, successor: nil, stateChanged: false) }
            current = nil
            return .left(wasCurrent: true, successor: nil, stateChanged: transition(.refreshRejected))
        case .detach(let session, let finished, let ending):
            return .detached(detach(session, until: finished, ending: ending))
        case .signOutFinished(let account, let finished):
            signOuts[account]?.removeAll { $0 === finished }
            if signOuts[account]?.isEmpty == true { signOuts[account] = nil }
            return .none
        case .containersToBind:
            containers.removeAll { $0.target == nil }
            return .bind(current: current, containers: containers)
        case .registerContainer(let container):
            containers.append(container)
            return .none
        case .registerResource(let resource):
            resources.append(resource)
            return .none
        case .registerIdentityReset(let reset):
            identityResets.append(reset)
            return .none
        case .storageFailed(let account, let error):
            storageFailures[account] = error
            return .none
        case .stored(let account):
            return .flag(storageFailures.removeValue(forKey: account) != nil)
        case .storeRetry(let retry, let starting):
            return .flag(storeRetry(retry, starting: starting))
        case .storeChanged(let scope):
            guard !checking else {
                checkNext = checkNext.map { $0.union(scope) } ?? scope
                return .scope(nil)
            }
            checking = true
            return .scope(scope)
        case .checked:
            guard let next = checkNext else {
                checking = false
                return .scope(nil)
            }
            checkNext = nil
            return .scope(next)
        case .track(let kind, let done):
            nextID += 1
            pendingWork[nextID] = (kind, done)
            return .id(nextID)
        case .untrack(let id):
            pendingWork.removeValue(forKey: id)
            return .none
        }
    }

    /// Applies `event` to the published state.
    ///
    /// - Returns: Whether the state changed.
    mutating func transition(_ event: SessionState.Event) -> Bool {
        let next = state.applying(event)
        guard next != state else { return false }
        publications.append(Publication(to: Array(continuations.values), state: next, from: state))
        state = next
        return true
    }

    /// Makes `session` live (and current, or current anyway when it replaces the current session of its account),
    /// in place of its account's other sessions, which the manager ends.
    private mutating func install(_ session: UserSession, makeCurrent: Bool, event: SessionState.Event?) -> Answer {
        let replaced = sessions.filter { $0.account == session.account }
        sessions.removeAll { $0.account == session.account }
        sessions.append(session)
        let becomesCurrent = makeCurrent || replaced.contains(where: { $0 === current })
        if becomesCurrent { current = session }
        let changed = becomesCurrent ? event.map { transition($0) } ?? false : false
        return .installed(replaced: replaced, stateChanged: changed)
    }

    /// Makes current, in place of the current session that is leaving (already out of `sessions`), the live session
    /// that restore would make current at the next launch (`SessionManager.precedes`), or nobody; and moves the
    /// state there.
    ///
    /// - Returns: The new current session, if any, and whether the state changed.
    ///
    /// - Parameter ending: Why the provider ended the current account, when it did: with no successor the state
    ///   says so (``SessionState/accountEnded(_:_:)``) instead of ``SessionState/signedOut``.
    mutating func succeed(after ending: (Account, AccountEnding)? = nil) -> (UserSession?, Bool) {
        let successor = sessions.filter(\.isActive).min {
            SessionManager.precedes(($0.account, $0.selectedAt), ($1.account, $1.selectedAt))
        }
        current = successor
        let nobody: SessionState.Event = ending.map { .accountEnded($0.0, $0.1) } ?? .signedOut
        return (successor, transition(successor.map { .switched($0.account) } ?? nobody))
    }

    /// Sign-out's detach: the session to sign out (`session`, else the current one) leaves `sessions`, its successor
    /// becomes current if it was, and a sign-in of its account waits for `finished`. A session a re-login replaced
    /// is `superseded`: its account's data belongs to the live session. `nil` when there is nothing to sign out.
    /// With `ending` (the provider ended the account) and no successor, the state tells why.
    mutating func detach(
        _ session: UserSession?, until finished: Broadcast<Void>, ending: AccountEnding? = nil
    ) -> Detached? {
        guard let target = session ?? current else { return nil }
        if !sessions.contains(where: { $0 === target }), sessions.contains(where: { $0.account == target.account }) {
            return .superseded(target)
        }
        sessions.removeAll { $0 === target }
        let wasCurrent = current === target
        var successor: UserSession?
        var changed = false
        if wasCurrent { (successor, changed) = succeed(after: ending.map { (target.account, $0) }) }
        signOuts[target.account, default: []].append(finished)
        return .detached(target, wasCurrent: wasCurrent, successor: successor, stateChanged: changed)
    }

    /// Whether a retry of a locked store starts (`starting`, and none of its kind runs), or marks it ended.
    private mutating func storeRetry(_ retry: StoreRetry, starting: Bool) -> Bool {
        switch (retry, starting) {
        case (.writes(let account), true): return storeRetryWrites.insert(account).inserted
        case (.writes(let account), false): storeRetryWrites.remove(account)
        case (.restore, true):
            guard !storeRetryRestore else { return false }
            storeRetryRestore = true
            return true
        case (.restore, false): storeRetryRestore = false
        }
        return false
    }
}

/// What sign-out's detach phase found.
enum Detached {
    /// The session to sign out, now detached; `successor` is current in its place when it was.
    case detached(UserSession, wasCurrent: Bool, successor: UserSession?, stateChanged: Bool)
    /// A session that is no longer live, of an account that has a live session again: nothing to purge.
    case superseded(UserSession)
}

/// What a piece of work the manager tracks is, for ``SessionManager/PendingWork``.
enum PendingWorkKind: Sendable {
    /// A sign-out's revocations and provider logout, running after it returned.
    case serverSteps
    /// A write handed off at sign-out, running on its own.
    case handedOffWrite
}

/// A reset of the current user's identity outside SessionKit (an analytics SDK's `reset()`), run when the current
/// account leaves (``SessionManager/registerIdentityReset(named:_:)``).
struct IdentityReset: Sendable {
    let name: String
    let reset: @Sendable (Account) -> Void
}
