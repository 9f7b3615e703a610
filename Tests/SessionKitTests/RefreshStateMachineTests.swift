import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The refresher's decisions without sockets, tasks or clocks: each transition of ``RefreshStateMachine``'s table,
/// its bad inputs, the loop guard and the cross-process decision.
@Suite struct RefreshStateMachineTests {
    typealias Machine = RefreshStateMachine<String>

    let now = ContinuousClock.now

    func held(
        _ access: String = "t0", refresh: String? = "r0", lifetime: Duration? = .seconds(3600), expiring: Bool = false
    ) -> Machine.Held {
        Machine.Held(
            tokens: TokenSet(accessToken: access, refreshToken: refresh, lifetime: lifetime, receivedAt: now),
            expiring: expiring)
    }

    func machine(maximumRefreshes: Int = 5, window: Duration = .seconds(30)) -> Machine {
        Machine(maximumRefreshes: maximumRefreshes, window: window)
    }

    /// Starts a flight for `reason` and launches it with handle `handle`; fails the test if the machine does not
    /// start one.
    @discardableResult
    func start(
        _ machine: inout Machine, _ reason: Machine.Reason = .forced, holding: Machine.Held? = nil,
        at instant: ContinuousClock.Instant? = nil, handle: String = "h",
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Machine.FlightID? {
        let action = machine.need(reason, holding: holding ?? held(), at: instant ?? now)
        guard case .start(let id, _) = action else {
            Issue.record("expected a start, got \(action)", sourceLocation: sourceLocation)
            return nil
        }
        let launched = machine.launched(id, handle: handle)
        #expect(launched, sourceLocation: sourceLocation)
        return id
    }

    func code(_ action: Machine.NeedAction) -> SessionError.Code? {
        if case .fail(let error) = action { return error.code }
        return nil
    }

    func used(_ action: Machine.NeedAction) -> String? {
        if case .use(let token) = action { return token }
        return nil
    }

    // MARK: - need

    @Test(.timeLimit(.minutes(1))) func aNeedAfterTheSessionEndedFails() {
        var machine = machine()
        let action = machine.need(.forced, holding: nil, at: now)
        #expect(code(action) == .sessionEnded, "no tokens: the session ended")
        machine.sessionEnded(with: SessionError.ended).expectNone()
        for reason in [Machine.Reason.forced, .proactive, .rejected(accessToken: "t0")] {
            let action2 = machine.need(reason, holding: held(expiring: true), at: now)
            #expect(code(action2) == .sessionEnded)
        }
        #expect(machine.flightInProgress == nil)
        #expect(machine.history.isEmpty)
    }

    @Test(.timeLimit(.minutes(1))) func aRejectedTokenThatWasReplacedIsAnsweredWithTheCurrentOne() {
        var machine = machine()
        let action = machine.need(.rejected(accessToken: "old"), holding: held("t1"), at: now)
        #expect(used(action) == "t1")
        // Also with a flight in progress: the replacement is the token to send, whatever the flight brings.
        start(&machine)
        let action2 = machine.need(.rejected(accessToken: "old"), holding: held("t1"), at: now)
        #expect(used(action2) == "t1")
        #expect(machine.history.count == 1)
    }

    @Test(.timeLimit(.minutes(1))) func everyNeedWhileAFlightIsInProgressJoinsIt() throws {
        var machine = machine()
        let id = try #require(start(&machine, handle: "flight"))
        for reason in [Machine.Reason.forced, .proactive, .rejected(accessToken: "t0")] {
            let action = machine.need(reason, holding: held(expiring: true), at: now)
            guard case .join(let joined, let handle) = action else {
                Issue.record("\(reason): expected a join, got \(action)")
                continue
            }
            #expect(joined == id)
            #expect(handle == "flight")
        }
        #expect(machine.history.count == 1, "a join starts nothing and counts nothing")
    }

    @Test(.timeLimit(.minutes(1))) func aProactiveNeedForAFreshTokenUsesIt() {
        var machine = machine()
        let action = machine.need(.proactive, holding: held("t0"), at: now)
        #expect(used(action) == "t0")
        #expect(machine.flightInProgress == nil)
        #expect(machine.history.isEmpty)
    }

    @Test(.timeLimit(.minutes(1))) func aNeedStartsAFlightPresentingTheHeldRefreshToken() throws {
        for reason in [Machine.Reason.forced, .rejected(accessToken: "t0"), .proactive] {
            var machine = machine()
            let action = machine.need(reason, holding: held(refresh: "r0", expiring: true), at: now)
            guard case .start(let id, let refreshToken) = action else {
                Issue.record("\(reason): expected a start, got \(action)")
                continue
            }
            #expect(refreshToken == "r0")
            #expect(machine.flightInProgress?.id == id)
            #expect(machine.flightInProgress?.refreshToken == "r0")
            #expect(machine.flightHandle == nil)
            let launched = machine.launched(id, handle: "h")
            #expect(launched)
            #expect(machine.flightHandle == "h")
        }
    }

    @Test(.timeLimit(.minutes(1))) func withoutARefreshTokenTheNeedFailsWithAccessExpired() {
        var machine = machine()
        let action = machine.need(.rejected(accessToken: "t0"), holding: held(refresh: nil), at: now)
        #expect(code(action) == .accessExpired)
        #expect(machine.flightInProgress == nil)
        #expect(machine.history.isEmpty, "a refused need counts nothing")
    }

    @Test(.timeLimit(.minutes(1))) func flightNumbersAreNeverReused() throws {
        var machine = machine(maximumRefreshes: 100)
        var seen: Set<Machine.FlightID> = []
        for _ in 0..<10 {
            let id = try #require(start(&machine))
            #expect(seen.insert(id).inserted)
            let settled = machine.flightSettled(id, outcome: .success("t"))
            #expect(settled)
            let finished = machine.flightFinished(id)
            #expect(finished)
        }
    }

    // MARK: - The loop guard

    @Test(.timeLimit(.minutes(1))) func theLoopGuardRefusesTheRefreshBeyondTheCountUntilTheWindowSlides() throws {
        var machine = machine(maximumRefreshes: 5, window: .seconds(30))
        for second in 0..<5 {
            let id = try #require(start(&machine, at: now.advanced(by: .seconds(second))))
            machine.flightFinished(id)
        }
        let refused = machine.need(.forced, holding: held(), at: now.advanced(by: .seconds(29)))
        #expect(code(refused) == .excessiveRefresh)
        #expect(machine.flightInProgress == nil)
        // The first refresh leaves the window at 30 s.
        start(&machine, at: now.advanced(by: .seconds(30)))
        #expect(machine.history.count == 5)
    }

    /// Rule: a refresh that failed before it asked the provider anything (the shared store's lock or record could not
    /// be had) leaves the loop guard's count; one that reached the provider stays in it, failed or not.
    @Test(.timeLimit(.minutes(1))) func aRefreshThatNeverReachedTheProviderLeavesTheLoopGuardsCount() throws {
        var machine = machine(maximumRefreshes: 5, window: .seconds(30))
        let away = SessionError(.storeUnavailable, "the database is away")
        for second in 0..<20 {
            let id = try #require(start(&machine, at: now.advanced(by: .seconds(second))))
            let settled = machine.flightSettled(id, outcome: .failure(away), reachedProvider: false)
            #expect(settled)
            machine.flightFinished(id)
        }
        #expect(machine.history.isEmpty, "twenty refreshes refused by the store count for nothing")
        for second in 20..<25 {
            let id = try #require(start(&machine, at: now.advanced(by: .seconds(second))))
            let outage = SessionError(.networkUnavailable, "no answer")
            let settled = machine.flightSettled(id, outcome: .failure(outage), reachedProvider: true)
            #expect(settled)
            machine.flightFinished(id)
        }
        let refused = machine.need(.forced, holding: held(), at: now.advanced(by: .seconds(26)))
        #expect(code(refused) == .excessiveRefresh, "five that reached the provider fill the guard")
    }

    /// Rule: a proactive refresh of a token long-lived enough never counts against the loop guard, also when
    /// 401-driven refreshes have filled the window.
    @Test(.timeLimit(.minutes(1))) func aProactiveRefreshOfALongLivedTokenStartsWhen401sFilledTheLoopGuard() throws {
        var machine = machine(maximumRefreshes: 5, window: .seconds(30))
        for n in 0..<5 {
            let id = try #require(start(&machine, .rejected(accessToken: "t\(n)"), holding: held("t\(n)")))
            machine.flightFinished(id)
        }
        let refused = machine.need(.rejected(accessToken: "t5"), holding: held("t5"), at: now)
        #expect(code(refused) == .excessiveRefresh)
        let hour = held("t5", lifetime: .seconds(3600), expiring: true)
        let action = machine.need(.proactive, holding: hour, at: now)
        guard case .start(_, let refreshToken) = action else {
            Issue.record("a proactive refresh of a one-hour token was refused: \(action)")
            return
        }
        #expect(refreshToken == "r0")
        #expect(machine.history.count == 5, "it did not count")
        // The threshold is 2 × window / maximumRefreshes = 12 s: at 12 s it does not count, below it does.
        var edge = self.machine(maximumRefreshes: 5, window: .seconds(30))
        for _ in 0..<5 { edge.flightFinished(try #require(start(&edge))) }
        if case .start(let id, _) = edge.need(
            .proactive, holding: held(lifetime: .seconds(12), expiring: true), at: now)
        {
            edge.flightFinished(id)
        } else {
            Issue.record("a proactive refresh of a 12-second token was refused")
        }
        let short = edge.need(.proactive, holding: held(lifetime: .seconds(11), expiring: true), at: now)
        #expect(code(short) == .excessiveRefresh)
    }

    @Test(
        .timeLimit(.minutes(1)),
        arguments: [
            // (reason, lifetime s (0: none), maximumRefreshes) → counts
            ("proactive", 3600, 5, false), ("proactive", 12, 5, false), ("proactive", 11, 5, true),
            ("proactive", 0, 5, true), ("proactive", 3600, 0, true), ("forced", 3600, 5, true),
            ("rejected", 3600, 5, true),
        ])
    func whatCountsAgainstTheLoopGuard(reason: String, lifetime: Int, maximumRefreshes: Int, counts: Bool) {
        let machine = machine(maximumRefreshes: maximumRefreshes, window: .seconds(30))
        let why: Machine.Reason =
            switch reason {
            case "proactive": .proactive
            case "forced": .forced
            default: .rejected(accessToken: "t0")
            }
        let tokens = TokenSet(accessToken: "t0", lifetime: lifetime == 0 ? nil : .seconds(lifetime))
        #expect(machine.countsAgainstLoopGuard(tokens, reason: why) == counts)
    }

    @Test(.timeLimit(.minutes(1))) func boundsThatAreNotPositiveNeverCrash() {
        var none = machine(maximumRefreshes: 0)
        let action = none.need(.forced, holding: held(), at: now)
        #expect(code(action) == .excessiveRefresh, "no refresh is allowed")
        var negative = machine(maximumRefreshes: 1, window: .seconds(-1))
        for _ in 0..<3 {
            guard case .start(let id, _) = negative.need(.forced, holding: held(), at: now) else {
                Issue.record("a window that holds nothing refused a refresh")
                return
            }
            _ = negative.launched(id, handle: "h")
            negative.flightFinished(id)
        }
    }

    // MARK: - Flight events

    @Test(.timeLimit(.minutes(1))) func launchingAFlightThatIsNotInProgressIsRefused() throws {
        var machine = machine()
        let launched = machine.launched(Machine.FlightID(rawValue: 7), handle: "stray")
        #expect(!launched, "no flight")
        let id = try #require(start(&machine, handle: "h"))
        let launched2 = machine.launched(id, handle: "twice")
        #expect(!launched2, "launched once only")
        let launched3 = machine.launched(Machine.FlightID(rawValue: id.rawValue + 1), handle: "other")
        #expect(!launched3)
        #expect(machine.flightHandle == "h")
    }

    @Test(.timeLimit(.minutes(1))) func eventsForAnotherFlightChangeNothing() throws {
        var machine = machine()
        let stray = Machine.FlightID(rawValue: 99)
        let settled = machine.flightSettled(stray, outcome: .success("t"))
        #expect(!settled)
        let finished = machine.flightFinished(stray)
        #expect(!finished)
        let id = try #require(start(&machine))
        let settled2 = machine.flightSettled(stray, outcome: .failure(SessionError.ended))
        #expect(!settled2)
        let finished2 = machine.flightFinished(stray)
        #expect(!finished2)
        #expect(machine.flightInProgress?.id == id)
        let finished3 = machine.flightFinished(id)
        #expect(finished3)
        let finished4 = machine.flightFinished(id)
        #expect(!finished4, "finished once only")
        let settled3 = machine.flightSettled(id, outcome: .success("late"))
        #expect(!settled3)
        #expect(machine.flightInProgress == nil)
    }

    @Test(.timeLimit(.minutes(1))) func aSettledFlightIsStillJoinedUntilItFinishes() throws {
        var machine = machine()
        let id = try #require(start(&machine))
        let settled = machine.flightSettled(id, outcome: .failure(SessionError(.networkUnavailable, "offline")))
        #expect(settled)
        guard case .join(let joined, _) = machine.need(.forced, holding: held(), at: now) else {
            Issue.record("a settled flight was not joined")
            return
        }
        #expect(joined == id)
        machine.flightFinished(id)
        guard case .start(let next, "r0") = machine.need(.forced, holding: held(), at: now) else {
            Issue.record("no refresh started after the failed flight left")
            return
        }
        #expect(next != id)
    }

    // MARK: - The session's end

    @Test(.timeLimit(.minutes(1))) func theSessionsEndCancelsTheFlightWithItsOwnFailureOrTheEndError() throws {
        let ended = SessionError(.sessionEnded, "ended")
        let rejected = SessionError(.refreshRejected, "invalid_grant")
        let cases: [(Result<String, SessionError>?, SessionError)] = [
            (nil, ended), (.success("t1"), ended), (.failure(rejected), rejected),
        ]
        for (outcome, expected) in cases {
            var machine = machine()
            let id = try #require(start(&machine, handle: "flight"))
            if let outcome {
                let settled = machine.flightSettled(id, outcome: outcome)
                #expect(settled)
            }
            guard case .cancel(let handle, let error) = machine.sessionEnded(with: ended) else {
                Issue.record("the flight was not cancelled")
                continue
            }
            #expect(handle == "flight")
            #expect(error == expected)
            #expect(machine.hasEnded)
            #expect(machine.flightInProgress == nil)
            let finished = machine.flightFinished(id)
            #expect(!finished, "the ended flight is no longer in progress")
            machine.sessionEnded(with: ended).expectNone()
        }
    }

    /// An ending that keeps the record releases a flight whose token request is on its way (the server may have
    /// rotated already) and cancels every other: one not sending yet, one that failed on its own, and any flight
    /// at a sign-out. After the end no flight may send.
    @Test(.timeLimit(.minutes(1))) func anEndingThatKeepsTheRecordReleasesOnlyAFlightWhoseRequestIsOut() throws {
        let ended = SessionError(.sessionEnded, "ended")
        let rejected = SessionError(.refreshRejected, "invalid_grant")
        // (sending, keepingRecord, own failure) → released?
        let cases: [(Bool, Bool, SessionError?, Bool)] = [
            (true, true, nil, true), (false, true, nil, false), (true, false, nil, false),
            (true, true, rejected, false), (false, false, nil, false),
        ]
        for (sending, keepingRecord, failure, released) in cases {
            var machine = machine()
            let id = try #require(start(&machine, handle: "flight"))
            if sending {
                let may = machine.sending(id)
                #expect(may)
            }
            if let failure {
                let settled = machine.flightSettled(id, outcome: .failure(failure))
                #expect(settled)
            }
            switch machine.sessionEnded(with: ended, keepingRecord: keepingRecord) {
            case .release(let handle, let error):
                #expect(
                    released,
                    "released: sending \(sending), keeping \(keepingRecord), failure \(String(describing: failure))")
                #expect(handle == "flight")
                #expect(error == ended)
            case .cancel(let handle, let error):
                #expect(!released, "cancelled: sending \(sending), keeping \(keepingRecord)")
                #expect(handle == "flight")
                #expect(error == (failure ?? ended))
            case .none:
                Issue.record("the flight was neither cancelled nor released")
            }
            #expect(machine.isReleased(id) == released)
            let mayStill = machine.sending(id)
            #expect(!mayStill, "no flight sends after the end")
            #expect(machine.flightInProgress == nil)
        }
    }

    @Test(.timeLimit(.minutes(1))) func aFlightMaySendOnlyWhileItIsTheOneInProgressAndTheSessionLasts() throws {
        var machine = machine()
        let id = try #require(start(&machine, handle: "flight"))
        let first = machine.sending(id)
        let again = machine.sending(id)
        #expect(first && again, "a retry sends again")
        _ = machine.flightSettled(id, outcome: .success("t1"))
        machine.flightFinished(id)
        let finished = machine.sending(id)
        #expect(!finished, "a finished flight sends nothing")
        #expect(!machine.isReleased(id))
    }

    @Test(.timeLimit(.minutes(1))) func theSessionsEndWithoutAFlightCancelsNothing() {
        var machine = machine()
        machine.sessionEnded(with: SessionError.ended).expectNone()
        #expect(machine.hasEnded)
    }

    // MARK: - The read-order race

    /// A flight commits its tokens, then finishes; a 401 for the token it replaced, decided after that, is answered
    /// with the new token, and no refresh presents the refresh token the flight retired.
    @Test(.timeLimit(.minutes(1))) func aNeedAfterTheFlightCommittedAndLeftUsesItsTokens() throws {
        var machine = machine()
        let id = try #require(start(&machine, .rejected(accessToken: "t0"), holding: held("t0", refresh: "r0")))
        let committed = held("t1", refresh: "r1")
        // Committed, not yet finished: the 401 for the old token takes the new one.
        let duringFlight = machine.need(.rejected(accessToken: "t0"), holding: committed, at: now)
        #expect(used(duringFlight) == "t1")
        let settled = machine.flightSettled(id, outcome: .success("t1"))
        #expect(settled)
        machine.flightFinished(id)
        // Finished: the same.
        let action = machine.need(.rejected(accessToken: "t0"), holding: committed, at: now)
        if case .start(_, "r0") = action { Issue.record("the retired refresh token was presented again") }
        #expect(used(action) == "t1")
        // A refresh needed now presents the flight's refresh token, the newest.
        guard case .start(_, let presented) = machine.need(.forced, holding: committed, at: now) else {
            Issue.record("no refresh started")
            return
        }
        #expect(presented == "r1")
    }

    // MARK: - The cross-process decision

    func stored(_ access: String, refresh: String?, remaining: Duration?) -> TokenSet {
        TokenSet(accessToken: access, refreshToken: refresh, lifetime: remaining, receivedAt: now)
    }

    @Test(.timeLimit(.minutes(1))) func aRecordThatIsGoneMeansSignedOutElsewhere() {
        #expect(Machine.storedRecordRead(nil, presenting: "r0", holding: "t0", at: now) == .signedOutElsewhere)
    }

    @Test(.timeLimit(.minutes(1))) func aRecordHoldingTheTokenInHandIsRefreshedWithIt() {
        let same = stored("t0", refresh: "r0", remaining: .seconds(60))
        #expect(
            Machine.storedRecordRead(same, presenting: "r0", holding: "t0", at: now) == .present(refreshToken: "r0"))
        let without = stored("", refresh: nil, remaining: nil)
        #expect(
            Machine.storedRecordRead(without, presenting: "r0", holding: "t0", at: now) == .present(refreshToken: "r0"))
    }

    @Test(.timeLimit(.minutes(1))) func anotherProcesssValidAccessTokenIsAdopted() {
        let rotated = stored("t1", refresh: "r1", remaining: .seconds(60))
        #expect(Machine.storedRecordRead(rotated, presenting: "r0", holding: "t0", at: now) == .adopt(rotated))
    }

    /// Rule: another process rotated the refresh token and the access token it stored has expired too (or is
    /// absent): the refresh presents the stored, newest refresh token, never the retired one in hand.
    @Test(.timeLimit(.minutes(1))) func anotherProcesssRefreshTokenIsPresentedWhenItsAccessTokenExpired() {
        let cases = [
            stored("", refresh: "r1", remaining: .zero),  // `CredentialRecord.tokens(clock:)` of an expired one
            stored("t1", refresh: "r1", remaining: .zero),  // expired by the instant of the read
            stored("t1", refresh: "r1", remaining: .seconds(-5)),
            stored("", refresh: "r1", remaining: nil),  // stored without an access token
            stored("t0", refresh: "r1", remaining: .seconds(60)),  // the access token this process holds already
        ]
        for record in cases {
            let decision = Machine.storedRecordRead(record, presenting: "r0", holding: "t0", at: now)
            #expect(decision == .present(refreshToken: "r1"), "\(record)")
        }
    }

    @Test(.timeLimit(.minutes(1))) func theCrossProcessDecisionReadsTheRecordAsCredentialRecordGivesIt() {
        let clock = SystemClock()
        let account = Account(issuer: "https://id.sessionkit.test", subject: "alice")
        var record = CredentialRecord(account: account, refreshToken: "r1")
        record.accessToken = "t1"
        record.accessTokenExpiresAt = clock.wallNow.addingTimeInterval(-1)
        let expired = Machine.storedRecordRead(
            record.tokens(clock: clock), presenting: "r0", holding: "t0", at: clock.now)
        #expect(expired == .present(refreshToken: "r1"))
        record.accessTokenExpiresAt = clock.wallNow.addingTimeInterval(600)
        let valid = Machine.storedRecordRead(
            record.tokens(clock: clock), presenting: "r0", holding: "t0", at: clock.now)
        guard case .adopt(let tokens) = valid else {
            Issue.record("a valid stored access token was not adopted: \(valid)")
            return
        }
        #expect(tokens.accessToken == "t1")
        #expect(tokens.refreshToken == "r1")
    }
}

extension RefreshStateMachine.EndAction {
    func expectNone(sourceLocation: SourceLocation = #_sourceLocation) {
        if case .cancel = self { Issue.record("expected nothing to cancel", sourceLocation: sourceLocation) }
    }
}
