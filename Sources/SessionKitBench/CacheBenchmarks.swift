import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The session's private response cache.
///
/// - `cache.hit.speedup`: the time of a `session.data(for:)` that goes to the server (`no-store`) divided by the
///   time of one the cache answers (`max-age=60`), same body, same session; rounds alternate, median ratio.
/// - `cache.entry.bytes`: what one small stored response counts against the cache's bound
///   (`ResponseCache.totalBytes / count` over many entries); `cache.entry.resident_bytes` cross-checks it with the
///   growth of resident memory while they were stored, less the growth over the same traffic with nothing stored.
enum CacheBenchmarks {
    private static let rounds = 9
    private static let entries = 4000

    static let all = [
        Benchmark(
            resultNames: ["cache.hit.speedup", "cache.hit.microseconds", "cache.miss.microseconds"],
            run: { try await speedup() }),
        Benchmark(
            resultNames: ["cache.entry.bytes", "cache.entry.resident_bytes"],
            run: { try await entrySize() }),
    ]

    private static func makeSession(_ server: LocalServer, cacheMaximumBytes: Int) -> UserSession {
        UserSession(
            account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
            tokens: TokenSet(accessToken: "bench-access", refreshToken: "bench-refresh", lifetime: .seconds(3600)),
            configuration: .init(cacheMaximumBytes: cacheMaximumBytes),
            tokenEndpoint: OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "bench")))
    }

    private static func speedup() async throws -> [BenchResult] {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            let body = RequestBenchmarks.body
            server.route("GET", "/fresh") { _ in .json(body, headers: [("Cache-Control", "max-age=60")]) }
            server.route("GET", "/nostore") { _ in .json(body, headers: [("Cache-Control", "no-store")]) }
            let session = makeSession(server, cacheMaximumBytes: 4 * 1024 * 1024)
            defer { session.end() }
            let fresh = URLRequest(url: server.url("/fresh"))
            let noStore = URLRequest(url: server.url("/nostore"))
            for _ in 0..<200 { _ = try await session.data(for: noStore) }
            _ = try await session.data(for: fresh)
            guard session.cache.count == 1 else { throw BenchError("the max-age=60 response was not stored") }

            var hits: [Double] = []
            var misses: [Double] = []
            var ratios: [Double] = []
            for round in 0..<rounds {
                var hit = 0.0
                var miss = 0.0
                if round.isMultiple(of: 2) {
                    hit = try await perRequest(session, fresh, times: 10_000)
                    miss = try await perRequest(session, noStore, times: 300)
                } else {
                    miss = try await perRequest(session, noStore, times: 300)
                    hit = try await perRequest(session, fresh, times: 10_000)
                }
                hits.append(hit)
                misses.append(miss)
                ratios.append(miss / hit)
            }
            BenchLog.note(
                "cache: hit \(BenchLog.rounded(Statistics.median(hits), 2)) µs, round trip "
                    + "\(BenchLog.rounded(Statistics.median(misses), 1)) µs")
            return [
                BenchResult(name: "cache.hit.speedup", value: Statistics.median(ratios), unit: "x"),
                BenchResult(name: "cache.hit.microseconds", value: Statistics.median(hits), unit: "µs per hit"),
                BenchResult(
                    name: "cache.miss.microseconds", value: Statistics.median(misses), unit: "µs per round trip"),
            ]
        }
    }

    /// Microseconds per `session.data(for:)` of `request`, sequentially.
    private static func perRequest(_ session: UserSession, _ request: URLRequest, times: Int) async throws -> Double {
        let start = ContinuousClock.now
        for _ in 0..<times {
            let (_, response) = try await session.data(for: request)
            guard response.statusCode == 200 else { throw BenchError("cache benchmark got \(response.statusCode)") }
        }
        return Statistics.microseconds(ContinuousClock.now - start) / Double(times)
    }

    private static func entrySize() async throws -> [BenchResult] {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            let body = #"{"id":1,"name":"item","price":"9.99"}"#
            // The same small answer for every item; the query makes each URI, so each entry, distinct.
            server.route("GET", "/item") { request in
                let cacheable = request.queryItems.first { $0.name == "store" }?.value == "1"
                return .json(body, headers: [("Cache-Control", cacheable ? "max-age=60" : "no-store")])
            }
            let session = makeSession(server, cacheMaximumBytes: 256 * 1024 * 1024)
            defer { session.end() }
            func fetch(store: Bool) async throws {
                let baseURL = server.url("/item")
                try await RequestBenchmarks.run(
                    {
                        // Each worker takes the next index; a shared counter keeps the URIs distinct.
                        let index = Self.nextIndex()
                        let url = URL(string: "\(baseURL.absoluteString)?store=\(store ? 1 : 0)&id=\(index)")!
                        _ = try await session.data(for: URLRequest(url: url))
                    }, times: entries, concurrency: 8)
            }
            // The same traffic twice: first with nothing stored (what the requests themselves leave behind),
            // then with every answer stored.
            try await fetch(store: false)
            let beforeTraffic = ResidentMemory.bytes() ?? 0
            try await fetch(store: false)
            let afterTraffic = ResidentMemory.bytes() ?? 0
            try await fetch(store: true)
            let afterStored = ResidentMemory.bytes() ?? 0
            let count = session.cache.count
            guard count == entries else { throw BenchError("stored \(count) of \(entries) entries") }
            let accounted = Double(session.cache.totalBytes) / Double(count)
            let resident = Double((afterStored - afterTraffic) - max(0, afterTraffic - beforeTraffic)) / Double(count)
            BenchLog.note(
                "cache: \(count) entries, \(Int(accounted)) B accounted, \(Int(resident)) B resident per entry")
            return [
                BenchResult(name: "cache.entry.bytes", value: accounted, unit: "B per small entry (totalBytes/count)"),
                BenchResult(
                    name: "cache.entry.resident_bytes", value: resident,
                    unit: "B per small entry (resident memory growth)"),
            ]
        }
    }

    private static let counter = IndexCounter()

    private static func nextIndex() -> Int {
        counter.next()
    }
}

/// A process-wide counter for distinct URIs.
private final class IndexCounter: Sendable {
    private let value = Lock(0)

    func next() -> Int {
        value.withLock { value in
            value += 1
            return value
        }
    }
}
