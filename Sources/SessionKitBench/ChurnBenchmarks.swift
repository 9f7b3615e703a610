import Foundation
import SessionKit
import SessionKitTesting

/// What a long-running app keeps after many sign-ins: 10,000 cycles, in one process, of signing a new account in,
/// switching to a resident account and back, and signing the new account out, through one `SessionManager` with
/// a registered `SessionScoped` container and an `InMemoryCredentialStore`.
///
/// - `churn.descriptors.delta`: open file descriptors after the cycles minus before (goal ≤ 2).
/// - `churn.memory.kilobytes.delta`: resident memory after the cycles minus before, in KiB (goal ≤ 1,024).
/// - `churn.memory.bytes_per_cycle`: how fast resident memory grows once warm, over the second half of the cycles
///   (bytes per cycle): a leak grows it steadily, one-time costs (allocator arenas, caches) do not.
/// - `churn.cycle.microseconds`: the median time of one cycle.
/// - `churn.revoking.*`: the same with an `OAuthClient` that revokes the refresh token at every sign-out, on a
///   loopback server: one HTTP exchange per cycle, which FoundationNetworking itself does not entirely free
///   (see BENCHMARKS.md).
///
/// Every cycle signs in an account never seen before, so whatever SessionKit keeps per account or per session
/// (a queue, an end handler, a `URLSession` and its descriptors) adds up over the run. The revocation server
/// keeps no request log, so its memory does not grow with the run. "After" is read once the descriptors have
/// settled (a `URLSession` closes its descriptors on a queue of its own once released), for at most 5 seconds,
/// and 6 seconds after the last sign-out: a sign-out bounds its server steps with a 5-second timer
/// (`SignOutOptions.serverTimeout`), and a cancelled `Task.sleep` keeps its timer until its deadline, so that
/// memory is held for 5 seconds, not kept.
enum ChurnBenchmarks {
    static let cycles = 10_000
    private static let warmUpCycles = 200

    /// How long a sign-out's timer outlives it: the default `SignOutOptions.serverTimeout`, and a second more.
    private static let pendingTimers = Duration.seconds(6)

    static let all = [
        Benchmark(
            resultNames: [
                "churn.descriptors.delta", "churn.memory.kilobytes.delta", "churn.memory.bytes_per_cycle",
                "churn.cycle.microseconds",
            ],
            run: { try await measure(cycles: cycles, revoking: false) }),
        Benchmark(
            resultNames: [
                "churn.revoking.descriptors.delta", "churn.revoking.memory.kilobytes.delta",
                "churn.revoking.memory.bytes_per_cycle", "churn.revoking.cycle.microseconds",
            ],
            run: { try await measure(cycles: cycles, revoking: true) }),
    ]

    static func measure(cycles: Int, revoking: Bool) async throws -> [BenchResult] {
        let prefix = revoking ? "churn.revoking" : "churn"
        return try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            server.route("POST", "/revoke") { _ in .status(200) }
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
                let report = await manager.signOut(session)
                guard report.purgeFailures.isEmpty else { throw BenchError("a purge failed in cycle \(index)") }
            }

            // One-time costs (Foundation, libcurl's global state, the first connections) are not the churn's.
            for index in 0..<warmUpCycles { try await cycle(-1 - index) }
            try await settle(toAtMost: nil)
            try await Task.sleep(for: pendingTimers)
            guard let descriptorsBefore = ResidentMemory.openDescriptors(), let memoryBefore = ResidentMemory.bytes()
            else { throw BenchError("/proc/self cannot be read: the churn figures need Linux") }

            var halfway = memoryBefore
            var durations: [Double] = []
            durations.reserveCapacity(cycles)
            for index in 0..<cycles {
                let start = ContinuousClock.now
                try await cycle(index)
                durations.append(Statistics.microseconds(ContinuousClock.now - start))
                if index + 1 == cycles / 2 { halfway = ResidentMemory.bytes() ?? memoryBefore }
                if (index + 1).isMultiple(of: 2500) {
                    BenchLog.note(
                        "\(prefix): \(index + 1)/\(cycles) cycles, descriptors \(ResidentMemory.openDescriptors() ?? -1), "
                            + "resident \((ResidentMemory.bytes() ?? 0) / 1024) KiB")
                }
            }
            let atEnd = ResidentMemory.bytes() ?? halfway
            try await settle(toAtMost: descriptorsBefore + 2)
            try await Task.sleep(for: pendingTimers)
            guard let descriptorsAfter = ResidentMemory.openDescriptors(), let memoryAfter = ResidentMemory.bytes()
            else { throw BenchError("/proc/self cannot be read") }
            await manager.signOut(resident)

            let descriptorDelta = descriptorsAfter - descriptorsBefore
            let kilobyteDelta = Double(memoryAfter - memoryBefore) / 1024
            BenchLog.note(
                "\(prefix): \(cycles) cycles, descriptors \(descriptorsBefore) → \(descriptorsAfter), resident "
                    + "\(memoryBefore / 1024) → \(memoryAfter / 1024) KiB, median cycle "
                    + "\(BenchLog.rounded(Statistics.median(durations), 1)) µs")
            return [
                BenchResult(
                    name: "\(prefix).descriptors.delta", value: Double(descriptorDelta),
                    unit: "open descriptors after \(cycles) sign-in/switch/sign-out cycles minus before (goal ≤ 2)"),
                BenchResult(
                    name: "\(prefix).memory.kilobytes.delta", value: kilobyteDelta,
                    unit: "KiB resident after \(cycles) cycles minus before (goal ≤ 1,024)"),
                BenchResult(
                    name: "\(prefix).memory.bytes_per_cycle",
                    value: Double(atEnd - halfway) / Double(cycles - cycles / 2),
                    unit: "B resident per cycle, from cycle \(cycles / 2) to \(cycles)"),
                BenchResult(
                    name: "\(prefix).cycle.microseconds", value: Statistics.median(durations),
                    unit: "µs median per cycle (sign-in, 2 switches, sign-out\(revoking ? " with revocation" : ""))"),
            ]
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

    private static func account(_ subject: String) -> Account {
        Account(issuer: "https://churn.invalid", subject: subject)
    }

    private static func tokens(_ subject: String) -> TokenSet {
        TokenSet(
            accessToken: "access-\(subject)-0123456789abcdef", refreshToken: "refresh-\(subject)-0123456789abcdef",
            lifetime: .seconds(3600))
    }
}
