import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// DPoP (RFC 9449) against a token endpoint and a resource server that check every proof with jwcrypto
/// (`Tests/DPoPServer`): proofs on every grant and every request kind, nonces from both, bound refresh tokens,
/// and a refresh token that a failed revocation left valid, refused once sign-out destroyed its key.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct DPoPIntegrationTests {
    static let account = Account(issuer: "http://dpop.test", subject: "alice")

    static func client(_ server: DPoPServer, usesDPoP: Bool = true) -> OAuthClient {
        OAuthClient(
            configuration: .init(
                tokenEndpoint: server.url("/token"), revocationEndpoint: server.url("/revoke"), clientID: "app",
                revocationRetry: RetryPolicy(
                    maximumAttempts: 2, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(20),
                    retryableStatuses: [503]),
                usesDPoP: usesDPoP))
    }

    static func signedIn(_ server: DPoPServer, store: InMemoryCredentialStore = InMemoryCredentialStore())
        async throws -> (SessionManager, UserSession, OAuthClient)
    {
        let client = Self.client(server)
        let tokens = try await client.password(username: "alice", password: "pw", scope: "read")
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client, revoker: client))
        let session = try await manager.signIn(Self.account, tokens: tokens)
        return (manager, session, client)
    }

    @Test func everyProofOfEveryRequestKindIsVerifiedAndALeftOverRefreshTokenIsDeadAfterSignOut() async throws {
        guard PythonTools.available("DPoPIntegrationTests") else { return }
        try await DPoPServer.withRunning { server in
            let (manager, session, _) = try await Self.signedIn(server)
            #expect(session.tokens?.tokenType == "DPoP")
            #expect(session.tokens?.proofKey != nil)

            // Every request kind, every method, a same-origin redirect, refreshes: each carries its own proof.
            for round in 0..<12 {
                for method in ["GET", "POST", "PUT", "DELETE", "PATCH"] {
                    var request = URLRequest(url: server.url("/resource/items?round=\(round)"))
                    request.httpMethod = method
                    if method != "GET" {
                        request.setValue("key-\(round)-\(method)", forHTTPHeaderField: "Idempotency-Key")
                    }
                    let (data, response) = try await session.data(for: request)
                    #expect(response.statusCode == 200, "\(method): \(String(decoding: data, as: UTF8.self))")
                }
                let (_, redirected) = try await session.data(
                    for: URLRequest(url: server.url("/redirect-same?to=/resource/moved")))
                #expect(redirected.statusCode == 200 && redirected.url?.path == "/resource/moved")
                let (bytes, streamed) = try await session.bytes(for: URLRequest(url: server.url("/resource/stream")))
                #expect(streamed.statusCode == 200)
                for try await _ in bytes {}
                let (file, downloaded) = try await session.download(for: URLRequest(url: server.url("/resource/file")))
                #expect(downloaded.statusCode == 200)
                try? FileManager.default.removeItem(at: file)
                if round % 4 == 0 { try await session.refreshTokens() }
            }
            // A request authorized for a client SessionKit does not own carries a proof for its URL too.
            let authorized = try await session.authorize(URLRequest(url: server.url("/resource/elsewhere")))
            let plain = URLSession(configuration: .ephemeral)
            let (_, outside) = try await plain.data(for: authorized)
            plain.finishTasksAndInvalidate()
            #expect((outside as? HTTPURLResponse)?.statusCode == 200)

            // A cross-origin redirect carries neither the token nor a proof.
            try await LocalServer.withRunning { other in
                let (_, answer) = try await session.data(
                    for: URLRequest(url: server.url("/redirect-other?to=" + other.url("/x").absoluteString)))
                #expect(answer.statusCode == 404)
                #expect(other.requests.allSatisfy { $0.header("Authorization") == nil && $0.header("DPoP") == nil })
            }

            // Sign-out cannot revoke (the endpoint answers 503), so the refresh token stays valid on the server...
            let leftOver = try #require(session.tokens?.refreshToken)
            try await server.control(#"{"revoke_fails": true}"#)
            let report = try #require(await manager.signOut())
            #expect(report.refreshTokenRevocation == .failed(.providerOutage))
            #expect(report.proofKeyDestruction == .succeeded)
            #expect(report.description.contains("DPoP key succeeded"))
            // Every proof SessionKit sent for the session, as jwcrypto judged it.
            let sent = try await server.stats()
            #expect(sent.proofs >= 100)
            #expect(sent.verified == sent.proofs, "refused: \(sent.refused)")

            // ...but nobody can use it: without a proof, or with a proof of any other key.
            var refused = 0
            let attempts = 2
            do {
                _ = try await Self.client(server, usesDPoP: false).refresh(using: leftOver)
            } catch let error as SessionError where error.statusCode == 400 {
                refused += 1
            }
            do {
                _ = try await Self.client(server).refresh(
                    using: leftOver, for: Self.account, proofKey: try DPoPKey.generate())
            } catch let error as SessionError where error.code == .refreshRejected {
                refused += 1
            }
            #expect(refused == attempts)
            let after = try await server.stats()
            #expect(after.refused == ["missing": 1, "jkt_mismatch": 1], "\(after.refused)")
            print(
                "dpop: proofs: \(sent.proofs), verified by \(sent.library): \(sent.verified), after sign-out "
                    + "refused: \(refused) of \(attempts)")
        }
    }

    @Test func nonceChallengesFromTheTokenEndpointAndTheResourceAreAnsweredOnceForAnyMethod() async throws {
        guard PythonTools.available("DPoPIntegrationTests") else { return }
        try await DPoPServer.withRunning { server in
            try await server.control(#"{"token_nonce": true, "resource_nonce": true, "rotate_nonce": true}"#)
            let (_, session, _) = try await Self.signedIn(server)
            for method in ["GET", "POST", "DELETE"] {
                var request = URLRequest(url: server.url("/resource/n"))
                request.httpMethod = method
                let (_, response) = try await session.data(for: request)
                #expect(response.statusCode == 200, "\(method)")
            }
            try await session.refreshTokens()
            let log = try await server.log()
            // Each POST without an Idempotency-Key was sent again after use_dpop_nonce: the proof, not the
            // request, had been refused. The refresh is one flight, whatever nonces it took.
            #expect(log.filter { $0.path == "/resource/n" && $0.status == 200 }.count == 3)
            #expect(log.allSatisfy { $0.proof == nil || $0.proof == "verified" || $0.proof == "nonce" })
        }
    }

    /// Every `use_dpop_nonce` answered is told as a `dpop.nonce_retry` event, the token endpoint's (at sign-in,
    /// without an account yet, and at a refresh) and the resource's: as many of each as the server refused proofs
    /// for their nonce.
    @Test func everyNonceTheServerAskedForIsToldOnceWithItsEndpoint() async throws {
        guard PythonTools.available("DPoPIntegrationTests") else { return }
        try await DPoPServer.withRunning { server in
            try await server.control(#"{"token_nonce": true, "resource_nonce": true, "rotate_nonce": true}"#)
            let events = Lock<[DiagnosticEvent]>([])
            let diagnostics = Diagnostics(level: .debug) { event in events.withLock { $0.append(event) } }
            let client = Self.client(server)
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), tokenEndpoint: client, revoker: client,
                    sessionConfiguration: .init(diagnostics: diagnostics)))
            let session = try await manager.signIn { [account = Self.account] in
                (account, try await client.password(username: "alice", password: "pw", scope: "read"))
            }
            for method in ["GET", "POST"] {
                var request = URLRequest(url: server.url("/resource/n"))
                request.httpMethod = method
                _ = try await session.data(for: request)
            }
            try await session.refreshTokens()
            diagnostics.flush()
            let log = try await server.log()
            let retries = events.withLock { $0 }.filter { $0.kind == .dpopNonceRetry }
            let origin = try #require(Origin(server.url("/"))).description
            let refusedAtToken = log.filter { $0.path == "/token" && $0.proof == "nonce" }.count
            let refusedAtResource = log.filter { $0.path.hasPrefix("/resource") && $0.proof == "nonce" }.count
            #expect(refusedAtToken >= 2 && refusedAtResource >= 1, "\(log)")
            #expect(retries.filter { $0.fields == ["endpoint": "token", "origin": origin] }.count == refusedAtToken)
            #expect(
                retries.filter { $0.fields == ["endpoint": "resource", "origin": origin] }.count == refusedAtResource)
            #expect(retries.count == refusedAtToken + refusedAtResource)
            #expect(retries.first?.account == nil, "the sign-in's, before anyone is known")
            #expect(retries.last?.account == Self.account, "the refresh's")
        }
    }

    @Test func aServerThatAnswersBearerWhereDPoPWasAskedIsRefused() async throws {
        guard PythonTools.available("DPoPIntegrationTests") else { return }
        try await DPoPServer.withRunning { server in
            try await server.control(#"{"bearer_downgrade": true}"#)
            let error = await #expect(throws: SessionError.self) {
                _ = try await Self.client(server).password(username: "alice", password: "pw")
            }
            #expect(error?.code == .malformedTokenResponse)
            #expect(error?.message.contains("did not bind") == true)
        }
    }

    @Test func restoreUsesTheStoredKeyAndOneAccountsKeyNeverSignsForAnother() async throws {
        guard PythonTools.available("DPoPIntegrationTests") else { return }
        try await DPoPServer.withRunning { server in
            let store = InMemoryCredentialStore()
            let (_, first, client) = try await Self.signedIn(server, store: store)
            let key = try #require(first.tokens?.proofKey)
            #expect(await store.load(for: Self.account)?.proofKey == key, "the key is kept beside the record")

            let bob = Account(issuer: Self.account.issuer, subject: "bob")
            let bobTokens = try await client.password(username: "bob", password: "pw")
            #expect(bobTokens.proofKey != key, "each sign-in makes its own key")

            let relaunched = SessionManager(
                configuration: .init(store: store, tokenEndpoint: client, revoker: client, launchBudget: .seconds(60)))
            #expect(await relaunched.restore() == .active(Self.account, offline: false))
            let restored = try #require(relaunched.current)
            #expect(restored.tokens?.proofKey == key)
            let (_, response) = try await restored.data(for: URLRequest(url: server.url("/resource/after-restore")))
            #expect(response.statusCode == 200)
            _ = bob
        }
    }
}
