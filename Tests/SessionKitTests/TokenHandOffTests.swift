import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Handing this session's token to code SessionKit does not own: fresh for as long as asked, refreshed once for
/// every caller, and the work cancelled when the session ends.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct TokenHandOffTests {
    private static func session(lifetime: Duration, clock: ManualClock, endpoint: ScriptedTokenEndpoint) -> UserSession
    {
        UserSession(
            account: alice,
            tokens: tokens("alice", lifetime: lifetime, clock: clock),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint,
            refreshPolicy: RefreshPolicy(leeway: .seconds(10), jitter: .zero)
        )
    }

    private static func endpoint(lifetime: Duration, clock: ManualClock, gate: Gate? = nil) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint(gate: gate) { _, n in
            TokenSet(
                accessToken: "token-alice-\(n + 1)", lifetime: lifetime, receivedAt: clock.now,
                receivedAtWall: clock.wallNow)
        }
    }

    @Test func aTokenValidLongEnoughIsHandedOutWithoutARefresh() async throws {
        let clock = ManualClock()
        let endpoint = Self.endpoint(lifetime: .seconds(3600), clock: clock)
        let session = Self.session(lifetime: .seconds(3600), clock: clock, endpoint: endpoint)
        defer { session.end() }
        let token = try await session.withAccessToken(minimumValidity: .seconds(600)) { $0 }
        #expect(token == "token-alice")
        #expect(endpoint.count == 0)
    }

    /// The token in hand lives 5 more minutes; callers asking for 10 get one refresh between them, all waiting for
    /// it, and all get the new token.
    @Test func aTokenExpiringSoonerIsRefreshedOnceForEveryCaller() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let endpoint = Self.endpoint(lifetime: .seconds(3600), clock: clock, gate: gate)
        let session = Self.session(lifetime: .seconds(300), clock: clock, endpoint: endpoint)
        defer { session.end() }
        let callers = (0..<5).map { _ in
            Task { try await session.withAccessToken(minimumValidity: .seconds(600)) { $0 } }
        }
        // Bounded: a session that does not refresh would leave the gate waiting for an arrival that never comes.
        let refreshing = await eventually(within: .seconds(60)) { gate.arrivals >= 1 }
        #expect(refreshing, "no refresh started for a token that expires sooner than asked")
        gate.open()
        for caller in callers { #expect(try await caller.value == "token-alice-2") }
        #expect(endpoint.count == 1)
        let request = try await session.authorize(URLRequest(url: URL(string: "https://api.example/x")!))
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice-2")
    }

    /// Without a `minimumValidity`, a token is handed out only with a minute left: one with 50 s or 59.5 s left is
    /// refreshed first, one with 60.5 s or 70 s left is handed out as it is.
    @Test func byDefaultATokenIsHandedOutWithAtLeastAMinuteLeft() async throws {
        let cases: [(Duration, String, Int)] = [
            (.seconds(50), "token-alice-2", 1), (.milliseconds(59_500), "token-alice-2", 1),
            (.milliseconds(60_500), "token-alice", 0), (.seconds(70), "token-alice", 0),
        ]
        for (left, expected, refreshes) in cases {
            let clock = ManualClock()
            let endpoint = Self.endpoint(lifetime: .seconds(3600), clock: clock)
            let session = Self.session(lifetime: left, clock: clock, endpoint: endpoint)
            defer { session.end() }
            let token = try await session.withAccessToken { $0 }
            #expect(token == expected, "\(left) s left")
            #expect(endpoint.count == refreshes, "\(left) s left")
        }
    }

    @Test func aProviderWhoseTokensLiveShorterThanAskedIsAnErrorNotALoop() async throws {
        let clock = ManualClock()
        let endpoint = Self.endpoint(lifetime: .seconds(60), clock: clock)
        let session = Self.session(lifetime: .seconds(60), clock: clock, endpoint: endpoint)
        defer { session.end() }
        let error = await #expect(throws: SessionError.self) {
            try await session.withAccessToken(minimumValidity: .seconds(600)) { $0 }
        }
        #expect(error?.code == .accessExpired)
        #expect(endpoint.count == 1)
        let negative = await #expect(throws: SessionError.self) {
            try await session.withAccessToken(minimumValidity: .seconds(-1)) { $0 }
        }
        #expect(negative?.code == .invalidInput)
    }

    /// The closure waits on a gate nobody opens; only the cancellation `end()` causes can end its wait.
    @Test func endCancelsTheClosuresWorkAndTheCallThrowsSessionEnded() async throws {
        let clock = ManualClock()
        let session = Self.session(
            lifetime: .seconds(3600), clock: clock, endpoint: Self.endpoint(lifetime: .seconds(3600), clock: clock))
        let inside = Gate()
        let sawCancellation = Gate()
        let call = Task {
            try await session.withAccessToken { token -> String in
                inside.open()
                // Bounded, so that a session that fails to cancel the work fails the test instead of hanging it.
                let giveUp = ContinuousClock.now.advanced(by: .seconds(30))
                while !Task.isCancelled && ContinuousClock.now < giveUp { await Task.yield() }
                if Task.isCancelled { sawCancellation.open() }
                return token
            }
        }
        await inside.wait()
        session.end()
        let error = await #expect(throws: SessionError.self) { try await call.value }
        #expect(error?.code == .sessionEnded)
        #expect(sawCancellation.isOpen)
    }

    @Test func authorizeSetsTheSessionsTokenOverAnyOther() async throws {
        let session = UserSession(account: alice, tokens: tokens("alice"))
        var request = URLRequest(url: URL(string: "https://cdn.example/v.m3u8")!)
        request.setValue("Bearer someone-else", forHTTPHeaderField: "Authorization")
        let authorized = try await session.authorize(request)
        #expect(authorized.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice")
        session.end()
        let error = await #expect(throws: SessionError.self) { try await session.authorize(request) }
        #expect(error?.code == .sessionEnded)
    }
}
