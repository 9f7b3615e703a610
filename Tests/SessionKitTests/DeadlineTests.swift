import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Every timeout SessionKit offers is a wall-clock deadline it enforces itself (issue 14, item 13).
///
/// FoundationNetworking on Linux ignores `timeoutIntervalForResource`, and `timeoutIntervalForRequest` only bounds
/// silence: a server that sends its answer one byte every 200 ms (``LocalServer/Fault/trickle(every:)``) would
/// hold a request for as long as it liked. Each test here gives the exchange a 1 s deadline and a trickling
/// server, and requires `timedOut`, not before the deadline; without the deadline the exchange never ends, and the
/// bound in ``finishes(within:_:)`` fails the test after 20 s. Alone, each ends 1.0–1.2 s after it started; the
/// bound is that loose because `scripts/test` runs every suite at once on a loaded machine, where the answer to a
/// cancellation can take seconds to come back (speed is the benchmark's business, not the tests').
@Suite(.timeLimit(.minutes(2))) struct DeadlineTests {
    private static let trickle = LocalServer.Fault.trickle(every: .milliseconds(200))

    /// Runs `operation`, and returns its result and how long it took; cancels it and fails if it takes longer than
    /// `bound` (much longer than any deadline here, so that only a missing deadline reaches it).
    private func finishes<T: Sendable>(
        within bound: Duration = .seconds(20),
        sourceLocation: SourceLocation = #_sourceLocation,
        _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> (result: Result<T, any Error>, elapsed: Duration) {
        let start = ContinuousClock.now
        let work = Task { try await operation() }
        let watchdog = Task {
            try await Task.sleep(for: bound)
            work.cancel()
        }
        let result = await work.result
        watchdog.cancel()
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < bound, "still running after \(bound): no deadline ended it", sourceLocation: sourceLocation)
        return (result, elapsed)
    }

    private func code(_ result: Result<some Sendable, any Error>) -> SessionError.Code? {
        guard case .failure(let error) = result else { return nil }
        return SessionError.Code.of(error)
    }

    // MARK: - UserSession.data(for:)

    @Test(arguments: [("GET", SessionError.Code.timedOut), ("POST", .outcomeUnknown)])
    func aTricklingAnswerEndsAtTheRequestDeadline(_ method: String, _ expected: SessionError.Code) async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/trickle") { _ in LocalServer.Response.json(#"{"items":[1,2,3]}"#).failing(with: Self.trickle)
            }
            let session = UserSession(
                account: alice, tokens: tokens("alice"),
                configuration: UserSession.Configuration(
                    requestTimeout: .seconds(1), retryPolicy: .never, cacheMaximumBytes: 0))
            defer { session.end() }
            var request = URLRequest(url: server.url("/trickle"))
            request.httpMethod = method
            if method == "POST" { request.httpBody = Data("{}".utf8) }

            let sent = request
            let (result, elapsed) = try await finishes { try await session.data(for: sent) }

            // The server had the whole POST and was answering it: its fate is unknown.
            #expect(code(result) == expected, "\(result)")
            #expect(elapsed >= .milliseconds(900), "ended after \(elapsed), before the deadline")
            #expect(session.isActive, "a timeout is not a reason to end the session")
            #expect(session.requestsInFlight == 0)
            #expect(server.requests.count == 1)
        }
    }

    @Test func eachAttemptHasADeadlineOfItsOwn() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/trickle") { _ in LocalServer.Response.json("{}").failing(with: Self.trickle) }
            let session = UserSession(
                account: alice, tokens: tokens("alice"),
                configuration: UserSession.Configuration(
                    requestTimeout: .seconds(1), retryPolicy: RetryPolicy(maximumAttempts: 2, baseDelay: .zero),
                    cacheMaximumBytes: 0))
            defer { session.end() }

            let (result, elapsed) = try await finishes {
                try await session.data(for: URLRequest(url: server.url("/trickle")))
            }

            #expect(code(result) == .timedOut, "\(result)")
            #expect(server.requests.count == 2, "a GET that timed out is retried, with a fresh deadline")
            #expect(elapsed >= .milliseconds(1800), "ended after \(elapsed), before two deadlines")
        }
    }

    // MARK: - OAuthClient

    @Test func aTricklingTokenEndpointEndsARefreshAtTheDeadline() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            let refreshToken = try #require(tokens.refreshToken)
            let client = mock.makeClient(requestTimeout: .seconds(1))
            mock.failNext(.token, with: .fault(Self.trickle))

            let (result, elapsed) = try await finishes { try await client.refresh(using: refreshToken) }

            #expect(code(result) == .timedOut, "\(result)")
            #expect(elapsed >= .milliseconds(900), "ended after \(elapsed), before the deadline")
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
        }
    }

    @Test func aTricklingRevocationEndpointEndsTheRevocationAtTheDeadline() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            let refreshToken = try #require(tokens.refreshToken)
            let client = mock.makeClient(requestTimeout: .seconds(1), revocationRetry: .never)
            mock.failNext(.revocation, with: .fault(Self.trickle))

            let (result, elapsed) = try await finishes { try await client.revoke(refreshToken, hint: .refreshToken) }

            #expect(code(result) == .timedOut, "\(result)")
            #expect(elapsed >= .milliseconds(900), "ended after \(elapsed), before the deadline")
            #expect(mock.revocationRequestCount == 1)
        }
    }

    @Test func aTricklingDeviceAuthorizationEndpointEndsAtTheDeadline() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let client = mock.makeClient(requestTimeout: .seconds(1))
            mock.failNext(.deviceAuthorization, with: .fault(Self.trickle))

            let (result, elapsed) = try await finishes { try await client.startDeviceAuthorization() }

            #expect(code(result) == .timedOut, "\(result)")
            #expect(elapsed >= .milliseconds(900), "ended after \(elapsed), before the deadline")
        }
    }
}
