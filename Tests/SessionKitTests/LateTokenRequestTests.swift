import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A token request the client wrote before a sign-out can reach the server after it: the network, not the client,
/// decides when the server reads it. This is the schedule the randomized interleavings met once in CI (a proof of the
/// ended session's key read by the server after the end), made deterministic with a relay that holds the request's
/// bytes: the refresh's caller is answered at the sign-out, the request is read afterwards, and it is the only one,
/// its proof made before the end; what the server answers reaches no session and no store.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct LateTokenRequestTests {
    @Test func aTokenRequestWrittenBeforeASignOutIsReadAfterItAndIsTheOnlyOne() async throws {
        let arrivals = Lock<[(date: Date, proof: String?, body: String)]>([])
        try await LocalServer.withRunning { server in
            server.route("POST", "/token") { request in
                arrivals.withLock {
                    $0.append((Date(), request.header("DPoP"), String(decoding: request.body, as: UTF8.self)))
                }
                return .json(
                    #"{"access_token":"token-alice-1","token_type":"DPoP","refresh_token":"refresh-alice-1","#
                        + #""expires_in":3600}"#)
            }
            server.route("GET", "/me") { request in .json(#"{"t":"\#(request.header("Authorization") ?? "")"}"#) }
            let relay = try HoldingRelay(upstream: server.port)
            let client = OAuthClient(
                configuration: .init(
                    tokenEndpoint: try #require(URL(string: "http://127.0.0.1:\(relay.port)/token")), clientID: "app"))
            let store = InMemoryCredentialStore()
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client))
            let key = try DPoPKey.generate()
            let session = try await manager.signIn(
                alice,
                tokens: TokenSet(
                    accessToken: "token-alice", refreshToken: "refresh-alice", tokenType: "DPoP", proofKey: key,
                    lifetime: .seconds(3600)))

            let answered = Lock(false)
            let refresh = Task {
                defer { answered.withLock { $0 = true } }
                try await session.refreshTokens()
            }
            #expect(await relay.holdsARequest(within: .seconds(20)), "the token request never left the client")
            let writtenBy = Date()
            _ = await manager.signOut(options: .localOnly)
            let endedBy = Date()
            // The caller is answered, and the transfer stopped (its connection closed), without the server's answer.
            #expect(
                await eventually(within: .seconds(10)) { answered.withLock { $0 } && relay.clientClosed },
                "the refresh's caller or its transfer waited for the server")
            #expect(arrivals.withLock { $0.isEmpty }, "the server read the request before the end")

            #expect(await relay.pass(), "the held request did not reach the server")
            await #expect(throws: SessionError.self) { try await refresh.value }
            let read = try #require(arrivals.withLock { $0.first })
            #expect(read.date >= endedBy, "read after the sign-out")
            #expect(read.body.contains("refresh_token=refresh-alice"))
            // Its proof is the ended session's key's, made before the end: no proof is made after it.
            let issuedAt = try #require(Self.issuedAt(ofProof: read.proof))
            #expect(issuedAt <= writtenBy.timeIntervalSince1970.rounded(.up))

            // What the server answered went nowhere, and nothing of the session asks again.
            await manager.finishPendingWork()
            let bob = try await manager.signIn(bob, tokens: tokens("bob"))
            let (body, _) = try await bob.data(for: get(server, "/me"))
            #expect(String(decoding: body, as: UTF8.self) == #"{"t":"Bearer token-bob"}"#)
            #expect(arrivals.withLock { $0.count } == 1, "a token request of the ended session came after the end")
            #expect(await store.load(for: alice) == nil)
            #expect(session.tokens == nil && !session.isActive)
            #expect(!server.requests.contains { $0.header("Authorization")?.contains("token-alice-1") == true })
        }
    }

    /// The `iat` of a compact JWS's payload.
    private static func issuedAt(ofProof proof: String?) -> Double? {
        guard let proof else { return nil }
        let parts = proof.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var payload = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
        guard let data = Data(base64Encoded: payload),
            let claims = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return (claims["iat"] as? NSNumber)?.doubleValue
    }
}
