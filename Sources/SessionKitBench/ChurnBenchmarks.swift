import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a long-running app keeps after many sign-ins: 10,000 cycles, in one process, of signing a new account in,
/// switching to a resident account and back, and signing the new account out, through one `SessionManager` with
/// a registered `SessionScoped` container and an `InMemoryCredentialStore`.
///
/// - `churn.descriptors.delta`: open file descriptors after the cycles minus before (goal ≤ 2).
/// - `churn.memory.kilobytes.delta`: memory allocated and not freed after the cycles minus before, in KiB, as
///   glibc's allocator counts it (`malloc_info`): what a leak of SessionKit's, Foundation's or libcurl's grows
///   (goal ≤ 1,024).
/// - `churn.resident.kilobytes.delta`: resident memory after minus before, each read once the allocator has
///   returned its free pages to the kernel (`malloc_trim`). It is larger than the heap's growth: pages that still
///   hold one live allocation among freed ones stay resident in glibc's per-thread arenas (fragmentation), and
///   that stops growing after some 20,000 cycles (BENCHMARKS.md).
/// - `churn.memory.bytes_per_cycle`: how fast the heap grows once warm, over the second half of the cycles (bytes
///   per cycle, read at the middle and at the end once the sign-out timers have run out): a leak keeps it
///   positive, one-time costs do not.
/// - `churn.cycle.microseconds`: the median time of one cycle.
/// - `churn.revoking.*`: the same with an `OAuthClient` that revokes at every sign-out, on a loopback server: HTTP
///   exchanges every cycle (`churn.revoking.requests_per_cycle`), which FoundationNetworking itself does not
///   entirely free. `churn.control.heap.bytes_per_request` measures that on its own: the same loopback POSTs sent
///   by a bare `URLSession`, no SessionKit, and the heap's growth per request.
///
/// Every cycle signs in an account never seen before, so whatever SessionKit keeps per account or per session
/// (a queue, an end handler, a `URLSession` and its descriptors) adds up over the run. The revocation server
/// keeps no request log, so its memory does not grow with the run. "After" is read once the descriptors have
/// settled (a `URLSession` closes its descriptors on a queue of its own once released), for at most 5 seconds,
/// and 6 seconds after the last sign-out: a sign-out bounds its server steps with a 5-second timer
/// (`SignOutOptions.serverTimeout`), and a cancelled `Task.sleep` keeps its timer until its deadline, so that
/// memory is held for 5 seconds, not kept. `SESSIONKIT_CHURN_CYCLES` sets another number of cycles (to see where
/// the resident figure levels off).
enum ChurnBenchmarks {
    static let cycles = Int(ProcessInfo.processInfo.environment["SESSIONKIT_CHURN_CYCLES"] ?? "") ?? 10_000
    private static let warmUpCycles = 200

    /// How long a sign-out's timer outlives it: the default `SignOutOptions.serverTimeout`, and a second more.
    private static let pendingTimers = Duration.seconds(6)

    static let all = [
        Benchmark(
            resultNames: [
                "churn.descriptors.delta", "churn.memory.kilobytes.delta", "churn.resident.kilobytes.delta",
                "churn.memory.bytes_per_cycle", "churn.cycle.microseconds",
            ],
            run: { try await measure(cycles: cycles, revoking: false) }),
        Benchmark(
            resultNames: [
                "churn.revoking.descriptors.delta", "churn.revoking.memory.kilobytes.delta",
                "churn.revoking.resident.kilobytes.delta", "churn.revoking.memory.bytes_per_cycle",
                "churn.revoking.cycle.microseconds", "churn.revoking.requests_per_cycle",
            ],
            run: { try await measure(cycles: cycles, revoking: true) }),
        Benchmark(
            resultNames: ["churn.control.heap.bytes_per_request"],
            run: { try await control(requests: cycles) }),
    ]

    static func measure(cycles: Int, revoking: Bool) async throws -> [BenchResult] {
        let prefix = revoking ? "churn.revoking" : "churn"
        return try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            let revocations = Counter()
            server.route("POST", "/revoke") { _ in
                revocations.increment()
                return .status(200)
            }
            server.route("POST", "/token") { _ in .json(#"{"error":"invalid_grant"}"#, status: 400) }
            let client = OAuthClient(
                configuration: .init(
                    tokenEndpoint: server.url("/token"), revocationEndpoint: server.url("/revoke"),
                    clientID: "bench"))
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), tokenEndpoint: client, revoker: revoking ? client : nil))
            let profile = SessionScoped<String>(empty: "")
            manager.register(profile)
            let resident = try await manager.signIn(account("resident"), tokens: tokens("resident"))

            func cycle(_ index: Int) async throws {
                let session = try await manager.signIn(account("user-\(index)"), tokens: tokens("user-\(index)"))
                profile.commit("user-\(index)", from: session)
                try await manager.switchTo(resident)
                try await manager.switchTo(session)
                guard let report = await manager.signOut(session), report.isPurgeComplete else {
                    throw BenchError("a purge failed in cycle \(index)")
                }
            }

            // One-time costs (Foundation, libcurl's global state, the first connections) are not the churn's.
            for index in 0..<warmUpCycles { try await cycle(-1 - index) }
            try await settle(toAtMost: nil)
            try await Task.sleep(for: pendingTimers)
            guard let descriptorsBefore = ResidentMemory.openDescriptors(), let before = Footprint.read() else {
                throw BenchError("/proc/self or malloc_info cannot be read: the churn figures need Linux and glibc")
            }
            let revocationsBefore = revocations.value

            var halfway = before.heap
            var durations: [Double] = []
            durations.reserveCapacity(cycles)
            for index in 0..<cycles {
                let start = ContinuousClock.now
                try await cycle(index)
                durations.append(Statistics.microseconds(ContinuousClock.now - start))
                if index + 1 == cycles / 2 {
                    // Read once the first half's sign-out timers have run out, as at the end.
                    try await settle(toAtMost: descriptorsBefore + 2)
                    try await Task.sleep(for: pendingTimers)
                    halfway = AllocatorStatistics.bytesInUse() ?? before.heap
                }
                if (index + 1).isMultiple(of: 2500) {
                    BenchLog.note(
                        "\(prefix): \(index + 1)/\(cycles) cycles, descriptors \(ResidentMemory.openDescriptors() ?? -1), "
                            + "resident \((ResidentMemory.bytes() ?? 0) / 1024) KiB")
                }
            }
            let requestsPerCycle = Double(revocations.value - revocationsBefore) / Double(cycles)
            try await settle(toAtMost: descriptorsBefore + 2)
            try await Task.sleep(for: pendingTimers)
            guard let descriptorsAfter = ResidentMemory.openDescriptors(), let after = Footprint.read()
            else { throw BenchError("/proc/self or malloc_info cannot be read") }
            await manager.signOut(resident)

            let descriptorDelta = descriptorsAfter - descriptorsBefore
            BenchLog.note(
                "\(prefix): \(cycles) cycles, descriptors \(descriptorsBefore) → \(descriptorsAfter), heap in use "
                    + "\(before.heap / 1024) → \(after.heap / 1024) KiB, resident \(before.resident / 1024) → "
                    + "\(after.resident / 1024) KiB (\(after.untrimmed / 1024) KiB before trimming), median cycle "
                    + "\(BenchLog.rounded(Statistics.median(durations), 1)) µs")
            let exchanges =
                revoking
                ? [
                    BenchResult(
                        name: "\(prefix).requests_per_cycle", value: requestsPerCycle,
                        unit: "revocation requests the server received per cycle")
                ] : []
            return exchanges + [
                BenchResult(
                    name: "\(prefix).descriptors.delta", value: Double(descriptorDelta),
                    unit: "open descriptors after \(cycles) sign-in/switch/sign-out cycles minus before (goal ≤ 2)"),
                BenchResult(
                    name: "\(prefix).memory.kilobytes.delta", value: Double(after.heap - before.heap) / 1024,
                    unit: "KiB allocated and not freed after \(cycles) cycles minus before (goal ≤ 1,024)"),
                BenchResult(
                    name: "\(prefix).resident.kilobytes.delta", value: Double(after.resident - before.resident) / 1024,
                    unit: "KiB resident after \(cycles) cycles minus before, free pages returned to the kernel first"),
                BenchResult(
                    name: "\(prefix).memory.bytes_per_cycle",
                    value: Double(after.heap - halfway) / Double(cycles - cycles / 2),
                    unit: "B of heap per cycle, from cycle \(cycles / 2) to \(cycles)"),
                BenchResult(
                    name: "\(prefix).cycle.microseconds", value: Statistics.median(durations),
                    unit: "µs median per cycle (sign-in, 2 switches, sign-out\(revoking ? " with revocation" : ""))"),
            ]
        }
    }

    /// The same revocation exchange as `churn.revoking`, sent `requests` times by a bare `URLSession` through
    /// `data(for:)`: how much of the heap FoundationNetworking keeps per request when no SessionKit code runs.
    static func control(requests: Int) async throws -> [BenchResult] {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            server.route("POST", "/revoke") { _ in .status(200) }
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            let session = URLSession(configuration: configuration)
            defer { session.invalidateAndCancel() }
            var request = URLRequest(url: server.url("/revoke"))
            request.httpMethod = "POST"
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data("token=refresh-0123456789abcdef&token_type_hint=refresh_token".utf8)
            func send() async throws {
                let (_, response) = try await session.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw BenchError("revocation failed") }
            }
            for _ in 0..<warmUpCycles { try await send() }
            for _ in 0..<requests / 2 { try await send() }
            guard let halfway = AllocatorStatistics.bytesInUse() else { throw BenchError("malloc_info cannot be read") }
            for _ in requests / 2..<requests { try await send() }
            guard let atEnd = AllocatorStatistics.bytesInUse() else { throw BenchError("malloc_info cannot be read") }
            let perRequest = Double(atEnd - halfway) / Double(requests - requests / 2)
            BenchLog.note(
                "churn.control: a bare URLSession keeps \(BenchLog.rounded(perRequest, 1)) B of heap per request")
            return [
                BenchResult(
                    name: "churn.control.heap.bytes_per_request", value: perRequest,
                    unit: "B of heap a bare URLSession keeps per loopback POST, no SessionKit (second half of the run)")
            ]
        }
    }

    /// Resident memory before and after the allocator returns its free pages, and the heap in use.
    private struct Footprint {
        var untrimmed: Int
        var resident: Int
        var heap: Int

        static func read() -> Footprint? {
            guard let untrimmed = ResidentMemory.bytes(), AllocatorStatistics.returnFreeMemory(),
                let resident = ResidentMemory.bytes(), let heap = AllocatorStatistics.bytesInUse()
            else { return nil }
            return Footprint(untrimmed: untrimmed, resident: resident, heap: heap)
        }
    }

    /// Waits until at most `limit` descriptors are open (for at most 5 seconds), or, for `nil`, 200 ms: time for
    /// invalidated `URLSession`s to close theirs.
    private static func settle(toAtMost limit: Int?) async throws {
        let deadline = ContinuousClock.now.advanced(by: limit == nil ? .milliseconds(200) : .seconds(5))
        while ContinuousClock.now < deadline {
            if let limit, let open = ResidentMemory.openDescriptors(), open <= limit { return }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A count the server's handler bumps from its own thread.
    private final class Counter: Sendable {
        private let count = Lock(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }

    private static func account(_ subject: String) -> Account {
        Account(issuer: "https://churn.invalid", subject: subject)
    }

    private static func tokens(_ subject: String) -> TokenSet {
        TokenSet(
            accessToken: "access-\(subject)-0123456789abcdef", refreshToken: "refresh-\(subject)-0123456789abcdef",
            lifetime: .seconds(3600))
    }
}
