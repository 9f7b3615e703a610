import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ScriptedTokenEndpoint as an app's tests use it: alone, and as a session's token endpoint.
@Suite(.timeLimit(.minutes(5))) struct ScriptedTokenEndpointTests {
    private let alice = Account(issuer: "https://id.example", subject: "alice")

    @Test func recordsEachPresentedTokenAndNumbersCallsFromOne() async throws {
        let endpoint = ScriptedTokenEndpoint { refreshToken, call in
            TokenSet(accessToken: "access-\(call)", refreshToken: "\(refreshToken)+")
        }
        #expect(endpoint.count == 0 && endpoint.presented.isEmpty)
        let first = try await endpoint.refresh(using: "r")
        let second = try await endpoint.refresh(using: "r+")
        #expect(first.accessToken == "access-1" && first.refreshToken == "r+")
        #expect(second.accessToken == "access-2" && second.refreshToken == "r++")
        #expect(endpoint.presented == ["r", "r+"])
        #expect(endpoint.count == 2)
    }

    @Test func aGateHoldsEveryCallUntilItOpensAndTheCallIsCountedOnArrival() async throws {
        let gate = SessionKitTesting.Gate()
        let endpoint = ScriptedTokenEndpoint(gate: gate) { _, call in TokenSet(accessToken: "access-\(call)") }
        let refresh = Task { try await endpoint.refresh(using: "r") }
        await gate.waitForArrivals(1)
        #expect(endpoint.presented == ["r"], "recorded before it waits")
        gate.open()
        #expect(try await refresh.value.accessToken == "access-1")
    }

    @Test func whatTheScriptThrowsReachesTheCallerAndTheCallIsStillRecorded() async throws {
        let endpoint = ScriptedTokenEndpoint { _, _ in throw SessionError(.refreshRejected, "invalid_grant") }
        let error = await #expect(throws: SessionError.self) { try await endpoint.refresh(using: "r") }
        #expect(error?.code == .refreshRejected)
        #expect(endpoint.presented == ["r"])
    }

    @Test func aSessionRefreshesThroughItOnceForTwoRejectedRequests() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("GET", "/me") { request in
                request.bearerToken == "token-2" ? .json(#"{"name":"Alice"}"#) : LocalServer.Response(status: 401)
            }
            let gate = SessionKitTesting.Gate()
            let endpoint = ScriptedTokenEndpoint(gate: gate) { _, call in
                TokenSet(accessToken: "token-\(call + 1)", refreshToken: "refresh-\(call + 1)")
            }
            let session = UserSession(
                account: alice, tokens: TokenSet(accessToken: "token-1", refreshToken: "refresh-1"),
                tokenEndpoint: endpoint)
            defer { session.end() }
            let request = URLRequest(url: server.url("/me"))
            async let first = session.data(for: request)
            async let second = session.data(for: request)
            await gate.waitForArrivals(1)
            gate.open()
            let answers = try await [first.1.statusCode, second.1.statusCode]
            #expect(answers == [200, 200])
            #expect(endpoint.presented == ["refresh-1"], "one refresh for both requests")
        }
    }
}
