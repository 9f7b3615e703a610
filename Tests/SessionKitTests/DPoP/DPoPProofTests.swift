import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The proof's shape (RFC 9449 §4.2), the key's secrecy and storage, and what a session sends, without a network.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct DPoPProofTests {
    static func decode(_ proof: String) throws -> (header: [String: JSONValue], claims: [String: JSONValue]) {
        let jws = try CompactJWS(proof)
        return (jws.header, jws.claims)
    }

    @Test func aProofNamesItsRequestAndVerifiesWithThePublicKeyItCarries() throws {
        let key = try DPoPKey.generate()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let proof = try DPoPProof.make(
            key: key, method: "PATCH", url: URL(string: "https://API.example:8443/items/7?x=1#frag")!,
            accessToken: "at-1", nonce: "n-1", now: now)
        let (header, claims) = try Self.decode(proof)
        #expect(header["typ"] == .string("dpop+jwt"))
        #expect(header["alg"] == .string("ES256"))
        guard case .object(let jwk)? = header["jwk"] else {
            Issue.record("no jwk")
            return
        }
        #expect(jwk["d"] == nil, "the private key is never in a proof")
        #expect(Set(jwk.keys) == ["kty", "crv", "x", "y"])
        #expect(claims["htm"] == .string("PATCH"))
        #expect(claims["htu"] == .string("https://api.example:8443/items/7"), "no query, no fragment")
        #expect(claims["iat"] == .number(1_800_000_000))
        #expect(claims["nonce"] == .string("n-1"))
        #expect(claims["ath"] == .string(Base64URL.encode(PlatformCrypto.sha256(Array("at-1".utf8)))))
        let jws = try CompactJWS(proof)
        let verifier = try VerificationKey(jwk: jwk)
        #expect(verifier.isValidSignature(jws.signature, for: jws.signingInput, algorithm: .es256))
        #expect(verifier.thumbprint == key.thumbprint)
    }

    @Test func everyProofHasItsOwnIdentifierAndATokenRequestNoAth() throws {
        let key = try DPoPKey.generate()
        let url = URL(string: "https://id.example/token")!
        var identifiers = Set<String>()
        for _ in 0..<200 {
            let (_, claims) = try Self.decode(
                DPoPProof.make(key: key, method: "POST", url: url, accessToken: nil, nonce: nil, now: Date()))
            #expect(claims["ath"] == nil && claims["nonce"] == nil)
            if let jti = claims["jti"]?.stringValue { identifiers.insert(jti) }
        }
        #expect(identifiers.count == 200)
    }

    /// The claims a proof writes straight into bytes are the text `JSONValue` writes for the same members, and
    /// read back as them, over strings with quotes, backslashes, controls and non-ASCII, with and without `ath`
    /// and `nonce`.
    @Test func claimsWrittenDirectlyAreTheTextOfTheirMembers() throws {
        var random = SplitMix64(state: 0xC1A1_0005)
        let pieces = [
            "a", "Z", "\"", "\\", "\n", "\r", "\t", "\u{01}", "\u{1F}", "é", "😀", "/", " ", "https://x.example/p",
        ]
        func text() -> String {
            (0..<Int(random.next() % 6)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
        }
        for _ in 0..<500 {
            let ath: String? = random.next() % 2 == 0 ? text() : nil
            let nonce: String? = random.next() % 2 == 0 ? text() : nil
            let method = text()
            let target = text()
            let identifier = (0..<16).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let issuedAt = Double(random.next() % 4_000_000_000)
            let direct = DPoPProof.serializedClaims(
                accessTokenHash: ath, method: method, targetURI: target, issuedAt: issuedAt, identifier: identifier,
                nonce: nonce)
            var members: [String: JSONValue] = [
                "htm": .string(method), "htu": .string(target), "iat": .number(issuedAt),
                "jti": .string(Base64URL.encode(identifier)),
            ]
            if let ath { members["ath"] = .string(ath) }
            if let nonce { members["nonce"] = .string(nonce) }
            #expect(direct == JSONValue.object(members).serializedBytes)
            #expect(try JSONParser.parse(direct) == .object(members))
        }
    }

    @Test func targetURIs() {
        let cases: [(String, String?)] = [
            ("https://a.example/p?q#f", "https://a.example/p"),
            ("HTTPS://a.example", "https://a.example/"),
            ("wss://a.example/socket?x=1", "https://a.example/socket"),
            ("ws://127.0.0.1:8080/s", "http://127.0.0.1:8080/s"),
            ("ftp://a.example/p", nil),
            ("file:///etc/passwd", nil),
        ]
        for (url, expected) in cases {
            #expect(DPoPProof.targetURI(of: URL(string: url)!) == expected, "\(url)")
        }
        #expect(throws: SessionError.self) {
            _ = try DPoPProof.make(
                key: try DPoPKey.generate(), method: "GET", url: URL(string: "file:///x")!, accessToken: nil,
                nonce: nil, now: Date())
        }
    }

    /// The fast reading of `htu` answers as `URLComponents` does wherever it answers, over URLs built from the
    /// parts that trip parsers: case, ports, user information, IPv6, percent-encoding, empty paths, queries,
    /// fragments.
    @Test func theFastTargetURIAgreesWithURLComponents() {
        var random = SplitMix64(state: 0x5E55_1011)
        let schemes = ["http", "https", "ws", "wss", "HTTP", "Https", "ftp", "file", "h"]
        let authorities = [
            "a.example", "A.Example", "127.0.0.1:8080", "[::1]:443", "[::FFFF:7f00:1]", "user:pw@a.example",
            "a.example:80", "xn--bcher-kva.example", "%C3%BC.example", "a.example.", "",
        ]
        let paths = ["", "/", "/p", "/P/q", "/a%2Fb", "/%7Euser", "/a/../b", "/x;y", "//double", "/ü"]
        let queries = ["", "?", "?q=1", "?q=/a?b", "?#"]
        let fragments = ["", "#", "#f", "#a?b"]
        var fastAnswers = 0
        for _ in 0..<3000 {
            let text =
                schemes.randomElement(using: &random)! + "://" + authorities.randomElement(using: &random)!
                + paths.randomElement(using: &random)! + queries.randomElement(using: &random)!
                + fragments.randomElement(using: &random)!
            guard let url = URL(string: text) else { continue }
            guard let fast = DPoPProof.plainTargetURI(url.absoluteString) else { continue }
            fastAnswers += 1
            #expect(fast == DPoPProof.targetURIByComponents(of: url), "\(text)")
        }
        #expect(fastAnswers > 500, "the fast path answers for the common URL")
    }

    @Test func nonceChallengesAreReadFromDPoPChallengesOnly() {
        #expect(DPoPProof.asksForNonce(#"DPoP error="use_dpop_nonce", error_description="x""#))
        #expect(DPoPProof.asksForNonce(#"Bearer realm="a", DPoP algs="ES256", error="use_dpop_nonce""#))
        #expect(!DPoPProof.asksForNonce(#"Bearer error="use_dpop_nonce""#))
        #expect(!DPoPProof.asksForNonce(#"DPoP error="invalid_token""#))
        #expect(!DPoPProof.asksForNonce(nil))
    }

    @Test func theKeyIsNeverPrintedAndRoundTripsThroughTheFileStore() async throws {
        let key = try DPoPKey.generate()
        let scalar = Base64URL.encode(key.signingKey.storageRepresentation)
        let tokens = TokenSet(accessToken: "at", refreshToken: "rt", tokenType: "DPoP", proofKey: key)
        let record = CredentialRecord(account: alice, refreshToken: "rt", tokenType: "DPoP", proofKey: key)
        for value in [key as Any, tokens as Any, record as Any] {
            var dumped = ""
            dump(value, to: &dumped)
            #expect(!dumped.contains(scalar))
            #expect(!"\(value)".contains(scalar))
            #expect(!String(reflecting: value).contains(scalar))
        }
        #expect(key.description.contains(key.thumbprint))

        let directory = try temporaryDirectory()
        let store = try FileCredentialStore(directory: directory)
        try await store.save(record)
        let loaded = try await store.load(for: alice)
        #expect(loaded?.proofKey == key)
        #expect(loaded?.tokens(clock: SystemClock()).proofKey == key)
        try await store.delete(for: alice)
        #expect(try await store.load(for: alice) == nil)
    }

    @Test func aRecordWithAKeyThatIsNotOneIsCorruptNotACrash() throws {
        let record = CredentialRecord(account: alice, refreshToken: "rt", proofKey: try DPoPKey.generate())
        var text = String(decoding: try CredentialRecordCoding.encode(record), as: UTF8.self)
        let range = try #require(text.range(of: #""proofKey":""#))
        text.insert(contentsOf: "!!", at: range.upperBound)
        let error = #expect(throws: SessionError.self) {
            _ = try CredentialRecordCoding.decode(Data(text.utf8), for: alice, source: "test")
        }
        #expect(error?.code == .corruptCredentials)
    }

    @Test func aBoundSessionSendsDPoPWithAProofAndNeverBearer() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/r") { _ in .text("ok") }
            let key = try DPoPKey.generate()
            let session = UserSession(
                account: alice, tokens: TokenSet(accessToken: "bound", tokenType: "DPoP", proofKey: key))
            defer { session.end() }
            _ = try await session.data(for: URLRequest(url: server.url("/r?q=1")))
            let authorized = try await session.authorize(URLRequest(url: server.url("/elsewhere")))
            let request = try #require(server.requests.first)
            #expect(request.header("Authorization") == "DPoP bound")
            let proof = try #require(request.header("DPoP"))
            let (_, claims) = try Self.decode(proof)
            #expect(claims["htu"] == .string(server.url("/r").absoluteString))
            #expect(claims["htm"] == .string("GET"))
            #expect(authorized.value(forHTTPHeaderField: "Authorization") == "DPoP bound")
            let (_, handed) = try Self.decode(try #require(authorized.value(forHTTPHeaderField: "DPoP")))
            #expect(handed["htu"] == .string(server.url("/elsewhere").absoluteString))
            #expect(handed["jti"] != claims["jti"])
        }
    }

    /// The claims and key of a WebSocket handshake's proof, checked as a resource server would: `Authorization: DPoP`
    /// (never `Bearer`), a proof whose `htm` is the handshake's `GET`, whose `htu` is the handshake's URL (the
    /// `http`/`https` URL the handshake is sent to, RFC 6455 §3, without query or fragment), whose `ath` is the
    /// token's hash, signed by the session's key.
    static func expectHandshake(
        _ task: URLSessionWebSocketTask, token: String, key: DPoPKey, targetURI: String
    ) throws {
        let sent = try #require(task.originalRequest)
        #expect(sent.value(forHTTPHeaderField: "Authorization") == "DPoP \(token)")
        let proof = try #require(sent.value(forHTTPHeaderField: "DPoP"), "a bound token went without a proof")
        let jws = try CompactJWS(proof)
        #expect(jws.header["typ"] == .string("dpop+jwt"))
        #expect(jws.claims["htm"] == .string("GET"))
        #expect(jws.claims["htu"] == .string(targetURI))
        #expect(jws.claims["ath"] == .string(Base64URL.encode(PlatformCrypto.sha256(Array(token.utf8)))))
        guard case .object(let jwk)? = jws.header["jwk"] else {
            Issue.record("no jwk")
            return
        }
        let verifier = try VerificationKey(jwk: jwk)
        #expect(verifier.thumbprint == key.thumbprint)
        #expect(verifier.isValidSignature(jws.signature, for: jws.signingInput, algorithm: .es256))
    }

    @Test(arguments: [
        ("ws://127.0.0.1:9/socket?room=1", "http://127.0.0.1:9/socket"),
        ("wss://Chat.sessionkit.test:8443/live#x", "https://chat.sessionkit.test:8443/live"),
    ])
    func aBoundSessionsWebSocketHandshakeCarriesDPoPAndAProofMadeForIt(_ address: String, _ targetURI: String)
        async throws
    {
        let key = try DPoPKey.generate()
        let session = UserSession(
            account: alice, tokens: TokenSet(accessToken: "bound", tokenType: "DPoP", proofKey: key))
        defer { session.end() }
        var request = URLRequest(url: try #require(URL(string: address)))
        request.setValue("Bearer someone-else", forHTTPHeaderField: "Authorization")
        let task = try await session.webSocket(for: request)
        try Self.expectHandshake(task, token: "bound", key: key, targetURI: targetURI)
        task.cancel()
    }

    /// A token refreshed before the handshake (it had expired) is the one presented, with a proof of the same
    /// key whose `ath` is the new token's.
    @Test func aWebSocketHandshakeAfterARefreshPresentsTheNewBoundToken() async throws {
        let key = try DPoPKey.generate()
        let endpoint = ScriptedTokenEndpoint { _, n in
            TokenSet(
                accessToken: "bound-\(n)", refreshToken: "refresh-\(n)", tokenType: "DPoP", proofKey: key,
                lifetime: .seconds(3600))
        }
        let session = UserSession(
            account: alice,
            tokens: TokenSet(
                accessToken: "bound", refreshToken: "refresh", tokenType: "DPoP", proofKey: key,
                lifetime: .seconds(600), receivedAt: .now.advanced(by: .seconds(-3600))),
            tokenEndpoint: endpoint)
        defer { session.end() }
        let task = try await session.webSocket(for: URLRequest(url: try #require(URL(string: "ws://127.0.0.1:9/s"))))
        #expect(endpoint.count == 1)
        try Self.expectHandshake(task, token: "bound-1", key: key, targetURI: "http://127.0.0.1:9/s")
        task.cancel()
    }
}
