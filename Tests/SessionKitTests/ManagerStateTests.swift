import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// ``ManagerState``'s transitions, one by one, without a manager, a store, a socket or a clock: sessions are only
/// values it holds (none sends anything).
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ManagerStateTests {
    static func session(_ account: Account, selectedAt: Date? = nil) -> UserSession {
        let session = UserSession(account: account, tokens: tokens(account.subject))
        session.restoreSelection(selectedAt)
        return session
    }

    /// A state with `sessions` live and the first current, in the active state.
    static func live(_ sessions: [UserSession]) -> ManagerState {
        var state = ManagerState()
        for (index, session) in sessions.enumerated() {
            _ = state.handle(.install(session, makeCurrent: index == 0, event: .switched(session.account)))
        }
        state.publications.removeAll()
        return state
    }

    @Test func installMakesTheSessionLiveAndCurrentAndReplacesItsAccountsSessions() {
        var state = ManagerState()
        let first = Self.session(alice)
        guard
            case .installed(let replaced, let changed) = state.handle(
                .install(first, makeCurrent: true, event: .switched(alice)))
        else {
            Issue.record("not installed")
            return
        }
        #expect(replaced.isEmpty && changed)
        #expect(state.current === first && state.sessions.map(\.account) == [alice])
        #expect(state.state == .active(alice, offline: false))

        // Another of the same account, not asked to be current: it replaces the current one, so it is current.
        let second = Self.session(alice)
        guard case .installed(let replacedNow, _) = state.handle(.install(second, makeCurrent: false, event: nil))
        else {
            Issue.record("not installed")
            return
        }
        #expect(replacedNow.count == 1 && replacedNow[0] === first)
        #expect(state.current === second && state.sessions.count == 1)

        // Another account, not current: live, current unchanged, the event not applied.
        let other = Self.session(bob)
        guard
            case .installed(_, let changedNow) = state.handle(
                .install(other, makeCurrent: false, event: .switched(bob)))
        else {
            Issue.record("not installed")
            return
        }
        #expect(!changedNow && state.current === second && state.sessions.count == 2)
        #expect(state.state == .active(alice, offline: false))
    }

    @Test func switchToALiveSessionMakesItCurrentAndNamesTheOthers() {
        let (a, b) = (Self.session(alice), Self.session(bob))
        var state = Self.live([a, b])
        guard case .switched(let others?, let changed) = state.handle(.switchTo(b)) else {
            Issue.record("not switched")
            return
        }
        #expect(others.count == 1 && others[0] === a && changed)
        #expect(state.current === b && state.state == .active(bob, offline: false))
    }

    @Test func switchToASessionThatIsNotLiveChangesNothing() {
        let a = Self.session(alice)
        var state = Self.live([a])
        let stranger = Self.session(bob)
        guard case .switched(nil, false) = state.handle(.switchTo(stranger)) else {
            Issue.record("switched to a session that is not live")
            return
        }
        let ended = Self.session(carol)
        _ = state.handle(.install(ended, makeCurrent: false, event: nil))
        ended.end()
        guard case .switched(nil, false) = state.handle(.switchTo(ended)) else {
            Issue.record("switched to an ended session")
            return
        }
        #expect(state.current === a)
    }

    @Test func aSessionSignedOutElsewhereIsFollowedByTheAccountCurrentMostRecently() {
        let now = Date()
        let a = Self.session(alice, selectedAt: now)
        let b = Self.session(bob, selectedAt: now.addingTimeInterval(-60))
        let c = Self.session(carol, selectedAt: now.addingTimeInterval(-10))
        var state = Self.live([a, b, c])
        guard case .left(true, let successor, true) = state.handle(.signedOutElsewhere(a)) else {
            Issue.record("the current session did not leave")
            return
        }
        #expect(successor === c && state.current === c && state.state == .active(carol, offline: false))
        #expect(!state.sessions.contains { $0 === a })
        // One that is not current leaves without a successor.
        guard case .left(false, nil, false) = state.handle(.signedOutElsewhere(b)) else {
            Issue.record("a session that was not current took a successor")
            return
        }
        #expect(state.current === c && state.sessions.count == 1)
    }

    @Test func theLastSessionSignedOutElsewhereLeavesNobodyCurrent() {
        let a = Self.session(alice)
        var state = Self.live([a])
        guard case .left(true, nil, true) = state.handle(.signedOutElsewhere(a)) else {
            Issue.record("not signed out")
            return
        }
        #expect(state.current == nil && state.state == .signedOut)
    }

    @Test func aRejectedCurrentSessionLeavesNobodyCurrentAndAsksForSignIn() {
        let (a, b) = (Self.session(alice), Self.session(bob))
        var state = Self.live([a, b])
        guard case .left(true, nil, true) = state.handle(.rejected(a)) else {
            Issue.record("not rejected")
            return
        }
        #expect(state.current == nil && state.state == .reauthenticationRequired(alice))
        #expect(state.sessions.count == 1 && state.sessions[0] === b)
        guard case .left(false, nil, false) = state.handle(.rejected(b)) else {
            Issue.record("a session that was not current changed the state")
            return
        }
        #expect(state.sessions.isEmpty)
    }

    @Test func detachTakesTheCurrentSessionAndMakesASignInOfItsAccountWait() {
        let (a, b) = (Self.session(alice), Self.session(bob))
        var state = Self.live([a, b])
        let finished = Broadcast<Void>()
        guard case .detached(let target, true, let successor, true)? = state.detach(nil, until: finished) else {
            Issue.record("not detached")
            return
        }
        #expect(target === a && successor === b && state.current === b)
        #expect(state.signOuts[alice]?.count == 1 && state.signOuts[alice]?[0] === finished)
        _ = state.handle(.signOutFinished(alice, finished))
        #expect(state.signOuts[alice] == nil)
    }

    @Test func detachOfASessionThatIsNotCurrentKeepsTheCurrentOne() {
        let (a, b) = (Self.session(alice), Self.session(bob))
        var state = Self.live([a, b])
        guard case .detached(let target, false, nil, false)? = state.detach(b, until: Broadcast()) else {
            Issue.record("not detached")
            return
        }
        #expect(target === b && state.current === a && state.sessions.count == 1)
    }

    @Test func detachOfASessionAReLoginReplacedIsSupersededAndChangesNothing() {
        let old = Self.session(alice)
        var state = Self.live([old])
        let relogin = Self.session(alice)
        _ = state.handle(.install(relogin, makeCurrent: true, event: .signedIn(alice)))
        guard case .superseded(let target)? = state.detach(old, until: Broadcast()) else {
            Issue.record("not superseded")
            return
        }
        #expect(target === old && state.current === relogin && state.signOuts.isEmpty)
    }

    @Test func detachWithNothingCurrentIsNothing() {
        var state = ManagerState()
        #expect(state.detach(nil, until: Broadcast()) == nil)
    }

    @Test func aLockedStoreRetryStartsOncePerKindUntilItEnds() {
        var state = ManagerState()
        #expect(state.handle(.storeRetry(.writes(alice), starting: true)).flag)
        #expect(!state.handle(.storeRetry(.writes(alice), starting: true)).flag)
        #expect(state.handle(.storeRetry(.writes(bob), starting: true)).flag)
        #expect(state.handle(.storeRetry(.restore, starting: true)).flag)
        #expect(!state.handle(.storeRetry(.restore, starting: true)).flag)
        _ = state.handle(.storeRetry(.writes(alice), starting: false))
        _ = state.handle(.storeRetry(.restore, starting: false))
        #expect(state.handle(.storeRetry(.writes(alice), starting: true)).flag)
        #expect(state.handle(.storeRetry(.restore, starting: true)).flag)
    }

    @Test func noticesDuringACheckRunOneMoreCheckNotOneEach() {
        var state = ManagerState()
        #expect(
            state.handle(.storeChanged(.everyAccount)).checkScope == .everyAccount, "the first notice starts a check")
        #expect(state.handle(.storeChanged(.everyAccount)).checkScope == nil)
        #expect(state.handle(.storeChanged(.everyAccount)).checkScope == nil)
        #expect(state.handle(.checked).checkScope == .everyAccount, "notices came during it: one more")
        #expect(state.handle(.checked).checkScope == nil, "none since: the check stops")
        #expect(
            state.handle(.storeChanged(.everyAccount)).checkScope == .everyAccount, "a later notice starts one again")
    }

    @Test func theNextCheckReadsEveryAccountTheNoticesDuringACheckNamed() {
        var state = ManagerState()
        #expect(state.handle(.storeChanged(.accounts(["a"]))).checkScope == .accounts(["a"]))
        #expect(state.handle(.storeChanged(.accounts(["b"]))).checkScope == nil)
        #expect(state.handle(.storeChanged(.accounts(["c"]))).checkScope == nil)
        #expect(state.handle(.checked).checkScope == .accounts(["b", "c"]), "the union of what came meanwhile")
        #expect(state.handle(.storeChanged(.accounts(["d"]))).checkScope == nil)
        #expect(state.handle(.storeChanged(.everyAccount)).checkScope == nil)
        #expect(state.handle(.checked).checkScope == .everyAccount, "a notice for every account covers the rest")
        #expect(state.handle(.checked).checkScope == nil)
    }

    @Test func aStorageFailureIsKeptUntilAWriteSucceeds() {
        var state = ManagerState()
        #expect(!state.handle(.stored(alice)).flag)
        _ = state.handle(.storageFailed(alice, SessionError(.storeUnavailable, "locked")))
        #expect(state.storageFailures[alice]?.code == .storeUnavailable)
        #expect(state.handle(.stored(alice)).flag)
        #expect(state.storageFailures.isEmpty)
    }

    @Test func pendingWorkIsKeptUntilUntracked() {
        var state = ManagerState()
        let first = state.handle(.track(.serverSteps, Broadcast())).id
        let second = state.handle(.track(.handedOffWrite, Broadcast())).id
        #expect(first != second && state.pendingWork.count == 2)
        _ = state.handle(.untrack(first))
        #expect(state.pendingWork.keys.sorted() == [second])
        #expect(state.pendingWork[second]?.kind == .handedOffWrite)
    }

    @Test func everyStateChangeAndANewStreamsFirstStateIsKeptToTell() {
        var state = ManagerState()
        let (_, continuation) = AsyncStream<SessionState>.makeStream()
        let id = state.handle(.subscribe(continuation)).id
        #expect(state.publications.count == 1 && state.publications[0].from == nil)
        #expect(state.publications[0].state == .signedOut)
        state.publications.removeAll()
        #expect(state.handle(.decide { _ in .restoreStarted }).flag)
        #expect(!state.handle(.decide { _ in nil }).flag)
        #expect(state.publications.count == 1 && state.publications[0].from == .signedOut)
        #expect(state.publications[0].to.count == 1)
        // No change, nothing to tell; an unsubscribed stream is told nothing.
        state.publications.removeAll()
        _ = state.handle(.unsubscribe(id))
        #expect(state.handle(.decide { _ in .restoredNothing }).flag)
        #expect(state.publications.count == 1 && state.publications[0].to.isEmpty)
    }

    @Test func decideReadsTheStateItIsGiven() {
        let a = Self.session(alice)
        var state = Self.live([a])
        #expect(!state.handle(.decide { $0.current === a ? nil : .refreshRejected }).flag)
        #expect(state.handle(.decide { $0.current === a ? .refreshStarted : nil }).flag)
        #expect(state.state == .refreshing(alice))
    }

    @Test func containersThatAreGoneAreDroppedBeforeBinding() {
        var state = Self.live([Self.session(alice)])
        let kept = SessionScoped(empty: 0)
        do {
            let gone = SessionScoped(empty: 0)
            _ = state.handle(.registerContainer(WeakBindable(gone)))
        }
        _ = state.handle(.registerContainer(WeakBindable(kept)))
        guard case .bind(let current, let containers) = state.handle(.containersToBind) else {
            Issue.record("nothing to bind")
            return
        }
        #expect(current === state.current && containers.count == 1 && state.containers.count == 1)
    }

    @Test func teardownGivesTheWatchersBackOnce() {
        var state = ManagerState()
        _ = state.handle(.configure(diagnostics: nil, clock: nil, watcher: nil, observer: nil))
        guard case .teardown(nil, nil) = state.handle(.teardown) else {
            Issue.record("no teardown")
            return
        }
    }
}
