import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a `UserSession` costs per request: authenticated GETs through `session.data(for:)` against the same GETs
/// on a raw `URLSession` configured like the session's own, with the `Authorization` header set by hand. The
/// response says `no-store`, so every request of both goes to the server.
///
/// Each round alternates the two in blocks of one request per worker (1 sequential, 8 concurrent), in the order
/// ABBA, and times every request. A round's ratio is the raw median latency over the session's, which is the
/// throughput ratio at a fixed concurrency; the figure is the median over the rounds. Medians, because on a shared
/// machine a request that another process stalled says nothing about either client.
enum RequestBenchmarks {
    static let body = #"{"ok":true,"user":"alice","items":[1,2,3,4,5],"token":null}"#
    private static let token = "bench-access-token-0123456789abcdef"

    static let all = [
        Benchmark(
            resultNames: [
                "request.ratio.sequential", "request.sequential.session.microseconds",
                "request.sequential.raw.microseconds",
            ],
            run: { try await compare(label: "sequential", concurrency: 1, blocksPerRound: 300, rounds: 9) }),
        Benchmark(
            resultNames: [
                "request.ratio.concurrent8", "request.concurrent8.session.microseconds",
                "request.concurrent8.raw.microseconds",
            ],
            run: { try await compare(label: "concurrent8", concurrency: 8, blocksPerRound: 40, rounds: 15) }),
    ]

    /// A URLSession configured as `UserSession` configures its own, so the comparison isolates SessionKit's work.
    static func rawSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = true
        configuration.timeoutIntervalForRequest = 30
        configuration.httpMaximumConnectionsPerHost = 64
        return URLSession(configuration: configuration)
    }

    private static func compare(label: String, concurrency: Int, blocksPerRound: Int, rounds: Int) async throws
        -> [BenchResult]
    {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            let expected = "Bearer \(token)"
            server.route("GET", "/me") { request in
                guard request.header("Authorization") == expected else { return .status(401) }
                return .json(body, headers: [("Cache-Control", "no-store")])
            }
            let url = server.url("/me")
            // A session as an app has one: refreshes through an OAuth client, a token valid for an hour.
            let client = OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "bench"))
            let session = UserSession(
                account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
                tokens: TokenSet(accessToken: token, refreshToken: "bench-refresh", lifetime: .seconds(3600)),
                tokenEndpoint: client)
            let raw = rawSession()
            defer {
                session.end()
                raw.invalidateAndCancel()
            }
            let viaSession: @Sendable () async throws -> Void = {
                let (data, response) = try await session.data(for: URLRequest(url: url))
                guard response.statusCode == 200, data.count == body.utf8.count else {
                    throw BenchError("UserSession got \(response.statusCode)")
                }
            }
            let viaRaw: @Sendable () async throws -> Void = {
                var request = URLRequest(url: url)
                request.setValue(expected, forHTTPHeaderField: "Authorization")
                let (data, response) = try await raw.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200, data.count == body.utf8.count else {
                    throw BenchError("raw URLSession got an unexpected answer")
                }
            }
            // Opens every connection each client will use.
            try await run(viaSession, times: concurrency * 50, concurrency: concurrency)
            try await run(viaRaw, times: concurrency * 50, concurrency: concurrency)

            var ours: [Double] = []
            var theirs: [Double] = []
            var ratios: [Double] = []
            for round in 0..<rounds {
                // Short blocks in the order ABBA, every request timed on its own: load that comes and goes falls
                // on both alike, and the median of each side ignores the requests another process stalled.
                var sessionLatencies: [Double] = []
                var rawLatencies: [Double] = []
                for block in 0..<blocksPerRound {
                    let sessionFirst = (block + round).isMultiple(of: 2)
                    for usesSession in sessionFirst ? [true, false] : [false, true] {
                        let latencies = try await timed(
                            usesSession ? viaSession : viaRaw, times: concurrency, concurrency: concurrency)
                        if usesSession { sessionLatencies += latencies } else { rawLatencies += latencies }
                    }
                }
                let withSession = Statistics.median(sessionLatencies)
                let withRaw = Statistics.median(rawLatencies)
                ours.append(withSession)
                theirs.append(withRaw)
                ratios.append(withRaw / withSession)
                BenchLog.note(
                    "request.\(label) round \(round + 1)/\(rounds): median latency UserSession "
                        + "\(BenchLog.rounded(withSession, 1)) µs, raw URLSession \(BenchLog.rounded(withRaw, 1)) µs, "
                        + "throughput ratio \(BenchLog.rounded(withRaw / withSession, 3))")
            }
            return [
                BenchResult(
                    name: "request.ratio.\(label)", value: Statistics.median(ratios),
                    unit: "x (UserSession / raw URLSession throughput)"),
                BenchResult(
                    name: "request.\(label).session.microseconds", value: Statistics.median(ours),
                    unit: "µs median latency, UserSession"),
                BenchResult(
                    name: "request.\(label).raw.microseconds", value: Statistics.median(theirs),
                    unit: "µs median latency, raw URLSession"),
            ]
        }
    }

    /// Runs `request` `times` times from `concurrency` workers and returns each one's latency in microseconds.
    private static func timed(
        _ request: @escaping @Sendable () async throws -> Void,
        times: Int,
        concurrency: Int
    ) async throws -> [Double] {
        try await withThrowingTaskGroup(of: [Double].self) { group in
            for worker in 0..<concurrency {
                let count = times / concurrency + (worker < times % concurrency ? 1 : 0)
                group.addTask {
                    var latencies: [Double] = []
                    for _ in 0..<count {
                        let start = ContinuousClock.now
                        try await request()
                        latencies.append(Statistics.microseconds(ContinuousClock.now - start))
                    }
                    return latencies
                }
            }
            var all: [Double] = []
            for try await latencies in group { all += latencies }
            return all
        }
    }

    /// Runs `request` `times` times from `concurrency` workers, each sending its share one after another.
    static func run(
        _ request: @escaping @Sendable () async throws -> Void,
        times: Int,
        concurrency: Int
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                let count = times / concurrency + (worker < times % concurrency ? 1 : 0)
                group.addTask {
                    for _ in 0..<count { try await request() }
                }
            }
            try await group.waitForAll()
        }
    }
}
