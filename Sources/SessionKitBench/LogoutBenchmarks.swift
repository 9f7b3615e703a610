import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sign-out with requests in flight: N requests are held at a gate on the server when the session is signed out.
///
/// - `logout.detach.microseconds.nN`: `SessionManager.signOut`'s local phases (detach, clear, cancel), as its
///   report's `localPhasesDuration` measures them.
/// - `logout.end.microseconds.nN`: `UserSession.end()` alone, wall clock; `logout.end.cpu_microseconds.nN`: the
///   same in the calling thread's CPU time, which a preemption does not inflate.
/// - `logout.drain.ratio.n1000`: from `end()` until the last of the 1,000 requests has thrown, divided by the same
///   for a raw `URLSession.invalidateAndCancel()` with 1,000 raw tasks in flight.
///
/// Both clients allow 64 connections per host (the session's setting), so 64 requests wait at the server and the
/// rest wait for a connection inside the URLSession: all N are in flight from the caller's point of view.
enum LogoutBenchmarks {
    private static let sizes = [0, 100, 1000]
    private static let repetitions = 5
    private static let connections = 64

    static let all = [
        Benchmark(
            resultNames: sizes.map { "logout.detach.microseconds.n\($0)" }
                + sizes.map { "logout.end.microseconds.n\($0)" }
                + sizes.map { "logout.end.cpu_microseconds.n\($0)" }
                + [
                    "logout.drain.ratio.n1000", "logout.drain.milliseconds.n1000",
                    "logout.drain.raw.milliseconds.n1000",
                ],
            run: { try await measure() })
    ]

    private enum Variant: CaseIterable {
        case manager, end, raw
    }

    private static func measure() async throws -> [BenchResult] {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            let url = server.url("/held")
            var detach: [Int: [Double]] = [:]
            var end: [Int: [Double]] = [:]
            var endCPU: [Int: [Double]] = [:]
            var drainRatios: [Double] = []
            var drains: [Double] = []
            var rawDrains: [Double] = []
            for n in sizes {
                for repetition in 0..<repetitions {
                    // Rotate the order, so a drift in machine load does not favour one variant.
                    let order = Variant.allCases.indices.map {
                        Variant.allCases[($0 + repetition) % Variant.allCases.count]
                    }
                    var sessionDrain = 0.0
                    var rawDrain = 0.0
                    for variant in order {
                        let gate = Gate()
                        server.route("GET", "/held") { _ in
                            await gate.wait()
                            return .json("{}", headers: [("Cache-Control", "no-store")])
                        }
                        defer { gate.open() }
                        switch variant {
                        case .manager:
                            let (local, _) = try await signOutWithManager(n: n, url: url, gate: gate)
                            detach[n, default: []].append(local)
                        case .end:
                            let (local, cpu, drain) = try await endSession(n: n, url: url, gate: gate)
                            end[n, default: []].append(local)
                            endCPU[n, default: []].append(cpu)
                            sessionDrain = drain
                        case .raw:
                            rawDrain = try await invalidateRaw(n: n, url: url, gate: gate)
                        }
                    }
                    if n == 1000 {
                        drains.append(sessionDrain)
                        rawDrains.append(rawDrain)
                        drainRatios.append(sessionDrain / rawDrain)
                    }
                }
                BenchLog.note(
                    "logout.n\(n): signOut local phases \(BenchLog.rounded(Statistics.median(detach[n] ?? []), 1)) µs, "
                        + "end() \(BenchLog.rounded(Statistics.median(end[n] ?? []), 1)) µs wall, "
                        + "\(BenchLog.rounded(Statistics.median(endCPU[n] ?? []), 1)) µs CPU (medians of \(repetitions))"
                )
            }
            var results = sizes.map {
                BenchResult(
                    name: "logout.detach.microseconds.n\($0)", value: Statistics.median(detach[$0] ?? []),
                    unit: "µs (signOut detach+clear+cancel)")
            }
            results += sizes.map {
                BenchResult(
                    name: "logout.end.microseconds.n\($0)", value: Statistics.median(end[$0] ?? []),
                    unit: "µs (UserSession.end())")
            }
            results += sizes.map {
                BenchResult(
                    name: "logout.end.cpu_microseconds.n\($0)", value: Statistics.median(endCPU[$0] ?? []),
                    unit: "µs of the calling thread's CPU time in UserSession.end()")
            }
            results += [
                BenchResult(
                    name: "logout.drain.ratio.n1000", value: Statistics.median(drainRatios),
                    unit: "x (session drain / raw invalidateAndCancel drain)"),
                BenchResult(
                    name: "logout.drain.milliseconds.n1000", value: Statistics.median(drains) * 1000,
                    unit: "ms (end() until the last request threw)"),
                BenchResult(
                    name: "logout.drain.raw.milliseconds.n1000", value: Statistics.median(rawDrains) * 1000,
                    unit: "ms (invalidateAndCancel() until the last raw task failed)"),
            ]
            return results
        }
    }

    private static func account() -> Account {
        Account(issuer: "https://bench.invalid", subject: "alice")
    }

    private static func tokens() -> TokenSet {
        TokenSet(accessToken: "bench-access", refreshToken: "bench-refresh", lifetime: .seconds(3600))
    }

    /// Starts `n` requests through `session`, each recording its end in the returned recorder.
    private static func startRequests(_ n: Int, through session: UserSession, to url: URL) -> CompletionRecorder {
        let recorder = CompletionRecorder(expecting: n)
        for _ in 0..<n {
            Task {
                do {
                    _ = try await session.data(for: URLRequest(url: url))
                    recorder.record(failed: false)
                } catch {
                    recorder.record(failed: true)
                }
            }
        }
        return recorder
    }

    /// Waits until `session` has `n` tasks in flight and the server holds as many as the connections allow.
    private static func waitUntilHeld(_ n: Int, session: UserSession, gate: Gate) async throws {
        await gate.waitForArrivals(min(n, connections))
        let deadline = ContinuousClock.now.advanced(by: .seconds(30))
        while session.requestsInFlight < n {
            guard ContinuousClock.now < deadline else {
                throw BenchError("only \(session.requestsInFlight) of \(n) requests started")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Signs out through a manager; returns the local phases' duration (µs) and the drain (s).
    private static func signOutWithManager(n: Int, url: URL, gate: Gate) async throws -> (Double, Double) {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let session = try await manager.signIn(account(), tokens: tokens())
        let recorder = startRequests(n, through: session, to: url)
        try await waitUntilHeld(n, session: session, gate: gate)
        let start = ContinuousClock.now
        guard let report = await manager.signOut() else { throw BenchError("nothing to sign out") }
        let (last, failures) = await recorder.waitForAll()
        guard report.cancelledRequests == n, failures == n else {
            throw BenchError("signOut cancelled \(report.cancelledRequests) and failed \(failures) of \(n)")
        }
        return (Statistics.microseconds(report.localPhasesDuration), last.map { Statistics.seconds($0 - start) } ?? 0)
    }

    /// Ends a session directly; returns `end()`'s wall-clock and thread CPU durations (µs) and the drain (s).
    private static func endSession(n: Int, url: URL, gate: Gate) async throws -> (Double, Double, Double) {
        let session = UserSession(account: account(), tokens: tokens())
        let recorder = startRequests(n, through: session, to: url)
        try await waitUntilHeld(n, session: session, gate: gate)
        let cpuStart = threadCPUTime()
        let start = ContinuousClock.now
        // `end()` itself, with the count of what it cancelled (the public `end()` returns nothing).
        let cancelled = session.finish()?.cancelledRequests ?? 0
        let ended = ContinuousClock.now
        let cpu = threadCPUTime() - cpuStart
        let (last, failures) = await recorder.waitForAll()
        guard cancelled == n, failures == n else {
            throw BenchError("end() cancelled \(cancelled) and failed \(failures) of \(n)")
        }
        return (
            Statistics.microseconds(ended - start), cpu * 1e6, last.map { Statistics.seconds($0 - start) } ?? 0
        )
    }

    /// Invalidates a raw URLSession with `n` tasks in flight; returns the drain (s).
    private static func invalidateRaw(n: Int, url: URL, gate: Gate) async throws -> Double {
        let raw = RequestBenchmarks.rawSession()
        let recorder = CompletionRecorder(expecting: n)
        var request = URLRequest(url: url)
        request.setValue("Bearer bench-access", forHTTPHeaderField: "Authorization")
        for _ in 0..<n {
            raw.dataTask(with: request) { _, _, error in recorder.record(failed: error != nil) }.resume()
        }
        await gate.waitForArrivals(min(n, connections))
        let start = ContinuousClock.now
        raw.invalidateAndCancel()
        let (last, failures) = await recorder.waitForAll()
        guard failures == n else { throw BenchError("invalidateAndCancel failed \(failures) of \(n) raw tasks") }
        return last.map { Statistics.seconds($0 - start) } ?? 0
    }
}

/// The calling thread's CPU time in seconds: unlike the wall clock, it does not count time the thread spent
/// preempted by other processes or by the cancellations `end()` hands to a background queue.
private func threadCPUTime() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) * 1e-9
}
