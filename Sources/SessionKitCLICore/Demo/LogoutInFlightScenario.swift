import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A realistic request mix: Poisson arrivals at 2 requests/s, 600 ms of server latency, a logout at a random
/// (seeded) moment. Both runs follow the same schedule on real time, side by side, each against its own server.
enum LogoutInFlightScenario {
    static let id = "logout-in-flight"
    static let scenario = DemoScenario(id: id) { seed in
        let schedule = ArrivalSchedule(seed: seed)
        async let naiveRun = naive(schedule)
        async let sessionKitRun = withSessionKit(schedule)
        let (naive, sessionKit) = try await (naiveRun, sessionKitRun)
        return ScenarioResult(id: id, naive: naive.verdict, sessionKit: sessionKit.verdict)
    }

    private static func install(on server: LocalServer) {
        server.route("GET", "/feed") { request in
            .json(#"{"user":"\#(DemoSupport.user(of: request))"}"#).delayed(by: ArrivalSchedule.latency)
        }
    }

    private static func prefix(_ schedule: ArrivalSchedule, inFlight: Int) -> String {
        let l = String(format: "%.1f", ArrivalSchedule.expectedInFlight)
        let t = String(format: "%.2f", schedule.logout.seconds)
        return "λW = 2/s × 0.6 s = \(l) in flight on average; \(inFlight) in flight at logout (t = \(t) s)"
    }

    /// Runs `body(n)` for the n-th arrival at its time, and `logout` at the logout moment; returns when all are done.
    private static func drive(
        _ schedule: ArrivalSchedule,
        request: @escaping @Sendable (Int) async -> Void,
        logout: @escaping @Sendable () async -> Void
    ) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, arrival) in schedule.arrivals.enumerated() {
                try await clock.sleep(until: start.advanced(by: arrival))
                group.addTask { await request(index) }
            }
            try await clock.sleep(until: start.advanced(by: schedule.logout))
            await logout()
            try await group.waitForAll()
        }
    }

    /// The naive app: a feed store that every response appends to; logout clears it and forgets the token.
    private struct NaiveState: Sendable {
        var inFlight = 0
        var loggedOut = false
        var inFlightAtLogout = 0
        var feed: [String] = []
        var landedAfterLogout = 0
        var failed = 0
    }

    /// Runs the naive app on `schedule`.
    ///
    /// - Returns: The verdict, and how many requests were in flight at the logout (the bug needs at least one).
    static func naive(_ schedule: ArrivalSchedule) async throws -> (verdict: Verdict, inFlightAtLogout: Int) {
        try await LocalServer.withRunning { server in
            install(on: server)
            let urlSession = DemoSupport.appURLSession()
            defer { urlSession.invalidateAndCancel() }
            let state = Shared(NaiveState())
            try await drive(
                schedule,
                request: { _ in
                    state.update { $0.inFlight += 1 }
                    do {
                        let (data, _) = try await urlSession.data(
                            for: DemoSupport.get(server, "/feed", token: "token-alice"))
                        state.update { state in
                            state.inFlight -= 1
                            state.feed.append(DemoSupport.text(data))  // no check of who is signed in
                            if state.loggedOut { state.landedAfterLogout += 1 }
                        }
                    } catch {
                        state.update { state in
                            state.inFlight -= 1
                            state.failed += 1
                        }
                    }
                },
                logout: {
                    state.update { state in
                        state.loggedOut = true
                        state.inFlightAtLogout = state.inFlight
                        state.feed = []
                    }
                }
            )
            let final = state.value
            let leaked = final.landedAfterLogout > 0 && !final.feed.isEmpty
            var detail = prefix(schedule, inFlight: final.inFlightAtLogout) + "; "
            detail +=
                final.inFlightAtLogout == 0
                ? "nothing was in flight this time (e^-1.2 ≈ 30 % of logouts); try another --seed"
                : "\(final.landedAfterLogout) landed after logout and were committed to the signed-out app's state"
            if final.failed > 0 { detail += "; \(final.failed) failed" }
            return (Verdict(leaked: leaked, detail: detail), final.inFlightAtLogout)
        }
    }

    private struct Outcomes: Sendable {
        var loggedOut = false
        var committedBefore = 0
        var committedAfterLogout = 0
        var refused = 0
        var ended = 0
        var failed = 0
    }

    /// Runs the app with SessionKit on `schedule`.
    ///
    /// - Returns: The verdict, and how many requests sign-out cancelled.
    static func withSessionKit(_ schedule: ArrivalSchedule) async throws -> (verdict: Verdict, cancelled: Int) {
        try await LocalServer.withRunning { server in
            install(on: server)
            let manager = DemoSupport.manager()
            let feed = SessionScoped<[String]>(empty: [])
            manager.register(feed)
            let session = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice"))
            let outcomes = Shared(Outcomes())
            let cancelled = Shared(0)
            try await drive(
                schedule,
                request: { _ in
                    do {
                        let (data, _) = try await session.data(for: DemoSupport.get(server, "/feed"))
                        let committed = feed.update(from: session) { $0.append(DemoSupport.text(data)) }
                        outcomes.update { outcomes in
                            if !committed {
                                outcomes.refused += 1
                            } else if outcomes.loggedOut {
                                outcomes.committedAfterLogout += 1
                            } else {
                                outcomes.committedBefore += 1
                            }
                        }
                    } catch let error as SessionError where error.code == .sessionEnded {
                        outcomes.update { $0.ended += 1 }
                    } catch {
                        outcomes.update { $0.failed += 1 }
                    }
                },
                logout: {
                    outcomes.update { $0.loggedOut = true }
                    let report = await manager.signOut(options: .localOnly)
                    cancelled.update { $0 = report?.cancelledRequests ?? 0 }
                }
            )
            let final = outcomes.value
            let leaked = final.committedAfterLogout > 0 || !feed.value.isEmpty
            var detail = prefix(schedule, inFlight: cancelled.value) + "; "
            detail +=
                "\(final.ended) ended with sessionEnded, \(final.committedAfterLogout) committed after logout"
            if final.refused > 0 { detail += ", \(final.refused) refused at commit" }
            if final.failed > 0 { detail += "; \(final.failed) failed otherwise" }
            return (Verdict(leaked: leaked, detail: detail), cancelled.value)
        }
    }
}
