import Foundation
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How fast LocalServer answers a URLSession client, relative to Python's ThreadingHTTPServer on the same
/// machine at the same moment: the two servers are measured in alternation over several rounds and the median
/// ratio is reported, so load from other processes affects both alike.
enum LocalServerBenchmarks {
    private static let body = #"{"ok":true,"user":"alice","items":[1,2,3,4,5],"token":null}"#
    private static let rounds = 7

    static let all = [
        Benchmark(
            resultNames: [
                "localserver.ratio.sequential", "localserver.sequential.localserver",
                "localserver.sequential.python",
            ],
            run: { try await compare(label: "sequential", concurrency: 1, requestsPerRound: 1500) }),
        Benchmark(
            resultNames: [
                "localserver.ratio.concurrent8", "localserver.concurrent8.localserver",
                "localserver.concurrent8.python",
            ],
            run: { try await compare(label: "concurrent8", concurrency: 8, requestsPerRound: 4000) }),
    ]

    private static func compare(label: String, concurrency: Int, requestsPerRound: Int) async throws -> [BenchResult] {
        let python = try await PythonHTTPServer.start(body: body)
        defer { python.stop() }
        let server = try await LocalServer.start(handler: { _ in .json(body) })
        do {
            var ours: [Double] = []
            var theirs: [Double] = []
            var ratios: [Double] = []
            for round in 0..<rounds {
                // Alternate which server goes first, so a drift in machine load does not favour one.
                var local = 0.0
                var baseline = 0.0
                if round.isMultiple(of: 2) {
                    local = try await throughput(of: server.url("/bench"), concurrency, requestsPerRound)
                    baseline = try await throughput(of: python.url, concurrency, requestsPerRound)
                } else {
                    baseline = try await throughput(of: python.url, concurrency, requestsPerRound)
                    local = try await throughput(of: server.url("/bench"), concurrency, requestsPerRound)
                }
                server.clearRequests()
                ours.append(local)
                theirs.append(baseline)
                ratios.append(local / baseline)
                let line =
                    "localserver.\(label) round \(round + 1)/\(rounds): LocalServer \(Int(local)) req/s, "
                    + "python \(Int(baseline)) req/s, ratio \((local / baseline * 100).rounded() / 100)\n"
                FileHandle.standardError.write(Data(line.utf8))
            }
            await server.stop()
            return [
                BenchResult(name: "localserver.ratio.\(label)", value: Statistics.median(ratios), unit: "x"),
                BenchResult(name: "localserver.\(label).localserver", value: Statistics.median(ours), unit: "req/s"),
                BenchResult(name: "localserver.\(label).python", value: Statistics.median(theirs), unit: "req/s"),
            ]
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Requests per second a fresh URLSession gets from `url` with `concurrency` requests in flight, after a
    /// warm-up that opens its connections.
    private static func throughput(of url: URL, _ concurrency: Int, _ requests: Int) async throws -> Double {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = concurrency
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        try await send(requests: concurrency * 25, to: url, concurrency: concurrency, session: session)
        let start = ContinuousClock.now
        try await send(requests: requests, to: url, concurrency: concurrency, session: session)
        let elapsed = (ContinuousClock.now - start) / .seconds(1)
        return Double(requests) / elapsed
    }

    private static func send(requests: Int, to url: URL, concurrency: Int, session: URLSession) async throws {
        let expected = body.utf8.count
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                let count = requests / concurrency + (worker < requests % concurrency ? 1 : 0)
                group.addTask {
                    for _ in 0..<count {
                        let (data, response) = try await session.data(from: url)
                        guard (response as? HTTPURLResponse)?.statusCode == 200, data.count == expected else {
                            throw BenchError("unexpected answer from \(url)")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
