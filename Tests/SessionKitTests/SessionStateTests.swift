import SessionKit
import Testing

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SessionStateTests {
    static let alice = Account(issuer: "https://id.example", subject: "alice")
    static let bob = Account(issuer: "https://id.example", subject: "bob")
    static let failure = SessionError(.authorizationFailed, "denied")

    static let states: [(String, SessionState)] = [
        ("R", .restoring), ("S", .signedOut), ("A", .authenticating), ("Act", .active(alice, offline: false)),
        ("Off", .active(alice, offline: true)), ("Ref", .refreshing(alice)), ("RA", .reauthenticationRequired(alice)),
        ("F", .failed(failure)),
    ]

    static let events: [(String, SessionState.Event)] = [
        ("rs", .restoreStarted), ("rd", .restored(bob)), ("ro", .restoredOffline(bob)), ("rn", .restoredNothing),
        ("rf", .restoreFailed(failure)), ("si", .signInStarted), ("sd", .signedIn(bob)), ("sf", .signInFailed(failure)),
        ("rfs", .refreshStarted),
        ("rfok", .refreshSucceeded), ("rft", .refreshFailedTransiently), ("rfr", .refreshRejected),
        ("uc", .userCancelled), ("so", .signedOut), ("sw", .switched(bob)), ("rj", .restoreRejected(bob)),
        ("sa", .signInAbandoned(bob)), ("rff", .refreshFailed),
    ]

    /// Every (state, event) pair, written out. `=` means the state is unchanged.
    static let table: [String: [String: String]] = [
        "R": [
            "rs": "=", "rd": "Act(bob)", "ro": "Off(bob)", "rn": "S", "rf": "F", "si": "=", "sd": "=", "sf": "=",
            "rfs": "=",
            "rfok": "=", "rft": "=", "rfr": "=", "uc": "=", "so": "S", "sw": "=",
            "rj": "RA(bob)", "sa": "=", "rff": "=",
        ],
        "S": [
            "rs": "R", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "A", "sd": "=", "sf": "=", "rfs": "=",
            "rfok": "=",
            "rft": "=", "rfr": "=", "uc": "=", "so": "S", "sw": "Act(bob)",
            "rj": "=", "sa": "=", "rff": "=",
        ],
        "A": [
            "rs": "=", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "=", "sd": "Act(bob)", "sf": "F", "rfs": "=",
            "rfok": "=", "rft": "=", "rfr": "=", "uc": "S", "so": "S", "sw": "=",
            "rj": "=", "sa": "Act(bob)", "rff": "=",
        ],
        "Act": [
            "rs": "=", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "A", "sd": "=", "sf": "=", "rfs": "Ref",
            "rfok": "Act", "rft": "Off", "rfr": "RA", "uc": "=", "so": "S", "sw": "Act(bob)",
            "rj": "=", "sa": "=", "rff": "Act",
        ],
        "Off": [
            "rs": "=", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "A", "sd": "=", "sf": "=", "rfs": "Ref",
            "rfok": "Act", "rft": "Off", "rfr": "RA", "uc": "=", "so": "S", "sw": "Act(bob)",
            "rj": "=", "sa": "=", "rff": "Act",
        ],
        "Ref": [
            "rs": "=", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "A", "sd": "=", "sf": "=", "rfs": "=",
            "rfok": "Act", "rft": "Off", "rfr": "RA", "uc": "Act", "so": "S", "sw": "Act(bob)",
            "rj": "=", "sa": "=", "rff": "Act",
        ],
        "RA": [
            "rs": "=", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "A", "sd": "Act(bob)", "sf": "=", "rfs": "=",
            "rfok": "=", "rft": "=", "rfr": "=", "uc": "=", "so": "S", "sw": "Act(bob)",
            "rj": "=", "sa": "=", "rff": "=",
        ],
        "F": [
            "rs": "R", "rd": "=", "ro": "=", "rn": "=", "rf": "=", "si": "A", "sd": "=", "sf": "=", "rfs": "=",
            "rfok": "=",
            "rft": "=", "rfr": "=", "uc": "=", "so": "S", "sw": "Act(bob)",
            "rj": "=", "sa": "=", "rff": "=",
        ],
    ]

    static func expected(_ code: String, from state: SessionState) -> SessionState {
        switch code {
        case "=": state
        case "R": .restoring
        case "S": .signedOut
        case "A": .authenticating
        case "Act": .active(alice, offline: false)
        case "Off": .active(alice, offline: true)
        case "Ref": .refreshing(alice)
        case "RA": .reauthenticationRequired(alice)
        case "F": .failed(failure)
        case "Act(bob)": .active(bob, offline: false)
        case "Off(bob)": .active(bob, offline: true)
        case "RA(bob)": .reauthenticationRequired(bob)
        default: preconditionFailure("unknown code \(code)")
        }
    }

    @Test(arguments: states.map(\.0))
    func everyEventInEveryState(_ stateName: String) throws {
        let state = try #require(Self.states.first { $0.0 == stateName }?.1)
        let row = try #require(Self.table[stateName])
        #expect(row.count == Self.events.count, "the table covers every event")
        for (eventName, event) in Self.events {
            let code = try #require(row[eventName], "missing \(stateName) × \(eventName)")
            #expect(
                state.applying(event) == Self.expected(code, from: state),
                "\(stateName) × \(eventName)"
            )
        }
    }

    @Test func networkErrorsNeverSignAnyoneOut() {
        for (_, state) in Self.states {
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
    }
}
