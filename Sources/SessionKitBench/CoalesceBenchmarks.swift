import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Single flight under load: K requests start together through one `UserSession` right after the authorization
/// server invalidated its access token. Every one of them gets a 401; the session must send one token request,
/// not K, and replay them all with the new token. The token requests are counted at the server
/// (`MockAuthorizationServer`, refreshed through `OAuthClient`).
enum CoalesceBenchmarks {
    private static let sizes = [2, 8, 64, 1000]
    private static let repetitions = 5
    /// A burst of 1,000 takes seconds on a loaded machine: fewer of those.
    private static let repetitionsAt1000 = 3

    static let all = [
        Benchmark(
            resultNames: sizes.map { "coalesce.refreshes.k\($0)" } + ["coalesce.seconds.k1000"],
            run: { try await measure() })
    ]

    private static func measure() async throws -> [BenchResult] {
        try await MockAuthorizationServer.withRunning(configuration: .init(server: .init(recordsRequests: false))) {
            mock in
            try mock.addUser("alice")
            let client = mock.makeClient()
            var results: [BenchResult] = []
            var secondsAt1000: [Double] = []
            for k in sizes {
                var worst = 0
                let bursts = k == 1000 ? repetitionsAt1000 : repetitions
                for _ in 0..<bursts {
                    let session = UserSession(
                        account: Account(issuer: mock.issuer, subject: "alice"),
                        tokens: try mock.issueTokens(for: "alice"),
                        tokenEndpoint: client)
                    defer { session.end() }
                    let request = URLRequest(url: mock.userInfoEndpoint)
                    // Open a connection first, so the burst measures coalescing, not the first handshake.
                    _ = try await session.data(for: request)
                    mock.invalidateAccessTokens(for: "alice")
                    let before = mock.tokenRequestCount
                    let start = ContinuousClock.now
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<k {
                            group.addTask {
                                let (_, response) = try await session.data(for: request)
                                guard response.statusCode == 200 else {
                                    throw BenchError("a coalesced request ended with \(response.statusCode)")
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                    let elapsed = Statistics.seconds(ContinuousClock.now - start)
                    let refreshes = mock.tokenRequestCount - before
                    worst = max(worst, refreshes)
                    if k == 1000 { secondsAt1000.append(elapsed) }
                }
                BenchLog.note("coalesce.k\(k): at most \(worst) token request(s) in \(bursts) bursts")
                results.append(
                    BenchResult(
                        name: "coalesce.refreshes.k\(k)", value: Double(worst),
                        unit: "token requests per burst (most over \(bursts) bursts; must be 1)"))
            }
            results.append(
                BenchResult(
                    name: "coalesce.seconds.k1000", value: Statistics.median(secondsAt1000),
                    unit: "s (1000 requests, 401, 1 refresh, replay)"))
            return results
        }
    }
}
