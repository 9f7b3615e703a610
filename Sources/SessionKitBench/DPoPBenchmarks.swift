import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What DPoP (RFC 9449) costs a request.
///
/// - `dpop.request.ratio`: the time of a `session.data(for:)` with a bearer token divided by the same request with a
///   DPoP-bound token (a fresh ES256 proof per request), same server and body, rounds alternating; the median ratio,
///   which is the throughput ratio (goal ≥ 0.95).
/// - `dpop.request.ratio.rtt1ms`: the same ratio when the server answers each request after 1 ms, a round trip a user
///   meets on a near network (goal ≥ 0.98): beside the saturated loopback's figure, what a proof costs where a
///   request waits on the network at all.
/// - `dpop.proof.microseconds`: making one proof (JSON, base64url, ES256 signature) beside
///   `dpop.sign.microseconds`, the platform's raw P-256 signing of a message of the same length; both in a tight
///   loop, which outruns the background preparing of nonces, so most signatures there are whole ones.
/// - On Linux, `dpop.sign.prepared.microseconds`: a signature with a prepared nonce, what a request pays when the
///   pool has one; and `dpop.nonce.microseconds`: preparing one nonce, the work moved off the request's path (it
///   still costs CPU, on a core that is idle).
enum DPoPBenchmarks {
    private static let rounds = 9

    static let all = [
        Benchmark(
            resultNames: [
                "dpop.request.ratio", "dpop.request.ratio.min", "dpop.request.ratio.max",
                "dpop.request.bearer.microseconds", "dpop.request.dpop.microseconds",
            ],
            run: { try await requestRatio(path: "/r", label: "", perRound: 400) }),
        Benchmark(
            resultNames: [
                "dpop.request.ratio.rtt1ms", "dpop.request.ratio.rtt1ms.min", "dpop.request.ratio.rtt1ms.max",
                "dpop.request.bearer.microseconds.rtt1ms", "dpop.request.dpop.microseconds.rtt1ms",
            ],
            run: { try await requestRatio(path: "/rtt1ms", label: ".rtt1ms", perRound: 150) }),
        Benchmark(
            resultNames: [
                "dpop.proof.microseconds", "dpop.sign.microseconds", "dpop.sign.prepared.microseconds",
                "dpop.nonce.microseconds",
            ],
            run: { try proofCost() }),
    ]

    private static func session(_ server: LocalServer, bound: DPoPKey?) -> UserSession {
        UserSession(
            account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
            tokens: TokenSet(
                accessToken: "bench-access", refreshToken: "bench-refresh", tokenType: bound == nil ? "Bearer" : "DPoP",
                proofKey: bound, lifetime: .seconds(3600)),
            configuration: .init(cacheMaximumBytes: 0),
            tokenEndpoint: OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "bench")))
    }

    /// The bearer ÷ DPoP ratio of sequential requests to `path`, `perRound` requests per session per round.
    private static func requestRatio(path: String, label: String, perRound: Int) async throws -> [BenchResult] {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            server.route("GET", "/r") { _ in .json(RequestBenchmarks.body, headers: [("Cache-Control", "no-store")]) }
            server.route("GET", "/rtt1ms") { _ in
                LocalServer.Response.json(RequestBenchmarks.body, headers: [("Cache-Control", "no-store")])
                    .delayed(by: .milliseconds(1))
            }
            let bearer = session(server, bound: nil)
            let dpop = session(server, bound: try DPoPKey.generate())
            defer {
                bearer.end()
                dpop.end()
            }
            let request = URLRequest(url: server.url(path))
            for _ in 0..<(perRound / 2) {
                _ = try await bearer.data(for: request)
                _ = try await dpop.data(for: request)
            }
            var ratios: [Double] = []
            var bearerTimes: [Double] = []
            var dpopTimes: [Double] = []
            for round in 0..<rounds {
                var pair = (0.0, 0.0)
                if round.isMultiple(of: 2) {
                    pair.0 = try await perRequest(bearer, request, count: perRound)
                    pair.1 = try await perRequest(dpop, request, count: perRound)
                } else {
                    pair.1 = try await perRequest(dpop, request, count: perRound)
                    pair.0 = try await perRequest(bearer, request, count: perRound)
                }
                bearerTimes.append(pair.0)
                dpopTimes.append(pair.1)
                ratios.append(pair.0 / pair.1)
            }
            return [
                BenchResult(name: "dpop.request.ratio\(label)", value: Statistics.median(ratios), unit: "x"),
                BenchResult(name: "dpop.request.ratio\(label).min", value: ratios.min() ?? 0, unit: "x"),
                BenchResult(name: "dpop.request.ratio\(label).max", value: ratios.max() ?? 0, unit: "x"),
                BenchResult(
                    name: "dpop.request.bearer.microseconds\(label)", value: Statistics.median(bearerTimes),
                    unit: "µs per request"),
                BenchResult(
                    name: "dpop.request.dpop.microseconds\(label)", value: Statistics.median(dpopTimes),
                    unit: "µs per request"),
            ]
        }
    }

    /// Microseconds per sequential request, over `count` requests.
    private static func perRequest(_ session: UserSession, _ request: URLRequest, count: Int) async throws -> Double {
        let start = ContinuousClock.now
        for _ in 0..<count {
            let (_, response) = try await session.data(for: request)
            guard response.statusCode == 200 else { throw BenchError("dpop benchmark got \(response.statusCode)") }
        }
        return Statistics.microseconds(ContinuousClock.now - start) / Double(count)
    }

    private static func proofCost() throws -> [BenchResult] {
        let key = try DPoPKey.generate()
        let signer = try P256SigningKey()
        let url = URL(string: "https://api.example.com/v1/items?page=2")!
        let sample = try DPoPProof.make(
            key: key, method: "GET", url: url, accessToken: "bench-access", nonce: nil, now: Date())
        let message = [UInt8](
            repeating: 0x61, count: sample.split(separator: ".").prefix(2).joined(separator: ".").utf8.count)
        var proofs: [Double] = []
        var signs: [Double] = []
        for _ in 0..<rounds {
            var start = ContinuousClock.now
            for _ in 0..<2000 {
                _ = try DPoPProof.make(
                    key: key, method: "GET", url: url, accessToken: "bench-access", nonce: nil, now: Date())
            }
            proofs.append(Statistics.microseconds(ContinuousClock.now - start) / 2000)
            start = ContinuousClock.now
            for _ in 0..<2000 { _ = try signer.sign(message) }
            signs.append(Statistics.microseconds(ContinuousClock.now - start) / 2000)
        }
        var results = [
            BenchResult(name: "dpop.proof.microseconds", value: Statistics.median(proofs), unit: "µs per proof"),
            BenchResult(name: "dpop.sign.microseconds", value: Statistics.median(signs), unit: "µs per signature"),
        ]
        #if !canImport(CryptoKit)
            var prepared: [Double] = []
            var nonces: [Double] = []
            for _ in 0..<rounds {
                var signing = Duration.zero
                var preparing = Duration.zero
                let keys = 100
                for _ in 0..<keys {
                    // A new key's pool is empty: preparing fills it, and the signatures that follow each take one.
                    let fresh = try P256SigningKey()
                    var start = ContinuousClock.now
                    fresh.prepareNonces()
                    preparing += ContinuousClock.now - start
                    start = ContinuousClock.now
                    for _ in 0..<(fresh.preparedNonces / 2) { _ = try fresh.sign(message) }
                    signing += ContinuousClock.now - start
                }
                let perPool = Double(P256SigningKey.noncePoolSize)
                prepared.append(Statistics.microseconds(signing) / (Double(keys) * (perPool / 2).rounded(.down)))
                nonces.append(Statistics.microseconds(preparing) / (Double(keys) * perPool))
            }
            results += [
                BenchResult(
                    name: "dpop.sign.prepared.microseconds", value: Statistics.median(prepared),
                    unit: "µs per signature"),
                BenchResult(name: "dpop.nonce.microseconds", value: Statistics.median(nonces), unit: "µs per nonce"),
            ]
        #endif
        return results
    }
}
