import SessionKit
import Testing

/// SessionState's transitions, every (state, event) pair written out by name.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SessionStateTests {
    static let alice = Account(issuer: "https://id.example", subject: "alice")
    static let bob = Account(issuer: "https://id.example", subject: "bob")
    static let failure = SessionError(.authorizationFailed, "denied")

    /// What an event does to a state.
    enum Next: Equatable, Sendable {
        /// The state is unchanged.
        case stays
        /// The state becomes this one.
        case becomes(SessionState)
    }

    /// One state's row: each event, with what it does from that state.
    typealias Row = [(event: SessionState.Event, next: Next)]

    /// Every event, with the payloads the rows use: Bob signs in, restores or is switched to while Alice's state
    /// is the one held.
    static let events: [SessionState.Event] = [
        .restoreStarted, .restored(bob), .restoredOffline(bob), .restoredNothing, .restoreFailed(failure),
        .restoreRejected(bob), .signInStarted, .signedIn(bob), .signInFailed(failure), .signInAbandoned(bob),
        .refreshStarted, .refreshSucceeded, .refreshFailedTransiently, .refreshFailed, .refreshRejected,
        .userCancelled, .signedOut, .switched(bob), .accountEnded(bob, .appleIDRevoked),
    ]

    /// From restoring (`.restoring`).
    static let restoring: Row = [
        (.restoreStarted, .stays),
        (.restored(bob), .becomes(.active(bob, offline: false))),
        (.restoredOffline(bob), .becomes(.active(bob, offline: true))),
        (.restoredNothing, .becomes(.signedOut)),
        (.restoreFailed(failure), .becomes(.failed(failure))),
        (.restoreRejected(bob), .becomes(.reauthenticationRequired(bob))),
        (.signInStarted, .stays),
        (.signedIn(bob), .stays),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .stays),
        (.refreshFailedTransiently, .stays),
        (.refreshFailed, .stays),
        (.refreshRejected, .stays),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .stays),
        (.accountEnded(bob, .appleIDRevoked), .stays),
    ]

    /// From signedOut (`.signedOut`).
    static let signedOut: Row = [
        (.restoreStarted, .becomes(.restoring)),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .stays),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .stays),
        (.refreshFailedTransiently, .stays),
        (.refreshFailed, .stays),
        (.refreshRejected, .stays),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .stays),
    ]

    /// From authenticating (`.authenticating`).
    static let authenticating: Row = [
        (.restoreStarted, .stays),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .stays),
        (.signedIn(bob), .becomes(.active(bob, offline: false))),
        (.signInFailed(failure), .becomes(.failed(failure))),
        (.signInAbandoned(bob), .becomes(.active(bob, offline: false))),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .stays),
        (.refreshFailedTransiently, .stays),
        (.refreshFailed, .stays),
        (.refreshRejected, .stays),
        (.userCancelled, .becomes(.signedOut)),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .stays),
        (.accountEnded(bob, .appleIDRevoked), .stays),
    ]

    /// From activeOnline (`.active(alice, offline: false)`).
    static let activeOnline: Row = [
        (.restoreStarted, .stays),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .stays),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .becomes(.refreshing(alice))),
        (.refreshSucceeded, .becomes(.active(alice, offline: false))),
        (.refreshFailedTransiently, .becomes(.active(alice, offline: true))),
        (.refreshFailed, .becomes(.active(alice, offline: false))),
        (.refreshRejected, .becomes(.reauthenticationRequired(alice))),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .becomes(.accountEnded(bob, .appleIDRevoked))),
    ]

    /// From activeOffline (`.active(alice, offline: true)`).
    static let activeOffline: Row = [
        (.restoreStarted, .stays),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .stays),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .becomes(.refreshing(alice))),
        (.refreshSucceeded, .becomes(.active(alice, offline: false))),
        (.refreshFailedTransiently, .becomes(.active(alice, offline: true))),
        (.refreshFailed, .becomes(.active(alice, offline: false))),
        (.refreshRejected, .becomes(.reauthenticationRequired(alice))),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .becomes(.accountEnded(bob, .appleIDRevoked))),
    ]

    /// From refreshing (`.refreshing(alice)`).
    static let refreshing: Row = [
        (.restoreStarted, .stays),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .stays),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .becomes(.active(alice, offline: false))),
        (.refreshFailedTransiently, .becomes(.active(alice, offline: true))),
        (.refreshFailed, .becomes(.active(alice, offline: false))),
        (.refreshRejected, .becomes(.reauthenticationRequired(alice))),
        (.userCancelled, .becomes(.active(alice, offline: false))),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .becomes(.accountEnded(bob, .appleIDRevoked))),
    ]

    /// From reauthenticationRequired (`.reauthenticationRequired(alice)`).
    static let reauthenticationRequired: Row = [
        (.restoreStarted, .stays),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .becomes(.active(bob, offline: false))),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .stays),
        (.refreshFailedTransiently, .stays),
        (.refreshFailed, .stays),
        (.refreshRejected, .stays),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .becomes(.accountEnded(bob, .appleIDRevoked))),
    ]

    /// From failed (`.failed(failure)`).
    static let failed: Row = [
        (.restoreStarted, .becomes(.restoring)),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .stays),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .stays),
        (.refreshFailedTransiently, .stays),
        (.refreshFailed, .stays),
        (.refreshRejected, .stays),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .becomes(.accountEnded(bob, .appleIDRevoked))),
    ]

    /// From accountEnded (`.accountEnded(alice, .backChannelLogout)`): the provider ended Alice, nobody is current.
    static let accountEnded: Row = [
        (.restoreStarted, .becomes(.restoring)),
        (.restored(bob), .stays),
        (.restoredOffline(bob), .stays),
        (.restoredNothing, .stays),
        (.restoreFailed(failure), .stays),
        (.restoreRejected(bob), .stays),
        (.signInStarted, .becomes(.authenticating)),
        (.signedIn(bob), .becomes(.active(bob, offline: false))),
        (.signInFailed(failure), .stays),
        (.signInAbandoned(bob), .stays),
        (.refreshStarted, .stays),
        (.refreshSucceeded, .stays),
        (.refreshFailedTransiently, .stays),
        (.refreshFailed, .stays),
        (.refreshRejected, .stays),
        (.userCancelled, .stays),
        (.signedOut, .becomes(.signedOut)),
        (.switched(bob), .becomes(.active(bob, offline: false))),
        (.accountEnded(bob, .appleIDRevoked), .stays),
    ]

    /// Every state, with its row.
    static let table: [(state: SessionState, row: Row)] = [
        (.restoring, restoring),
        (.signedOut, signedOut),
        (.authenticating, authenticating),
        (.active(alice, offline: false), activeOnline),
        (.active(alice, offline: true), activeOffline),
        (.refreshing(alice), refreshing),
        (.reauthenticationRequired(alice), reauthenticationRequired),
        (.failed(failure), failed),
        (.accountEnded(alice, .backChannelLogout), accountEnded),
    ]

    static let states: [SessionState] = table.map { $0.state }

    @Test(arguments: states)
    func everyEventInEveryState(_ state: SessionState) throws {
        let row = try #require(Self.table.first { $0.state == state }?.row)
        #expect(row.map { $0.event } == Self.events, "the row of \(state) lists every event, once, in order")
        for (event, next) in row {
            let expected: SessionState
            switch next {
            case .stays: expected = state
            case .becomes(let target): expected = target
            }
            #expect(state.applying(event) == expected, "\(state) × \(event)")
        }
    }

    @Test func networkErrorsNeverSignAnyoneOut() {
        for state in Self.states {
            let next = state.applying(.refreshFailedTransiently)
            if state.account != nil { #expect(next.account != nil) }
            #expect(next != .signedOut || state == .signedOut)
        }
    }

    @Test func cancelledPromptNeverSignsOutAnActiveAccount() {
        for state in [SessionState.active(Self.alice, offline: false), .refreshing(Self.alice)] {
            #expect(state.applying(.userCancelled).account == Self.alice)
        }
    }

    @Test func allCasesListsEveryEvent() {
        #expect(SessionState.Event.allCases.count == Self.events.count)
        #expect(Set(SessionState.Event.allCases.map(\.description)) == Set(Self.events.map(\.description)))
    }
}
