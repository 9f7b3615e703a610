import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The request loops of `request.*` and `cache.hit.*`, one kind at a time and nothing else, for a profiler:
///
///     valgrind --tool=callgrind .build/release/sessionkit-bench --profile session --requests 2000
///
/// Running it twice with different counts and subtracting cancels the start-up: what remains, divided by the
/// difference in requests, is the cost of one request.
enum ProfileLoop {
    /// Which requests to send.
    enum Variant: String, Sendable {
        /// `UserSession.data(for:)`, `no-store` answers (every request goes to the server).
        case session
        /// A raw URLSession configured like the session's own, `Authorization` set by hand.
        case raw
        /// `UserSession.data(for:)` answered by the session's cache (`max-age=60`).
        case cacheHit = "cache-hit"
    }

    /// Runs the loop on the cooperative pool while the main thread waits, and returns the exit status.
    ///
    /// The main thread never goes idle: an idle async main parks in `rt_sigsuspend`, which Valgrind 3.19 cannot
    /// follow (it crashes), so the loop would not run under callgrind at all.
    static func runBlockingMainThread(_ variant: Variant, requests: Int) -> Int32 {
        let done = DispatchSemaphore(value: 0)
        let status = Lock<Int32>(1)
        Task.detached {
            do {
                try await run(variant, requests: requests)
                status.withLock { $0 = 0 }
            } catch {
                BenchLog.note("sessionkit-bench: --profile failed: \(error)")
            }
            done.signal()
        }
        done.wait()
        return status.withLock { $0 }
    }

    private static func run(_ variant: Variant, requests: Int) async throws {
        try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { server in
            let token = "bench-access-token-0123456789abcdef"
            server.route("GET", "/me") { _ in .json(RequestBenchmarks.body, headers: [("Cache-Control", "no-store")]) }
            server.route("GET", "/fresh") { _ in
                .json(RequestBenchmarks.body, headers: [("Cache-Control", "max-age=60")])
            }
            let session = UserSession(
                account: Account(issuer: server.baseURL.absoluteString, subject: "alice"),
                tokens: TokenSet(accessToken: token, refreshToken: "bench-refresh", lifetime: .seconds(3600)),
                tokenEndpoint: OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "bench"))
            )
            let raw = RequestBenchmarks.rawSession()
            defer {
                session.end()
                raw.invalidateAndCancel()
            }
            let url = server.url(variant == .cacheHit ? "/fresh" : "/me")
            let send: @Sendable () async throws -> Void
            switch variant {
            case .session, .cacheHit:
                send = { _ = try await session.data(for: URLRequest(url: url)) }
            case .raw:
                send = {
                    var request = URLRequest(url: url)
                    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                    _ = try await raw.data(for: request)
                }
            }
            for _ in 0..<50 { try await send() }
            let start = ContinuousClock.now
            for _ in 0..<requests { try await send() }
            let perRequest = Statistics.microseconds(ContinuousClock.now - start) / Double(requests)
            BenchLog.note(
                "profile \(variant.rawValue): \(requests) requests, \(BenchLog.rounded(perRequest, 1)) µs each")
        }
    }
}
