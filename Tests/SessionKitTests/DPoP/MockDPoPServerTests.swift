import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `MockAuthorizationServer` with DPoP on (RFC 9449): tokens bound to the key of the sign-in's proof, refreshes that
/// need a proof of that key, resources that refuse a bound token as a bearer token and every proof that is wrong in
/// one way (a replayed `jti` among them), and nonces that SessionKit's `OAuthClient` and `UserSession` answer.
@Suite(.timeLimit(.minutes(1))) struct MockDPoPServerTests {
    /// Runs `body` with a DPoP mock that knows alice.
    static func withDPoPMock<T>(
        nonces: Bool = false, _ body: (MockAuthorizationServer) async throws -> T
    ) async throws -> T {
        try await MockAuthorizationServer.withRunning(configuration: .init(dpop: true, requiresDPoPNonce: nonces)) {
            mock in
            try mock.addUser("alice")
            return try await body(mock)
        }
    }

    /// Sends `request` on a connection of its own.
    static func send(_ request: URLRequest) async throws -> (String, HTTPURLResponse) {
        var request = request
        request.setValue("close", forHTTPHeaderField: "Connection")
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        return (String(decoding: data, as: UTF8.self), try #require(response as? HTTPURLResponse))
    }

    /// A `GET` of `url` with `token` as `scheme` and, if given, `proof` as its `DPoP` header.
    static func get(_ url: URL, scheme: String, token: String, proof: String? = nil) -> URLRequest {
        var request = URLRequest(url: url)
        request.setValue("\(scheme) \(token)", forHTTPHeaderField: "Authorization")
        if let proof { request.setValue(proof, forHTTPHeaderField: "DPoP") }
        return request
    }

    /// A proof signed by `key`, with `header` and `claims` changed: a member set to `nil` is removed.
    static func proof(
        _ key: DPoPKey, method: String = "GET", url: URL, accessToken: String?, header: [String: JSONValue?] = [:],
        claims: [String: JSONValue?] = [:]
    ) throws -> String {
        var headerMembers: [String: JSONValue] = [
            "typ": .string("dpop+jwt"), "alg": .string("ES256"), "jwk": .object(key.signingKey.publicJWK),
        ]
        var claimMembers: [String: JSONValue] = [
            "jti": .string(UUID().uuidString), "htm": .string(method),
            "htu": .string(try #require(DPoPProof.targetURI(of: url))),
            "iat": .number(Date().timeIntervalSince1970.rounded(.down)),
        ]
        if let accessToken {
            claimMembers["ath"] = .string(Base64URL.encode(PlatformCrypto.sha256(Array(accessToken.utf8))))
        }
        for (name, value) in header { headerMembers[name] = value }
        for (name, value) in claims { claimMembers[name] = value }
        let input =
            Base64URL.encode(Array(JSONValue.object(headerMembers).serialized.utf8)) + "."
            + Base64URL.encode(Array(JSONValue.object(claimMembers).serialized.utf8))
        return input + "." + Base64URL.encode(try key.signingKey.sign(Array(input.utf8)))
    }

    // MARK: - The token endpoint

    @Test func aSignInsProofBindsBothTokensToItsKey() async throws {
        try await Self.withDPoPMock { mock in
            let tokens = try await mock.makeClient().password(username: "alice", password: "password")
            let key = try #require(tokens.proofKey)
            #expect(tokens.tokenType == "DPoP")
            #expect(mock.keyThumbprint(boundTo: tokens.accessToken) == key.thumbprint)
            #expect(mock.keyThumbprint(boundTo: try #require(tokens.refreshToken)) == key.thumbprint)
            let proofs = mock.dpopProofs
            #expect(proofs.count == 1)
            #expect(proofs.first?.isAccepted == true && proofs.first?.endpoint == .token)
            #expect(proofs.first?.htm == "POST" && proofs.first?.htu == mock.tokenEndpoint.absoluteString)
            #expect(proofs.first?.keyThumbprint == key.thumbprint)
            #expect(abs(try #require(proofs.first?.issuedAt).timeIntervalSinceNow) < 60)
            #expect(mock.dpopProofs(keyThumbprint: key.thumbprint) == proofs)
        }
    }

    @Test func aRefreshNeedsAProofOfTheSameKey() async throws {
        try await Self.withDPoPMock { mock in
            let client = mock.makeClient()
            let account = Account(issuer: mock.issuer, subject: "alice")
            let signedIn = try await client.password(username: "alice", password: "password")
            let key = try #require(signedIn.proofKey)
            let refreshed = try await client.refresh(
                using: try #require(signedIn.refreshToken), for: account, proofKey: key)
            #expect(refreshed.proofKey == key && refreshed.tokenType == "DPoP")
            #expect(mock.keyThumbprint(boundTo: refreshed.accessToken) == key.thumbprint)
            let current = try #require(refreshed.refreshToken)

            // Another key: invalid_grant, and the grant lives on for the right key.
            let other = try DPoPKey.generate()
            await #expect {
                try await client.refresh(using: current, for: account, proofKey: other)
            } throws: { ($0 as? SessionError)?.oauthError == "invalid_grant" }
            #expect(mock.dpopProofs.last?.refusal == .anotherKey)
            // No proof at all: invalid_dpop_proof.
            await #expect {
                try await mock.makeClient(usesDPoP: false).refresh(using: current)
            } throws: { ($0 as? SessionError)?.oauthError == "invalid_dpop_proof" }
            #expect(mock.unprovenBoundTokenCount == 1)
            #expect(mock.isActive(token: current) && mock.reuseDetectionCount == 0)
            let again = try await client.refresh(using: current, for: account, proofKey: key)
            #expect(again.proofKey == key)
            #expect(mock.jtiReplayCount == 0)
        }
    }

    @Test func aBearerClientGetsBearerTokensThatWorkAsBefore() async throws {
        try await Self.withDPoPMock { mock in
            let tokens = try await mock.makeClient(usesDPoP: false).password(username: "alice", password: "password")
            #expect(tokens.tokenType == "Bearer" && tokens.proofKey == nil)
            #expect(mock.keyThumbprint(boundTo: tokens.accessToken) == nil)
            let (body, response) = try await Self.send(
                Self.get(mock.userInfoEndpoint, scheme: "Bearer", token: tokens.accessToken))
            #expect(response.statusCode == 200 && body == #"{"user":"alice"}"#)
            #expect(mock.dpopProofs.isEmpty)
        }
    }

    @Test func offByDefaultTheMockIgnoresProofsAndIssuesBearerTokens() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            // SessionKit refuses a bearer answer to a request that sent a proof (RFC 9449 §5).
            await #expect(throws: SessionError.self) {
                try await mock.makeClient(usesDPoP: true).password(username: "alice", password: "password")
            }
            #expect(mock.dpopProofs.isEmpty)
            #expect(throws: SessionError.self) { try mock.issueTokens(for: "alice", proofKey: try DPoPKey.generate()) }
        }
    }

    // MARK: - Resources

    @Test func aSessionUsesItsBoundTokenAndRefreshesWithItsKey() async throws {
        try await Self.withDPoPMock { mock in
            let client = mock.makeClient()
            let manager = SessionManager(
                configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: client, revoker: client))
            let session = try await manager.signIn(
                Account(issuer: mock.issuer, subject: "alice"),
                tokens: try await client.password(username: "alice", password: "password"))
            let (data, response) = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            #expect(response.statusCode == 200 && String(decoding: data, as: UTF8.self) == #"{"user":"alice"}"#)
            mock.invalidateAccessTokens(for: "alice")
            let (_, again) = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            #expect(again.statusCode == 200)
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            let key = try #require(session.tokens?.proofKey)
            let proofs = mock.dpopProofs(keyThumbprint: key.thumbprint)
            // Sign-in, the first GET, the refused GET, the refresh, the replayed GET: each its own accepted proof.
            #expect(proofs.count == 5 && proofs.allSatisfy(\.isAccepted))
            #expect(Set(proofs.compactMap(\.jti)).count == 5)
            #expect(proofs.map(\.endpoint) == [.token, .resource, .resource, .token, .resource])
            #expect(mock.unprovenBoundTokenCount == 0 && mock.jtiReplayCount == 0)
            await manager.signOut(session)
        }
    }

    @Test func aBoundTokenPresentedAsABearerTokenIsRefused() async throws {
        try await Self.withDPoPMock { mock in
            let key = try DPoPKey.generate()
            let tokens = try mock.issueTokens(for: "alice", proofKey: key)
            #expect(tokens.tokenType == "DPoP" && tokens.proofKey == key)
            let (_, response) = try await Self.send(
                Self.get(mock.userInfoEndpoint, scheme: "Bearer", token: tokens.accessToken))
            #expect(response.statusCode == 401)
            let challenge = try #require(response.value(forHTTPHeaderField: "WWW-Authenticate"))
            #expect(challenge.hasPrefix("DPoP ") && challenge.contains(#"error="invalid_token""#))
            #expect(mock.unprovenBoundTokenCount == 1)
            // As DPoP without a proof: refused too.
            let (_, unproven) = try await Self.send(
                Self.get(mock.userInfoEndpoint, scheme: "DPoP", token: tokens.accessToken))
            #expect(unproven.statusCode == 401)
            #expect(unproven.value(forHTTPHeaderField: "WWW-Authenticate")?.contains("invalid_dpop_proof") == true)
            #expect(mock.unprovenBoundTokenCount == 2)
        }
    }

    @Test func aReplayedProofIsRefused() async throws {
        try await Self.withDPoPMock { mock in
            let key = try DPoPKey.generate()
            let token = try mock.issueTokens(for: "alice", proofKey: key).accessToken
            let proof = try Self.proof(key, url: mock.userInfoEndpoint, accessToken: token)
            let request = Self.get(mock.userInfoEndpoint, scheme: "DPoP", token: token, proof: proof)
            let (_, first) = try await Self.send(request)
            #expect(first.statusCode == 200)
            let (_, replayed) = try await Self.send(request)
            #expect(replayed.statusCode == 401)
            #expect(
                replayed.value(forHTTPHeaderField: "WWW-Authenticate")?.contains(#"error="invalid_dpop_proof""#) == true
            )
            #expect(mock.jtiReplayCount == 1)
            #expect(mock.dpopProofs.map(\.refusal) == [nil, .replayedJTI])
            #expect(mock.dpopProofs.map(\.jti) == Array(repeating: mock.dpopProofs.first?.jti, count: 2))
        }
    }

    /// Each proof is wrong in one way, and refused for that.
    @Test func aProofWrongInOneWayIsRefusedForThat() async throws {
        try await Self.withDPoPMock { mock in
            let key = try DPoPKey.generate()
            let token = try mock.issueTokens(for: "alice", proofKey: key).accessToken
            let url = mock.userInfoEndpoint
            var privateJWK = key.signingKey.publicJWK
            privateJWK["d"] = .string(Base64URL.encode(key.signingKey.storageRepresentation))
            let stale = Date().addingTimeInterval(-120).timeIntervalSince1970.rounded(.down)
            let cases: [(MockAuthorizationServer.DPoPRefusal, String)] = [
                (.wrongType, try Self.proof(key, url: url, accessToken: token, header: ["typ": .string("JWT")])),
                (
                    .unsupportedAlgorithm,
                    try Self.proof(key, url: url, accessToken: token, header: ["alg": .string("ES384")])
                ),
                (.invalidKey, try Self.proof(key, url: url, accessToken: token, header: ["jwk": .object(privateJWK)])),
                (
                    .invalidSignature,
                    try Self.proof(
                        key, url: url, accessToken: token,
                        header: ["jwk": .object(try DPoPKey.generate().signingKey.publicJWK)])
                ),
                (.wrongMethod, try Self.proof(key, method: "POST", url: url, accessToken: token)),
                (.wrongTarget, try Self.proof(key, url: mock.url("/api/other"), accessToken: token)),
                (.staleIssuedAt, try Self.proof(key, url: url, accessToken: token, claims: ["iat": .number(stale)])),
                (.malformed, try Self.proof(key, url: url, accessToken: token, claims: ["jti": nil])),
                (.wrongAccessTokenHash, try Self.proof(key, url: url, accessToken: "at-alice-other")),
                (.anotherKey, try Self.proof(try DPoPKey.generate(), url: url, accessToken: token)),
            ]
            for (expected, proof) in cases {
                let (_, response) = try await Self.send(Self.get(url, scheme: "DPoP", token: token, proof: proof))
                #expect(response.statusCode == 401, "\(expected)")
                #expect(mock.dpopProofs.last?.refusal == expected)
            }
            // The query is not part of htu; the same request with a right proof is served.
            let right = try Self.proof(key, url: url, accessToken: token)
            let (_, served) = try await Self.send(
                Self.get(mock.url("/api/me?x=1"), scheme: "DPoP", token: token, proof: right))
            #expect(served.statusCode == 200)
        }
    }

    // MARK: - Nonces

    @Test func nonceModeIsAnsweredByTheClientAndTheSession() async throws {
        try await Self.withDPoPMock(nonces: true) { mock in
            let client = mock.makeClient()
            let tokens = try await client.password(username: "alice", password: "password")
            let nonce = try #require(mock.dpopNonce)
            #expect(mock.dpopProofs.map(\.refusal) == [.wrongNonce, nil])
            let session = UserSession(
                account: Account(issuer: mock.issuer, subject: "alice"), tokens: tokens, tokenEndpoint: client)
            let (_, first) = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            #expect(first.statusCode == 200)
            // The session keeps its own nonces: its first proof went without, and was sent again with it.
            #expect(mock.dpopProofs.map(\.refusal) == [.wrongNonce, nil, .wrongNonce, nil])

            mock.rotateDPoPNonce()
            #expect(mock.dpopNonce != nonce)
            try await session.refreshTokens()
            let (_, second) = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            #expect(second.statusCode == 200)
            #expect(mock.dpopProofs.suffix(4).map(\.refusal) == [.wrongNonce, nil, .wrongNonce, nil])
            #expect(
                mock.dpopProofs.map(\.endpoint) == [
                    .token, .token, .resource, .resource, .token, .token, .resource, .resource,
                ])
            #expect(mock.jtiReplayCount == 0)
            session.end()
        }
    }

    @Test func anOpenIDMockWithDPoPSaysSoInItsDiscoveryDocument() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(openID: true, dpop: true)) { mock in
            let provider = OpenIDProvider(
                configuration: .init(issuer: try #require(URL(string: mock.issuer)), clientID: "sessionkit-tests"))
            #expect(try await provider.metadata().dpopSigningAlgorithms == ["ES256"])
        }
        try await MockAuthorizationServer.withRunning(configuration: .init(openID: true)) { mock in
            let provider = OpenIDProvider(
                configuration: .init(issuer: try #require(URL(string: mock.issuer)), clientID: "sessionkit-tests"))
            #expect(try await provider.metadata().dpopSigningAlgorithms.isEmpty)
        }
    }
}
