import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Many sessions against one authorization server.
///
/// - `fleet.token_requests.n10000`: 10,000 grants are issued, one per account, and every access token is then
///   invalidated at once on the server. Each account's session (sharing one `OAuthClient`) makes one request:
///   every session must refresh exactly once, 10,000 token requests, no duplicates, no storm. Sessions live 256
///   at a time: each live `UserSession` holds two file descriptors on Linux (libcurl's multi handle), and 10,000
///   at once would exceed this machine's limit of 20,000. Each is small (`cacheMaximumBytes` 16 KiB), ended and
///   released after its request, and the resource closes its connection after the last answer.
/// - `fleet.outage.peak_to_mean`: 1,000 sessions learn at the same moment that their access tokens are dead (as
///   1,000 requests answered 401 together would tell them) while the token endpoint is in an outage: every
///   attempt fails as `OAuthClient` reports a 503 with `Retry-After: 1` (`providerOutage`, retry after 1 s), and
///   each refresh gives up after the default three attempts. The retries are timestamped when the refresher makes
///   them and counted per 100 ms from the first to the last; the figure is the busiest bucket over the mean (the
///   first attempts are one burst whatever the policy). The endpoint is an in-process `TokenEndpoint`, so the
///   figure shows the refresh policy's timing, not a shared client's connection pool. `.nojitter`:
///   `RefreshPolicy(jitter: .zero)` with `RetryPolicy(usesJitter: false)`; `.noretryafter` and
///   `.noretryafter.nojitter`: the same outage answering 503 without `Retry-After`.
enum FleetBenchmarks {
    private static let fleetSize = 10_000
    private static let outageSize = 1_000
    private static let window = 256
    private static let users = 100
    private static let outageRepetitions = 3

    static let all = [
        Benchmark(
            resultNames: ["fleet.token_requests.n10000", "fleet.seconds.n10000"],
            run: { try await fleet() }),
        Benchmark(
            resultNames: OutageVariant.allCases.map(\.resultName),
            run: { try await outage() }),
    ]

    private static func configuration(recordsRequests: Bool) -> MockAuthorizationServer.Configuration {
        // Tokens that do not expire on their own during the run: only the server-side invalidation matters.
        .init(accessTokenLifetime: .seconds(3600), server: .init(recordsRequests: recordsRequests))
    }

    private static func installUsersAndResource(on mock: MockAuthorizationServer) throws {
        for user in 0..<users { try mock.addUser("fleet\(user)") }
        mock.protectedRoute("GET", "/fleet") { _, user in
            .json(#"{"user":"\#(user)"}"#, headers: [("Cache-Control", "no-store"), ("Connection", "close")])
        }
    }

    private static func invalidateEveryAccessToken(_ mock: MockAuthorizationServer) {
        for user in 0..<users { mock.invalidateAccessTokens(for: "fleet\(user)") }
    }

    private static func makeSession(
        _ index: Int,
        tokens: TokenSet,
        mock: MockAuthorizationServer,
        endpoint: any TokenEndpoint,
        refreshPolicy: RefreshPolicy = RefreshPolicy()
    ) -> UserSession {
        UserSession(
            account: Account(issuer: mock.issuer, subject: "account-\(index)"),
            tokens: tokens,
            configuration: .init(cacheMaximumBytes: 16 * 1024),
            tokenEndpoint: endpoint,
            refreshPolicy: refreshPolicy)
    }

    private static func fleet() async throws -> [BenchResult] {
        try await MockAuthorizationServer.withRunning(configuration: configuration(recordsRequests: false)) { mock in
            try installUsersAndResource(on: mock)
            let client = mock.makeClient()
            let grants = try (0..<fleetSize).map { try mock.issueTokens(for: "fleet\($0 % users)") }
            invalidateEveryAccessToken(mock)
            let before = mock.tokenRequestCount(grant: .refreshToken)
            let request = URLRequest(url: mock.url("/fleet"))
            let descriptorsBefore = ResidentMemory.openDescriptors() ?? 0
            var peakDescriptors = descriptorsBefore
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                var next = 0
                func launch() {
                    guard next < fleetSize else { return }
                    let session = makeSession(next, tokens: grants[next], mock: mock, endpoint: client)
                    next += 1
                    group.addTask {
                        defer { session.end() }
                        let (_, response) = try await session.data(for: request)
                        guard response.statusCode == 200 else {
                            throw BenchError("a fleet request ended with \(response.statusCode)")
                        }
                    }
                }
                for _ in 0..<window { launch() }
                var done = 0
                while try await group.next() != nil {
                    done += 1
                    if done.isMultiple(of: 500) {
                        peakDescriptors = max(peakDescriptors, ResidentMemory.openDescriptors() ?? 0)
                    }
                    launch()
                }
            }
            let elapsed = Statistics.seconds(ContinuousClock.now - start)
            let tokenRequests = mock.tokenRequestCount(grant: .refreshToken) - before
            BenchLog.note(
                "fleet: \(tokenRequests) token requests for \(fleetSize) sessions in \(BenchLog.rounded(elapsed)) s; "
                    + "open descriptors \(descriptorsBefore) before, at most \(peakDescriptors) sampled during")
            return [
                BenchResult(
                    name: "fleet.token_requests.n10000", value: Double(tokenRequests),
                    unit: "token requests (10,000 sessions, 1 request each; must be 10,000)"),
                BenchResult(
                    name: "fleet.seconds.n10000", value: elapsed, unit: "s (10,000 sessions, 256 alive at a time)"),
            ]
        }
    }

    private enum OutageVariant: CaseIterable {
        case jitter, noJitter, noRetryAfter, noRetryAfterNoJitter

        var resultName: String {
            switch self {
            case .jitter: "fleet.outage.peak_to_mean"
            case .noJitter: "fleet.outage.peak_to_mean.nojitter"
            case .noRetryAfter: "fleet.outage.peak_to_mean.noretryafter"
            case .noRetryAfterNoJitter: "fleet.outage.peak_to_mean.noretryafter.nojitter"
            }
        }

        var unit: String {
            switch self {
            case .jitter: "x (retries/100 ms, 1,000 sessions, 503 Retry-After: 1, default jitter)"
            case .noJitter: "x (same, RefreshPolicy(jitter: .zero), RetryPolicy(usesJitter: false))"
            case .noRetryAfter: "x (same outage without Retry-After, default jitter)"
            case .noRetryAfterNoJitter: "x (same outage without Retry-After, no jitter)"
            }
        }

        var usesJitter: Bool { self == .jitter || self == .noRetryAfter }
        var retryAfter: Duration? { self == .jitter || self == .noJitter ? .seconds(1) : nil }
    }

    private static func outage() async throws -> [BenchResult] {
        var figures: [OutageVariant: [Double]] = [:]
        for repetition in 0..<outageRepetitions {
            let variants = OutageVariant.allCases
            for offset in variants.indices {
                let variant = variants[(offset + repetition) % variants.count]
                figures[variant, default: []].append(try await outageRun(variant))
            }
        }
        return OutageVariant.allCases.map { variant in
            BenchResult(name: variant.resultName, value: Statistics.median(figures[variant] ?? []), unit: variant.unit)
        }
    }

    /// One outage; returns the peak-to-mean ratio of refresh retries per 100 ms.
    private static func outageRun(_ variant: OutageVariant) async throws -> Double {
        var policy = RefreshPolicy()
        if !variant.usesJitter {
            policy = RefreshPolicy(jitter: .zero)
            policy.retryPolicy.usesJitter = false
        }
        let endpoint = OutageEndpoint(retryAfter: variant.retryAfter)
        let sessions = (0..<outageSize).map { index in
            UserSession(
                account: Account(issuer: "https://id.example.com", subject: "account-\(index)"),
                tokens: TokenSet(
                    accessToken: "access-\(index)", refreshToken: "refresh-\(index)", lifetime: .seconds(3600)),
                configuration: .init(cacheMaximumBytes: 16 * 1024),
                tokenEndpoint: endpoint,
                refreshPolicy: policy)
        }
        defer { for session in sessions { session.end() } }
        // Every session learns at the same moment that its access token is dead, as 1,000 requests answered 401
        // together would tell them, and refreshes.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for session in sessions {
                group.addTask {
                    do {
                        try await session.refreshTokens()
                        throw BenchError("a refresh succeeded during the outage")
                    } catch let error as SessionError where error.code == .providerOutage {
                        return
                    }
                }
            }
            try await group.waitForAll()
        }
        let attempts = endpoint.attempts
        let expected = outageSize * policy.retryPolicy.maximumAttempts
        guard attempts.count == expected else {
            throw BenchError("expected \(expected) refresh attempts, saw \(attempts.count)")
        }
        // The first attempts are the same burst whatever the policy; the retries are what it shapes.
        let retries = attempts.filter { $0.number > 1 }.map(\.at).sorted()
        guard let first = retries.first, let last = retries.last else { throw BenchError("no retries") }
        let bucketCount = Int(Statistics.seconds(last - first) / 0.1) + 1
        var buckets = [Int](repeating: 0, count: bucketCount)
        for retry in retries {
            buckets[min(bucketCount - 1, Int(Statistics.seconds(retry - first) / 0.1))] += 1
        }
        let ratio = Double(buckets.max() ?? 0) * Double(bucketCount) / Double(retries.count)
        BenchLog.note(
            "fleet.outage \(variant): \(retries.count) retries over \(bucketCount) buckets of 100 ms, "
                + "busiest \(buckets.max() ?? 0), peak/mean \(BenchLog.rounded(ratio))")
        return ratio
    }
}

/// A token endpoint in an outage: every refresh fails as `OAuthClient` reports a 503 (`providerOutage`, with the
/// `Retry-After` it carried), and every attempt is recorded with its number for its refresh token.
private final class OutageEndpoint: TokenEndpoint {
    private struct Record {
        var attempts: [(at: ContinuousClock.Instant, number: Int)] = []
        var counts: [String: Int] = [:]
    }

    private let retryAfter: Duration?
    private let record = Lock(Record())

    init(retryAfter: Duration?) {
        self.retryAfter = retryAfter
    }

    var attempts: [(at: ContinuousClock.Instant, number: Int)] { record.withLock { $0.attempts } }

    func refresh(using refreshToken: String) async throws -> TokenSet {
        let now = ContinuousClock.now
        record.withLock { record in
            let number = record.counts[refreshToken, default: 0] + 1
            record.counts[refreshToken] = number
            record.attempts.append((now, number))
        }
        throw SessionError(
            .providerOutage, "the token endpoint answered 503", statusCode: 503, retryAfter: retryAfter)
    }
}
