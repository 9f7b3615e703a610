import Foundation
import SessionKit
import SessionKitOAuth
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The request loops of `request.*` and `cache.hit.*`, one kind at a time and nothing else, for a profiler:
///
///     valgrind --tool=callgrind .build/release/sessionkit-bench --profile session --requests 2000
///
/// Running it twice with different counts and subtracting cancels the start-up: what remains, divided by the
/// difference in requests, is the cost of one request. With `--url` it sends to that server (a ``BenchServer``
/// in another process), so the count is the client's alone; without, to a `LocalServer` in this process.
enum ProfileLoop {
    /// Which requests to send.
    enum Variant: String, Sendable {
        /// `UserSession.data(for:)`, `no-store` answers (every request goes to the server).
        case session
        /// A raw URLSession configured like the session's own, `Authorization` set by hand.
        case raw
        /// The same raw URLSession through `dataTask(with:completionHandler:)`, whose completion comes through the
        /// session's delegate queue, as `UserSession`'s does: what that hop costs, apart from SessionKit.
        case rawHandler = "raw-handler"
        /// The raw URLSession given the delegate queue `UserSession` gives its own (Linux: completions on the work
        /// queue), through a completion handler: the floor for a client built as `UserSession` is.
        case rawImmediate = "raw-immediate"
        /// `UserSession.data(for:)` with a DPoP-bound token: a fresh proof per request (`GET /dpop`).
        case dpop
        /// `UserSession.data(for:)` answered by the session's cache (`max-age=60`).
        case cacheHit = "cache-hit"
        /// The libcurl transport's `CurlClient.data(for:)` alone, `Authorization` set by hand (Linux).
        case curl
        /// One raw libcurl easy handle, `curl_easy_perform` on one thread: the floor under `curl` (Linux).
        case easy
    }

    /// Runs the loop on the cooperative pool while the main thread waits, and returns the exit status.
    ///
    /// The main thread never goes idle: an idle async main parks in `rt_sigsuspend`, which Valgrind 3.19 cannot
    /// follow (it crashes), so the loop would not run under callgrind at all.
    static func runBlockingMainThread(_ variant: Variant, requests: Int, server: URL?) -> Int32 {
        let done = DispatchSemaphore(value: 0)
        let status = Lock<Int32>(1)
        Task.detached {
            do {
                if let server {
                    try await run(variant, requests: requests, baseURL: server)
                } else {
                    try await LocalServer.withRunning(configuration: .init(recordsRequests: false)) { local in
                        local.route("GET", "/me") { _ in
                            .json(RequestBenchmarks.body, headers: [("Cache-Control", "no-store")])
                        }
                        local.route("GET", "/fresh") { _ in
                            .json(RequestBenchmarks.body, headers: [("Cache-Control", "max-age=60")])
                        }
                        try await run(variant, requests: requests, baseURL: local.baseURL)
                    }
                }
                status.withLock { $0 = 0 }
            } catch {
                BenchLog.note("sessionkit-bench: --profile failed: \(error)")
            }
            done.signal()
        }
        done.wait()
        return status.withLock { $0 }
    }

    private static func run(_ variant: Variant, requests: Int, baseURL: URL) async throws {
        let token = BenchServer.token
        let proofKey = variant == .dpop ? try DPoPKey.generate() : nil
        let session = UserSession(
            account: Account(issuer: baseURL.absoluteString, subject: "alice"),
            tokens: TokenSet(
                accessToken: token, refreshToken: "bench-refresh", tokenType: proofKey == nil ? "Bearer" : "DPoP",
                proofKey: proofKey, lifetime: .seconds(3600)),
            tokenEndpoint: OAuthClient(
                configuration: .init(tokenEndpoint: baseURL.appendingPathComponent("token"), clientID: "bench"))
        )
        let raw = RequestBenchmarks.rawSession(immediate: variant == .rawImmediate)
        defer {
            session.end()
            raw.invalidateAndCancel()
        }
        let path =
            switch variant {
            case .cacheHit: "fresh"
            case .dpop: "dpop"
            default: "me"
            }
        let url = baseURL.appendingPathComponent(path)
        let send: @Sendable () async throws -> Void
        switch variant {
        case .session, .cacheHit, .dpop:
            send = {
                let (_, response) = try await session.data(for: URLRequest(url: url))
                guard response.statusCode == 200 else { throw BenchError("UserSession got \(response.statusCode)") }
            }
        case .raw:
            send = {
                var request = URLRequest(url: url)
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                let (_, response) = try await raw.data(for: request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                    throw BenchError("raw URLSession got an unexpected answer")
                }
            }
        case .curl, .easy:
            #if os(Linux)
                var request = URLRequest(url: url)
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                let authorized = request
                if variant == .easy {
                    // One call sends the whole count on a thread of its own, as the bench's easy callers do.
                    let count = requests
                    let start = ContinuousClock.now
                    try await EasyCallers.run(authorized, callers: 1, requestsEach: count + 50)
                    let perRequest = Statistics.microseconds(ContinuousClock.now - start) / Double(count + 50)
                    BenchLog.note("profile easy: \(count + 50) requests, \(BenchLog.rounded(perRequest, 1)) µs each")
                    return
                }
                let curl = CurlClient()
                send = {
                    let (_, response) = try await curl.data(for: authorized)
                    guard response.statusCode == 200 else { throw BenchError("CurlClient got \(response.statusCode)") }
                }
            #else
                throw BenchError("the libcurl variants are Linux's")
            #endif
        case .rawHandler, .rawImmediate:
            send = {
                var request = URLRequest(url: url)
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                let (_, response) = try await RequestBenchmarks.dataThroughCompletionHandler(raw, request)
                guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                    throw BenchError("raw URLSession (completion handler) got an unexpected answer")
                }
            }
        }
        for _ in 0..<50 { try await send() }
        let start = ContinuousClock.now
        for _ in 0..<requests { try await send() }
        let perRequest = Statistics.microseconds(ContinuousClock.now - start) / Double(requests)
        BenchLog.note("profile \(variant.rawValue): \(requests) requests, \(BenchLog.rounded(perRequest, 1)) µs each")
    }
}
