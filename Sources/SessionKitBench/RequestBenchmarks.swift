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
/// Two servers, each in a process of its own so that neither competes with the clients for this process's
/// cooperative pool: `LocalServer` (this executable's `--serve`) and, when it is installed, nginx, a server nobody
/// here wrote. Each round measures both, one after the other (the order alternating by round); within a server the
/// clients (and raw URLSessions used through a completion handler, as UserSession uses it) take turns, the first of
/// them rotating from turn to turn, and every request is timed. A turn is a few requests per worker one after
/// another (8 sequential; 4 from each of 8 concurrent workers), as an app sends them: with a turn of one request,
/// the session's code ran only every fourth request, after three requests of clients that share all their code
/// with the raw client's, so the session paid for evicted code and data that the raw client's own request had
/// just warmed (`.first`, the first request of each turn alone, shows that cost). A round's ratio is the raw
/// median latency over the session's, which is the throughput ratio at a fixed concurrency; the figure is the
/// median over the rounds, with the lowest and highest round beside it. Medians, because on a shared machine a
/// request that another process stalled says nothing about either client.
enum RequestBenchmarks {
    static let body = #"{"ok":true,"user":"alice","items":[1,2,3,4,5],"token":null}"#
    private static let rounds = 7

    static let all = [
        Benchmark(
            resultNames: names(label: "sequential"),
            run: { try await compare(label: "sequential", concurrency: 1, turn: 8, turnsPerRound: 50) }),
        // The same with a diagnostics sink that keeps every level: what an app that turned the stream on pays per
        // request (nothing is emitted on a request's path unless something notable happens: a refresh, a refusal).
        Benchmark(
            resultNames: names(label: "sequential.diagnostics"),
            run: {
                try await compare(
                    label: "sequential.diagnostics", concurrency: 1, turn: 8, turnsPerRound: 50, diagnostics: true)
            }),
        Benchmark(
            resultNames: names(label: "concurrent8"),
            run: { try await compare(label: "concurrent8", concurrency: 8, turn: 4, turnsPerRound: 15) }),
    ]

    private static func names(label: String) -> [String] {
        ["request", "request.nginx"].flatMap { prefix in
            [
                "\(prefix).ratio.\(label)", "\(prefix).ratio.\(label).min", "\(prefix).ratio.\(label).max",
                "\(prefix).ratio.\(label).vs_handler", "\(prefix).ratio.\(label).vs_immediate",
                "\(prefix).ratio.\(label).first",
                "\(prefix).\(label).session.microseconds", "\(prefix).\(label).raw.microseconds",
            ]
        }
    }

    /// A URLSession configured as `UserSession` configures its own, so the comparison isolates SessionKit's work.
    static func rawSession(immediate: Bool = false) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = true
        configuration.timeoutIntervalForRequest = 30
        configuration.httpMaximumConnectionsPerHost = 64
        #if canImport(FoundationNetworking)
            if immediate {
                return URLSession(
                    configuration: configuration, delegate: nil, delegateQueue: ImmediateDelegateQueue())
            }
        #endif
        return URLSession(configuration: configuration)
    }

    /// One server's two clients.
    private struct Contest {
        let prefix: String
        let server: BenchServer
        let viaSession: @Sendable () async throws -> Void
        let viaRaw: @Sendable () async throws -> Void
        /// The raw URLSession through `dataTask(with:completionHandler:)`, as `UserSession` must use it: the
        /// ceiling for a client that creates its tasks where it can see them.
        let viaRawHandler: @Sendable () async throws -> Void
        /// The raw URLSession with the delegate queue `UserSession` gives its own (Linux: completions on
        /// FoundationNetworking's work queue), through a completion handler: the same client with nothing of
        /// SessionKit's in it, so that what SessionKit's own code costs is told apart from what that way of using
        /// URLSession costs.
        let viaRawImmediate: @Sendable () async throws -> Void
        var ours: [Double] = []
        var theirs: [Double] = []
        var handlerRatios: [Double] = []
        var immediateRatios: [Double] = []
        var firstRatios: [Double] = []
        var ratios: [Double] = []
    }

    /// Measures the session against the raw clients on every server, in rounds.
    ///
    /// - Parameters:
    ///   - label: The figures' label (`sequential`, `concurrent8`).
    ///   - concurrency: How many workers each client has.
    ///   - turn: How many requests each worker of a client sends before the next client's turn.
    ///   - turnsPerRound: How many turns each client has per round and server.
    ///   - diagnostics: Whether the session sends its diagnostic events to a sink (that keeps every level).
    /// - Returns: The figures.
    /// - Throws: When a server cannot start or a request fails.
    private static func compare(
        label: String, concurrency: Int, turn: Int, turnsPerRound: Int, diagnostics: Bool = false
    ) async throws -> [BenchResult] {
        var servers = [try await BenchServer.localServer()]
        if let nginx = try await BenchServer.nginx() {
            servers.append(nginx)
        } else {
            BenchLog.note("request.nginx.*: skipped, nginx is not installed (Debian: apt-get install nginx-light)")
        }
        defer { for server in servers { server.stop() } }
        var sessions: [UserSession] = []
        var raws: [URLSession] = []
        defer {
            for session in sessions { session.end() }
            for raw in raws { raw.invalidateAndCancel() }
        }
        var contests: [Contest] = []
        for server in servers {
            let url = server.url("/me")
            let expected = "Bearer \(BenchServer.token)"
            // A session as an app has one: refreshes through an OAuth client, a token valid for an hour.
            let client = OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "bench"))
            let session = UserSession(
                account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
                tokens: TokenSet(
                    accessToken: BenchServer.token, refreshToken: "bench-refresh", lifetime: .seconds(3600)),
                configuration: .init(diagnostics: diagnostics ? Diagnostics(level: .debug) { _ in } : nil),
                tokenEndpoint: client)
            let raw = rawSession()
            let immediate = rawSession(immediate: true)
            sessions.append(session)
            raws.append(raw)
            raws.append(immediate)
            contests.append(
                Contest(
                    prefix: server.name == "nginx" ? "request.nginx" : "request",
                    server: server,
                    viaSession: {
                        let (data, response) = try await session.data(for: URLRequest(url: url))
                        guard response.statusCode == 200, data.count == body.utf8.count else {
                            throw BenchError("UserSession got \(response.statusCode)")
                        }
                    },
                    viaRaw: {
                        var request = URLRequest(url: url)
                        request.setValue(expected, forHTTPHeaderField: "Authorization")
                        let (data, response) = try await raw.data(for: request)
                        guard (response as? HTTPURLResponse)?.statusCode == 200, data.count == body.utf8.count else {
                            throw BenchError("raw URLSession got an unexpected answer")
                        }
                    },
                    viaRawHandler: throughCompletionHandler(raw, url, expected, "completion handler"),
                    viaRawImmediate: throughCompletionHandler(immediate, url, expected, "immediate delegate queue")))
        }
        // Opens every connection each client will use.
        for contest in contests {
            try await run(contest.viaSession, times: concurrency * 50, concurrency: concurrency)
            try await run(contest.viaRaw, times: concurrency * 50, concurrency: concurrency)
            try await run(contest.viaRawHandler, times: concurrency * 50, concurrency: concurrency)
            try await run(contest.viaRawImmediate, times: concurrency * 50, concurrency: concurrency)
        }

        for round in 0..<rounds {
            let order = round.isMultiple(of: 2) ? Array(contests.indices) : contests.indices.reversed()
            for index in order {
                // Short turns, their order rotating, every request timed on its own: load that comes and goes falls
                // on all alike, and the median of each side ignores the requests another process stalled.
                var sessionLatencies: [Double] = []
                var rawLatencies: [Double] = []
                var handlerLatencies: [Double] = []
                var immediateLatencies: [Double] = []
                // The first request of each worker's turn, which follows the other clients' requests.
                var sessionFirsts: [Double] = []
                var rawFirsts: [Double] = []
                for turnNumber in 0..<turnsPerRound {
                    // The four clients in turn, the first of them rotating from turn to turn.
                    let first = (turnNumber + round) % 4
                    for variant in (0..<4).map({ (first + $0) % 4 }) {
                        let request = [
                            contests[index].viaSession, contests[index].viaRaw, contests[index].viaRawHandler,
                            contests[index].viaRawImmediate,
                        ]
                        let workers = try await timed(request[variant], turn: turn, concurrency: concurrency)
                        let latencies = workers.flatMap { $0 }
                        switch variant {
                        case 0:
                            sessionLatencies += latencies
                            sessionFirsts += workers.compactMap(\.first)
                        case 1:
                            rawLatencies += latencies
                            rawFirsts += workers.compactMap(\.first)
                        case 2: handlerLatencies += latencies
                        default: immediateLatencies += latencies
                        }
                    }
                }
                let withSession = Statistics.median(sessionLatencies)
                let withRaw = Statistics.median(rawLatencies)
                contests[index].ours.append(withSession)
                contests[index].theirs.append(withRaw)
                contests[index].ratios.append(withRaw / withSession)
                contests[index].handlerRatios.append(Statistics.median(handlerLatencies) / withSession)
                contests[index].immediateRatios.append(Statistics.median(immediateLatencies) / withSession)
                contests[index].firstRatios.append(Statistics.median(rawFirsts) / Statistics.median(sessionFirsts))
                BenchLog.note(
                    "\(contests[index].prefix).\(label) round \(round + 1)/\(rounds) (\(contests[index].server.name)): "
                        + "median latency UserSession \(BenchLog.rounded(withSession, 1)) µs, raw URLSession "
                        + "\(BenchLog.rounded(withRaw, 1)) µs, throughput ratio \(BenchLog.rounded(withRaw / withSession, 3))"
                )
            }
        }
        return contests.flatMap { contest -> [BenchResult] in
            let unit = "x (UserSession / raw URLSession throughput, \(contest.server.name))"
            return [
                BenchResult(
                    name: "\(contest.prefix).ratio.\(label)", value: Statistics.median(contest.ratios), unit: unit),
                BenchResult(
                    name: "\(contest.prefix).ratio.\(label).min", value: contest.ratios.min() ?? .nan,
                    unit: "x (lowest of \(rounds) rounds)"),
                BenchResult(
                    name: "\(contest.prefix).ratio.\(label).max", value: contest.ratios.max() ?? .nan,
                    unit: "x (highest of \(rounds) rounds)"),
                BenchResult(
                    name: "\(contest.prefix).ratio.\(label).vs_handler",
                    value: Statistics.median(contest.handlerRatios),
                    unit: "x (UserSession / raw URLSession with a completion handler, as UserSession uses it)"),
                BenchResult(
                    name: "\(contest.prefix).ratio.\(label).vs_immediate",
                    value: Statistics.median(contest.immediateRatios),
                    unit: "x (UserSession / raw URLSession with UserSession's delegate queue and a completion handler)"),
                BenchResult(
                    name: "\(contest.prefix).ratio.\(label).first",
                    value: Statistics.median(contest.firstRatios),
                    unit: "x (the first request of each turn alone: it follows the other clients' requests)"),
                BenchResult(
                    name: "\(contest.prefix).\(label).session.microseconds", value: Statistics.median(contest.ours),
                    unit: "µs median latency, UserSession (\(contest.server.name))"),
                BenchResult(
                    name: "\(contest.prefix).\(label).raw.microseconds", value: Statistics.median(contest.theirs),
                    unit: "µs median latency, raw URLSession (\(contest.server.name))"),
            ]
        }
    }

    /// One GET of `url` with `authorization` through `raw.dataTask(with:completionHandler:)`, checked.
    private static func throughCompletionHandler(
        _ raw: URLSession, _ url: URL, _ authorization: String, _ label: String
    ) -> @Sendable () async throws -> Void {
        {
            var request = URLRequest(url: url)
            request.setValue(authorization, forHTTPHeaderField: "Authorization")
            let (data, response) = try await dataThroughCompletionHandler(raw, request)
            guard (response as? HTTPURLResponse)?.statusCode == 200, data.count == body.utf8.count else {
                throw BenchError("raw URLSession (\(label)) got an unexpected answer")
            }
        }
    }

    /// `raw.dataTask(with:completionHandler:)`, awaited: its completion comes through the session's delegate queue.
    static func dataThroughCompletionHandler(_ raw: URLSession, _ request: URLRequest) async throws -> (
        Data, URLResponse?
    ) {
        try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<(Data, URLResponse?), any Error>) in
            raw.dataTask(with: request) { data, response, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: (data ?? Data(), response))
                }
            }.resume()
        }
    }

    /// Runs `request` `turn` times from each of `concurrency` workers, one after another within a worker, and
    /// returns each worker's latencies in microseconds, in the order sent.
    private static func timed(
        _ request: @escaping @Sendable () async throws -> Void,
        turn: Int,
        concurrency: Int
    ) async throws -> [[Double]] {
        try await withThrowingTaskGroup(of: [Double].self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var latencies: [Double] = []
                    for _ in 0..<turn {
                        let start = ContinuousClock.now
                        try await request()
                        latencies.append(Statistics.microseconds(ContinuousClock.now - start))
                    }
                    return latencies
                }
            }
            var all: [[Double]] = []
            for try await latencies in group { all.append(latencies) }
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
