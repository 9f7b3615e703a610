import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What following a same-origin redirect costs through a `UserSession`, which follows redirects itself (its
/// URLSessions follow none, so that no credential is copied to another origin): GET `/hop`, answered
/// `302 Location: /me`, then `/me`, against a raw `URLSession` that follows the same redirect on its own with the
/// `Authorization` header set by hand. Each round times turns of 8 sequential requests per client, the order of
/// the two clients alternating; a round's ratio is the raw median latency over the session's; the figure is the
/// median over the rounds.
enum RedirectBenchmarks {
    private static let rounds = 7
    private static let turnsPerRound = 30
    private static let turn = 8

    static let all = [
        Benchmark(
            resultNames: ["request", "request.nginx"].flatMap { prefix in
                [
                    "\(prefix).redirect.ratio", "\(prefix).redirect.ratio.min", "\(prefix).redirect.ratio.max",
                    "\(prefix).redirect.session.microseconds", "\(prefix).redirect.raw.microseconds",
                ]
            },
            run: { try await compare() })
    ]

    private static func compare() async throws -> [BenchResult] {
        var servers = [try await BenchServer.localServer()]
        if let nginx = try await BenchServer.nginx() {
            servers.append(nginx)
        } else {
            BenchLog.note("request.nginx.redirect.*: skipped, nginx is not installed")
        }
        defer { for server in servers { server.stop() } }
        var results: [BenchResult] = []
        for server in servers {
            let prefix = server.name == "nginx" ? "request.nginx" : "request"
            let url = server.url("/hop")
            let session = UserSession(
                account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
                tokens: TokenSet(
                    accessToken: BenchServer.token, refreshToken: "bench-refresh", lifetime: .seconds(3600)))
            let raw = RequestBenchmarks.rawSession()
            defer {
                session.end()
                raw.invalidateAndCancel()
            }
            let viaSession: @Sendable () async throws -> Void = {
                let (data, response) = try await session.data(for: URLRequest(url: url))
                guard response.statusCode == 200, data.count == RequestBenchmarks.body.utf8.count else {
                    throw BenchError("UserSession got \(response.statusCode) after the redirect")
                }
            }
            let viaRaw: @Sendable () async throws -> Void = {
                var request = URLRequest(url: url)
                request.setValue("Bearer \(BenchServer.token)", forHTTPHeaderField: "Authorization")
                let (data, response) = try await raw.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200,
                    data.count == RequestBenchmarks.body.utf8.count
                else { throw BenchError("raw URLSession got an unexpected answer after the redirect") }
            }
            try await RequestBenchmarks.run(viaSession, times: 100, concurrency: 1)
            try await RequestBenchmarks.run(viaRaw, times: 100, concurrency: 1)
            var ratios: [Double] = []
            var ours: [Double] = []
            var theirs: [Double] = []
            for round in 0..<rounds {
                var sessionLatencies: [Double] = []
                var rawLatencies: [Double] = []
                for turnNumber in 0..<turnsPerRound {
                    let sessionFirst = (turnNumber + round).isMultiple(of: 2)
                    for variant in sessionFirst ? [0, 1] : [1, 0] {
                        for _ in 0..<turn {
                            let start = ContinuousClock.now
                            try await (variant == 0 ? viaSession : viaRaw)()
                            let elapsed = Statistics.microseconds(ContinuousClock.now - start)
                            if variant == 0 { sessionLatencies.append(elapsed) } else { rawLatencies.append(elapsed) }
                        }
                    }
                }
                let withSession = Statistics.median(sessionLatencies)
                let withRaw = Statistics.median(rawLatencies)
                ours.append(withSession)
                theirs.append(withRaw)
                ratios.append(withRaw / withSession)
                BenchLog.note(
                    "\(prefix).redirect round \(round + 1)/\(rounds) (\(server.name)): UserSession "
                        + "\(BenchLog.rounded(withSession, 1)) µs, raw URLSession \(BenchLog.rounded(withRaw, 1)) µs, "
                        + "ratio \(BenchLog.rounded(withRaw / withSession, 3))")
            }
            let unit = "x (UserSession following a same-origin redirect / raw URLSession following it, \(server.name))"
            results += [
                BenchResult(name: "\(prefix).redirect.ratio", value: Statistics.median(ratios), unit: unit),
                BenchResult(
                    name: "\(prefix).redirect.ratio.min", value: ratios.min() ?? .nan,
                    unit: "x (lowest of \(rounds) rounds)"),
                BenchResult(
                    name: "\(prefix).redirect.ratio.max", value: ratios.max() ?? .nan,
                    unit: "x (highest of \(rounds) rounds)"),
                BenchResult(
                    name: "\(prefix).redirect.session.microseconds", value: Statistics.median(ours),
                    unit: "µs median latency of the two requests, UserSession (\(server.name))"),
                BenchResult(
                    name: "\(prefix).redirect.raw.microseconds", value: Statistics.median(theirs),
                    unit: "µs median latency of the two requests, raw URLSession (\(server.name))"),
            ]
        }
        return results
    }
}
