import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A session against the bare client in long blocks, as issue 49 asks (`request.*` takes turns of a few requests, so
/// neither client runs long enough alone for its own queueing to show):
///
/// - `request.blocks.ratio.<label>`: a `UserSession`'s `data(for:)` throughput ÷ a bare `URLSession`'s async
///   `data(for:)` (configured as the session's own, `Authorization` set by hand), blocks of ``block`` authorized GETs
///   of `/me` per client and round (`sequential`: one caller; `concurrent8`: 8 callers sharing the block), 7 rounds,
///   the order alternating by round; the median of the rounds' ratios, with the lowest and highest.
///   `request.nginx.blocks.*`: the same against nginx. Run with `SESSIONKIT_TRANSPORT=urlsession` for the route
///   Apple platforms take, where both clients are FoundationNetworking's.
enum RequestBlockBenchmarks {
    private static let rounds = 7
    private static let block = 1_500

    static let all = [
        Benchmark(
            resultNames: ["request.blocks", "request.nginx.blocks"].flatMap { prefix in
                ["sequential", "concurrent8"].flatMap { label in
                    [
                        "\(prefix).ratio.\(label)", "\(prefix).ratio.\(label).min", "\(prefix).ratio.\(label).max",
                    ]
                }
            },
            run: { try await blocks() })
    ]

    private static func blocks() async throws -> [BenchResult] {
        var servers = [try await BenchServer.localServer()]
        if let nginx = try await BenchServer.nginx() { servers.append(nginx) }
        defer { for server in servers { server.stop() } }
        var results = [BenchResult]()
        for server in servers {
            let prefix = server.name == "nginx" ? "request.nginx.blocks" : "request.blocks"
            for (label, callers) in [("sequential", 1), ("concurrent8", 8)] {
                results += try await compare(server, prefix: prefix, label: label, callers: callers)
            }
        }
        return results
    }

    private static func compare(_ server: BenchServer, prefix: String, label: String, callers: Int) async throws
        -> [BenchResult]
    {
        let url = server.url("/me")
        let session = UserSession(
            account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
            tokens: TokenSet(accessToken: BenchServer.token, refreshToken: "bench-refresh", lifetime: .seconds(3600)),
            tokenEndpoint: OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "bench")))
        let raw = RequestBenchmarks.rawSession()
        defer {
            session.end()
            raw.invalidateAndCancel()
        }
        var authorized = URLRequest(url: url)
        authorized.setValue("Bearer \(BenchServer.token)", forHTTPHeaderField: "Authorization")
        let rawRequest = authorized
        let plain = URLRequest(url: url)
        let perCaller = block / callers
        func run(viaSession: Bool) async throws -> Duration {
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<callers {
                    group.addTask {
                        for _ in 0..<perCaller {
                            let status =
                                viaSession
                                ? try await session.data(for: plain).1.statusCode
                                : (try await raw.data(for: rawRequest).1 as? HTTPURLResponse)?.statusCode
                            guard status == 200 else { throw BenchError("a block request was not answered 200") }
                        }
                    }
                }
                try await group.waitForAll()
            }
            return ContinuousClock.now - start
        }
        _ = try await run(viaSession: true)
        _ = try await run(viaSession: false)
        var ratios = [Double]()
        for round in 0..<rounds {
            let sessionFirst = round.isMultiple(of: 2)
            let first = try await run(viaSession: sessionFirst)
            let second = try await run(viaSession: !sessionFirst)
            let (ours, theirs) = sessionFirst ? (first, second) : (second, first)
            ratios.append(Statistics.seconds(theirs) / Statistics.seconds(ours))
            BenchLog.note(
                "\(prefix).\(label) round \(round + 1)/\(rounds) (\(server.name)): session ÷ bare async "
                    + "\(BenchLog.rounded(ratios.last!, 3))")
        }
        return [
            BenchResult(
                name: "\(prefix).ratio.\(label)", value: Statistics.median(ratios),
                unit: "x (session / bare URLSession async throughput, blocks of \(block))"),
            BenchResult(name: "\(prefix).ratio.\(label).min", value: ratios.min()!, unit: "x (lowest round)"),
            BenchResult(name: "\(prefix).ratio.\(label).max", value: ratios.max()!, unit: "x (highest round)"),
        ]
    }
}
