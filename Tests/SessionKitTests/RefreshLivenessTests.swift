import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit

/// A user who did nothing wrong stays signed in: the refresh in flight belongs to the refresher, not to the caller
/// that started it, and short-lived tokens are refreshed neither on every request nor into the loop guard.
@Suite(.timeLimit(.minutes(1))) struct RefreshLivenessTests {
    /// A rotating endpoint that fails with `invalid_grant` when a refresh token is presented twice, as a server
    /// with reuse detection (RFC 9700 §4.14.2) does.
    private func rotatingEndpoint(gate: Gate? = nil) -> ScriptedTokenEndpoint {
        let seen = Lock<Set<String>>([])
        return ScriptedTokenEndpoint(gate: gate) { refreshToken, n in
            guard seen.withLock({ $0.insert(refreshToken).inserted }) else {
                throw SessionError(.refreshRejected, "reused", statusCode: 400, oauthError: "invalid_grant")
            }
            return TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(3600))
        }
    }

    @Test func cancellingTheCallerThatStartedARefreshLeavesTheFlightToTheOthers() async throws {
        // Given a refresh held at the token endpoint, started by a caller that then goes away (a view's task)
        let gate = Gate()
        let endpoint = rotatingEndpoint(gate: gate)
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        let starter = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)
        starter.cancel()
        await #expect(throws: CancellationError.self) { try await starter.value }

        // When another caller needs a refresh while the first one is still in flight
        let next = Task { try await session.refreshTokens() }
        let joined = await eventually(within: .seconds(30)) { session.refresher?.callersWaitingForFlight == 1 }
        #expect(joined, "the second caller never waited for the flight")
        gate.open()
        try await next.value

        // Then it joined the flight: the refresh token was presented once, and the session holds its result
        #expect(endpoint.presented == ["refresh-alice"])
        #expect(session.isActive)
        #expect(session.tokens?.accessToken == "t1")
        session.end()
    }

    /// The owner ends the session as soon as it hears the grant was rejected (as the manager does), before the
    /// flight resolves: the caller still learns why, `refreshRejected`, not a generic `sessionEnded`.
    @Test func aCallerLearnsTheGrantWasRejectedWhenTheOwnerEndsTheSessionOnHearingIt() async throws {
        let endpoint = ScriptedTokenEndpoint { _, _ in
            throw SessionError(.refreshRejected, "invalid_grant", statusCode: 400, oauthError: "invalid_grant")
        }
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        session.setEventHandler { event in
            if case .refreshRejected = event { session.end() }
        }
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .refreshRejected)
        #expect(!session.isActive)
    }

    /// A refresh needed just as the one in flight finishes: the flight commits its tokens and leaves, and the new
    /// call must see those tokens, not present the refresh token the flight just used (which a server with reuse
    /// detection answers by revoking the grant). The window is a few instructions wide, between the refresher's
    /// two reads; the interleaving test hit it twice in 42,000 schedules on a loaded machine.
    @Test func aRefreshNeededAsTheFlightFinishesDoesNotPresentItsRefreshTokenAgain() async throws {
        // Given a forced refresh held at the token endpoint
        let gate = Gate()
        let endpoint = rotatingEndpoint(gate: gate)
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        let refresher = try #require(session.refresher)
        let first = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)

        // When a second refresh is between the refresher's two reads while the first commits and leaves
        let reached = Lock(false)
        let proceed = DispatchSemaphore(value: 0)
        refresher.betweenReads.withLock { hook in
            hook = {
                reached.withLock { $0 = true }
                // Bounded, so that a refresher that needs its actor to finish the flight fails instead of hanging.
                _ = proceed.wait(timeout: .now() + 5)
            }
        }
        let second = Task { try await session.refreshTokens() }
        #expect(await eventually(within: .seconds(30)) { reached.withLock { $0 } })
        refresher.betweenReads.withLock { $0 = nil }
        gate.open()
        // The flight has left once nobody waits for it (its caller resumes only on the refresher, which the hook
        // holds).
        #expect(await eventually(within: .seconds(30)) { refresher.callersWaitingForFlight == 0 })
        proceed.signal()
        try await first.value

        // Then it takes the flight's result: the refresh token was presented once, and the user stays signed in
        do { try await second.value } catch { Issue.record("the second refresh failed: \(error)") }
        #expect(endpoint.presented == ["refresh-alice"])
        #expect(session.isActive)
        #expect(session.tokens?.accessToken == "t1")
        session.end()
    }

    @Test func aCallerWhoseWaitTimedOutLeavesTheFlightInPlace() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let endpoint = rotatingEndpoint(gate: gate)
        let session = UserSession(
            account: alice,
            tokens: tokens("alice"),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint,
            refreshPolicy: RefreshPolicy(waitTimeout: .seconds(5))
        )
        let starter = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)
        await eventually { clock.sleepers == 1 }
        clock.advance(by: .seconds(5))
        let timedOut = await #expect(throws: SessionError.self) { try await starter.value }
        #expect(timedOut?.code == .refreshTimedOut)

        let next = Task { try await session.refreshTokens() }
        await eventually { clock.sleepers == 1 }
        gate.open()
        try await next.value
        #expect(endpoint.presented == ["refresh-alice"])
        #expect(session.tokens?.accessToken == "t1")
        session.end()
    }

    @Test func aSixtySecondTokenIsNotRefreshedWhileFreshAndNeverTripsTheLoopGuard() async throws {
        let clock = ManualClock()
        try await LocalServer.withRunning { server in
            server.route("/me", tokenEchoHandler)
            let endpoint = ScriptedTokenEndpoint { _, n in
                TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(60), receivedAt: clock.now)
            }
            // The defaults: leeway 60 s, jitter 15 s, at most 5 refreshes in 30 s.
            let session = UserSession(
                account: alice,
                tokens: tokens("alice", lifetime: .seconds(60), clock: clock),
                configuration: UserSession.Configuration(clock: clock),
                tokenEndpoint: endpoint
            )
            for _ in 0..<10 { _ = try await session.data(for: get(server, "/me")) }
            #expect(endpoint.count == 0, "a token in the first half of its life is fresh")
            clock.advance(by: .seconds(29))
            for _ in 0..<10 { _ = try await session.data(for: get(server, "/me")) }
            #expect(endpoint.count == 0)
            // Ten lifetimes, a request every 10 s: one refresh per token, none refused.
            for _ in 0..<60 {
                clock.advance(by: .seconds(10))
                _ = try await session.data(for: get(server, "/me"))
            }
            #expect(endpoint.count >= 10 && endpoint.count <= 20)
            session.end()
        }
    }

    @Test(arguments: [
        // (lifetime s, leeway s, jitter s, offset s) → margin in ms
        (3600, 60, 15, 15, 75_000), (60, 60, 15, 0, 24_000), (60, 60, 15, 15, 30_000), (10, 60, 0, 0, 5_000),
        (150, 60, 15, 7, 67_000), (0, 60, 15, 0, 60_000),
    ])
    func theMarginIsAtMostHalfTheLifetimeAndKeepsTheJittersShare(
        lifetime: Int, leeway: Int, jitter: Int, offset: Int, expected: Int
    ) {
        let margin = TokenRefresher.margin(
            lifetime: lifetime == 0 ? nil : .seconds(lifetime),
            leeway: .seconds(leeway),
            jitter: .seconds(jitter),
            offset: .seconds(offset)
        )
        #expect(abs((margin - .milliseconds(expected)) / .milliseconds(1)) < 1)
    }
}
