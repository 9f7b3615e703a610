import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// A provider on loopback whose documents, keys, clock and token answers a test controls: discovery's rules, key
/// rotation and its rate limit, the provider's clock, and refreshes that name someone else. (The same flows against
/// a real provider: `OpenIDConnectIntegrationTests`.)
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct OpenIDProviderTests {
    /// A mock OpenID provider at `<server>/issuer`.
    final class MockProvider: Sendable {
        let server: LocalServer
        let keys: Lock<[TestIssuer]>
        /// How far the provider's clock is ahead of the real one, in seconds.
        let skew = Lock<TimeInterval>(0)
        /// The subject the next token answer's ID token names.
        let subject = Lock("alice")
        let discoveryIssuer = Lock<String?>(nil)
        /// The `at_hash` the next token answer's ID token carries.
        let accessTokenHash = Lock(AccessTokenHash.none)
        /// The access token of the last token answer.
        let lastAccessToken = Lock<String?>(nil)

        /// What a token answer's ID token says of the access token beside it.
        enum AccessTokenHash {
            /// No `at_hash`.
            case none
            /// The `at_hash` of the access token in the same answer.
            case matching
            /// The `at_hash` of another access token: the ID token was issued with another answer.
            case another
        }

        init(_ server: LocalServer, keys: [TestIssuer]) {
            self.server = server
            self.keys = Lock(keys)
        }

        var issuer: String { server.url("/issuer").absoluteString }
        var providerNow: Date { Date().addingTimeInterval(skew.withLock { $0 }) }
        var dateHeader: (name: String, value: String) { ("Date", HTTPDate.format(providerNow)) }

        func install() {
            server.route("GET", "/issuer/.well-known/openid-configuration") { [self] _ in
                let document: [String: JSONValue] = [
                    "issuer": .string(discoveryIssuer.withLock { $0 } ?? issuer),
                    "token_endpoint": .string(server.url("/token").absoluteString),
                    "jwks_uri": .string(server.url("/jwks").absoluteString),
                    "authorization_endpoint": .string(server.url("/authorize").absoluteString),
                    "end_session_endpoint": .string(server.url("/logout").absoluteString),
                    "id_token_signing_alg_values_supported": .array([.string("ES256")]),
                ]
                return .json(JSONValue.object(document).serialized, headers: [dateHeader])
            }
            server.route("GET", "/jwks") { [self] _ in
                let jwks = keys.withLock { keys in
                    keys.map { issuer -> JSONValue in
                        var jwk = issuer.key.publicJWK
                        jwk["kid"] = .string(issuer.keyID)
                        return .object(jwk)
                    }
                }
                return .json(JSONValue.object(["keys": .array(jwks)]).serialized, headers: [dateHeader])
            }
            server.route("POST", "/token") { [self] _ in
                let signer = keys.withLock { $0.last! }
                let now = providerNow.timeIntervalSince1970.rounded(.down)
                let accessToken = "at-\(UUID().uuidString)"
                lastAccessToken.withLock { $0 = accessToken }
                var claims: [String: JSONValue] = [
                    "iss": .string(issuer), "sub": .string(subject.withLock { $0 }), "aud": .string("my-app"),
                    "exp": .number(now + 300), "iat": .number(now),
                ]
                switch accessTokenHash.withLock({ $0 }) {
                case .none: break
                case .matching:
                    claims["at_hash"] = .string(IDTokenValidator.accessTokenHash(of: accessToken, algorithm: .es256))
                case .another:
                    claims["at_hash"] = .string(
                        IDTokenValidator.accessTokenHash(of: "at-\(UUID().uuidString)", algorithm: .es256))
                }
                let idToken = (try? signer.token(claims)) ?? ""
                let body: [String: JSONValue] = [
                    "access_token": .string(accessToken), "token_type": .string("Bearer"),
                    "expires_in": .number(3600), "refresh_token": .string("rt-\(UUID().uuidString)"),
                    "id_token": .string(idToken),
                ]
                return .json(JSONValue.object(body).serialized, headers: [dateHeader])
            }
        }

        func provider(clock: (any SessionClock)? = nil) -> OpenIDProvider {
            OpenIDProvider(
                configuration: .init(
                    issuer: server.url("/issuer"), clientID: "my-app",
                    validation: IDTokenValidation(algorithms: [.es256]), clock: clock))
        }

        /// A token signed now, on the provider's clock, by `signer`.
        func token(by signer: TestIssuer, nonce: String? = nil) throws -> String {
            let now = providerNow.timeIntervalSince1970.rounded(.down)
            var claims: [String: JSONValue] = [
                "iss": .string(issuer), "sub": .string("alice"), "aud": .string("my-app"), "exp": .number(now + 300),
                "iat": .number(now),
            ]
            if let nonce { claims["nonce"] = .string(nonce) }
            return try signer.token(claims)
        }
    }

    static func withProvider(_ body: (MockProvider) async throws -> Void) async throws {
        try await LocalServer.withRunning { server in
            let mock = MockProvider(server, keys: [try TestIssuer(keyID: "k1")])
            mock.install()
            try await body(mock)
        }
    }

    /// Discovery is kept for `metadataLifetime` on the client's clock, and the document fetched once it has passed
    /// replaces the kept one: the next call within the new lifetime asks the provider nothing.
    @Test func aDocumentFetchedAfterItsLifetimeReplacesTheKeptOne() async throws {
        try await Self.withProvider { mock in
            let clock = ManualClock()
            let provider = OpenIDProvider(
                configuration: .init(
                    issuer: mock.server.url("/issuer"), clientID: "my-app",
                    validation: IDTokenValidation(algorithms: [.es256]), metadataLifetime: .seconds(60), clock: clock))
            let fetches = { mock.server.requests.filter { $0.path.hasSuffix("/openid-configuration") }.count }
            _ = try await provider.metadata()
            _ = try await provider.metadata()
            #expect(fetches() == 1)
            clock.advance(by: .seconds(61))
            _ = try await provider.metadata()
            #expect(fetches() == 2, "a document past its lifetime is fetched again")
            _ = try await provider.metadata()
            clock.advance(by: .seconds(59))
            _ = try await provider.metadata()
            #expect(fetches() == 2, "the document fetched after the lifetime was kept")
        }
    }

    @Test func discoveryRefusesADocumentNamingAnotherIssuer() async throws {
        try await Self.withProvider { mock in
            mock.discoveryIssuer.withLock { $0 = "https://evil.example" }
            let error = await #expect(throws: SessionError.self) { _ = try await mock.provider().metadata() }
            #expect(error?.code == .providerMetadataRejected)
        }
    }

    @Test func discoveryRefusesPlainHTTPEndpointsOffLoopbackAndMissingMembers() throws {
        let issuer = "https://id.example"
        func document(_ changes: [String: JSONValue?]) -> [UInt8] {
            var members: [String: JSONValue] = [
                "issuer": .string(issuer), "token_endpoint": .string("https://id.example/token"),
                "jwks_uri": .string("https://id.example/jwks"),
            ]
            for (name, value) in changes { members[name] = value }
            return Array(JSONValue.object(members).serialized.utf8)
        }
        #expect(throws: Never.self) { _ = try OpenIDProviderMetadata(json: document([:]), expectedIssuer: issuer) }
        for (name, changes) in [
            ("http token endpoint", ["token_endpoint": .string("http://id.example/token")]),
            ("http jwks", ["jwks_uri": .string("http://id.example/jwks")]),
            ("fragment", ["end_session_endpoint": .string("https://id.example/logout#x")]),
            ("no jwks", ["jwks_uri": nil]),
            ("no token endpoint", ["token_endpoint": nil]),
            ("issuer with slash", ["issuer": .string(issuer + "/")]),
            ("algorithms not strings", ["id_token_signing_alg_values_supported": .array([.number(1)])]),
        ] as [(String, [String: JSONValue?])] {
            let error = #expect(throws: SessionError.self, "\(name)") {
                _ = try OpenIDProviderMetadata(json: document(changes), expectedIssuer: issuer)
            }
            #expect(error?.code == .providerMetadataRejected, "\(name)")
        }
        #expect(throws: SessionError.self) {
            _ = try OpenIDProviderMetadata(json: Array("[]".utf8), expectedIssuer: issuer)
        }
    }

    @Test func discoveryFallsBackToRFC8414WhereTheOpenIDDocumentIsMissing() async throws {
        try await LocalServer.withRunning { server async throws in
            let issuer = server.url("/tenant").absoluteString
            server.route("GET", "/.well-known/oauth-authorization-server/tenant") { _ in
                .json(
                    JSONValue.object([
                        "issuer": .string(issuer), "token_endpoint": .string(server.url("/token").absoluteString),
                        "jwks_uri": .string(server.url("/jwks").absoluteString),
                    ]).serialized)
            }
            let provider = OpenIDProvider(configuration: .init(issuer: server.url("/tenant"), clientID: "c"))
            let metadata = try await provider.metadata()
            #expect(metadata.tokenEndpoint == server.url("/token"))
        }
    }

    /// A discovery answered 429 or 5xx, its edges included, is an outage to retry later; any other non-200 is a
    /// refusal of the document.
    @Test(arguments: [(429, true), (500, true), (599, true), (404, false), (600, false), (204, false)])
    func aDiscoveryAnswerIsAnOutageOnlyFor429And5xx(status: Int, outage: Bool) async throws {
        try await Self.withProvider { mock in
            mock.server.route("GET", "/issuer/.well-known/openid-configuration") { _ in .status(status) }
            let error = await #expect(throws: SessionError.self) { _ = try await mock.provider().metadata() }
            #expect(error?.code == (outage ? .providerOutage : .providerMetadataRejected), "\(status)")
        }
    }

    @Test func metadataIsCachedForItsLifetimeThenFetchedAgain() async throws {
        try await Self.withProvider { mock in
            let clock = ManualClock(wallClock: Date())
            let provider = mock.provider(clock: clock)
            _ = try await provider.metadata()
            _ = try await provider.metadata()
            let path = "/issuer/.well-known/openid-configuration"
            #expect(mock.server.requests.filter { $0.path == path }.count == 1)
            clock.advance(by: .seconds(3601))
            _ = try await provider.metadata()
            #expect(mock.server.requests.filter { $0.path == path }.count == 2)
        }
    }

    @Test func aRotatedKeyIsFetchedOnceAndAStreamOfUnknownKidsIsRateLimited() async throws {
        try await Self.withProvider { mock in
            let clock = ManualClock(wallClock: Date())
            let provider = mock.provider(clock: clock)
            let first = try #require(mock.keys.withLock { $0.first })
            _ = try await provider.validate(idToken: try mock.token(by: first), nonce: nil, accessToken: nil)
            #expect(provider.keySetFetchCount == 1)

            // The provider rotates: a token signed by the new key is accepted after one more fetch.
            let rotated = try TestIssuer(keyID: "k2")
            mock.keys.withLock { $0.append(rotated) }
            _ = try await provider.validate(idToken: try mock.token(by: rotated), nonce: nil, accessToken: nil)
            #expect(provider.keySetFetchCount == 2)

            // Tokens naming made-up kids: refused for their key, with no fetch within the minute.
            for index in 0..<20 {
                let forged = try TestIssuer(keyID: "made-up-\(index)")
                let error = await #expect(throws: SessionError.self) {
                    _ = try await provider.validate(idToken: try mock.token(by: forged), nonce: nil, accessToken: nil)
                }
                #expect(error?.idTokenCheck == .key)
            }
            #expect(provider.keySetFetchCount == 2, "a stream of unknown kids made the provider fetch its keys again")
            clock.advance(by: .seconds(61))
            _ = await #expect(throws: SessionError.self) {
                _ = try await provider.validate(
                    idToken: try mock.token(by: TestIssuer(keyID: "made-up-late")), nonce: nil, accessToken: nil)
            }
            #expect(provider.keySetFetchCount == 3, "one fetch a minute")
        }
    }

    @Test(arguments: [-3600.0, 3600.0])
    func aDeviceClockSetWrongNeitherRefusesAFreshTokenNorAcceptsAnExpiredOne(deviceOffset: TimeInterval) async throws {
        try await Self.withProvider { mock in
            // The device's wall clock is an hour off; the provider's Date header says what time it is there.
            let clock = ManualClock(wallClock: Date().addingTimeInterval(deviceOffset))
            let provider = mock.provider(clock: clock)
            let signer = try #require(mock.keys.withLock { $0.first })
            _ = try await provider.metadata()
            let claims = try await provider.validate(idToken: try mock.token(by: signer), nonce: nil, accessToken: nil)
            #expect(claims.subject == "alice", "a fresh token was refused on the device's clock")

            // A token that expired ten minutes ago on the provider's clock is refused, whatever the device says.
            let now = mock.providerNow.timeIntervalSince1970.rounded(.down)
            let expired = try signer.token([
                "iss": .string(mock.issuer), "sub": .string("alice"), "aud": .string("my-app"),
                "exp": .number(now - 600), "iat": .number(now - 900),
            ])
            let error = await #expect(throws: SessionError.self) {
                _ = try await provider.validate(idToken: expired, nonce: nil, accessToken: nil)
            }
            #expect(error?.idTokenCheck == .expiry)
        }
    }

    /// The provider's time is read again after a refetch: the refetch's answer is the provider's latest `Date`, so
    /// a provider whose clock was stepped an hour ahead since its keys were cached (its new key's token issued at its
    /// new time) is judged at that time, not at the one the cached keys were read with.
    @Test func aTokenFoundByARefetchIsJudgedAtTheTimeTheRefetchShowed() async throws {
        try await Self.withProvider { mock in
            let clock = ManualClock(wallClock: Date())
            let provider = mock.provider(clock: clock)
            let first = try #require(mock.keys.withLock { $0.first })
            _ = try await provider.validate(idToken: try mock.token(by: first), nonce: nil, accessToken: nil)

            mock.skew.withLock { $0 = 3600 }
            let rotated = try TestIssuer(keyID: "k2")
            mock.keys.withLock { $0.append(rotated) }
            let claims = try await provider.validate(idToken: try mock.token(by: rotated), nonce: nil, accessToken: nil)
            #expect(claims.subject == "alice")
            #expect(provider.keySetFetchCount == 2)
        }
    }

    /// A token whose key was found only after the key set was fetched again (the provider rotated its keys: an
    /// unknown `kid`, a refetch, a second validation) is judged on the provider's clock too, like one whose key was
    /// cached. The provider's `Date` is an hour from the device's either way; on the device's clock an hour behind
    /// the fresh token would be refused as expired, and an hour ahead it would be refused as issued in the future
    /// while the expired one passed.
    @Test(arguments: [-3600.0, 3600.0])
    func aTokenSignedByARotatedKeyIsJudgedOnTheProvidersClockToo(providerSkew: TimeInterval) async throws {
        try await Self.withProvider { mock in
            mock.skew.withLock { $0 = providerSkew }
            let clock = ManualClock(wallClock: Date())
            let provider = mock.provider(clock: clock)
            let first = try #require(mock.keys.withLock { $0.first })
            _ = try await provider.validate(idToken: try mock.token(by: first), nonce: nil, accessToken: nil)
            #expect(provider.keySetFetchCount == 1)

            // The provider rotates; a fresh token signed by the new key is accepted after the refetch.
            let rotated = try TestIssuer(keyID: "k2")
            mock.keys.withLock { $0.append(rotated) }
            let claims = try await provider.validate(idToken: try mock.token(by: rotated), nonce: nil, accessToken: nil)
            #expect(claims.subject == "alice")
            #expect(provider.keySetFetchCount == 2, "the key was not found by a refetch")

            // Past the refetch rate limit it rotates again; a token expired ten minutes ago on its clock, signed by
            // the newest key, is refused for its expiry once that key is found.
            clock.advance(by: .seconds(61))
            let again = try TestIssuer(keyID: "k3")
            mock.keys.withLock { $0.append(again) }
            let now = mock.providerNow.timeIntervalSince1970.rounded(.down)
            let expired = try again.token([
                "iss": .string(mock.issuer), "sub": .string("alice"), "aud": .string("my-app"),
                "exp": .number(now - 600), "iat": .number(now - 900),
            ])
            let error = await #expect(throws: SessionError.self) {
                _ = try await provider.validate(idToken: expired, nonce: nil, accessToken: nil)
            }
            #expect(error?.idTokenCheck == .expiry)
            #expect(provider.keySetFetchCount == 3, "the key was not found by a refetch")
        }
    }

    /// The ID token of a refresh answer is checked against that answer's access token (`at_hash`, OpenID Connect
    /// Core §3.1.3.6, §12.2): one issued beside another access token is refused, and a session does not adopt the
    /// answer's tokens; one whose `at_hash` matches is accepted.
    @Test func aRefreshWhoseIDTokenWasIssuedForAnotherAccessTokenIsRefused() async throws {
        try await Self.withProvider { mock in
            let provider = mock.provider()
            let alice = Account(issuer: mock.issuer, subject: "alice")
            mock.accessTokenHash.withLock { $0 = .matching }
            let matching = try await provider.refresh(using: "rt-0", for: alice, proofKey: nil)
            #expect(matching.accessToken == mock.lastAccessToken.withLock { $0 })
            #expect(try await provider.refresh(using: "rt-1").idToken != nil)

            mock.accessTokenHash.withLock { $0 = .another }
            for refresh: @Sendable () async throws -> TokenSet in [
                { try await provider.refresh(using: "rt-2", for: alice, proofKey: nil) },
                { try await provider.refresh(using: "rt-3") },
            ] {
                let error = await #expect(throws: SessionError.self) { _ = try await refresh() }
                #expect(error?.code == .idTokenRejected)
                #expect(error?.idTokenCheck == .accessTokenHash)
            }

            // Through a session: the answer's access token is never adopted, and the grant ends.
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), providers: [Provider(id: "mock", openID: provider)]))
            let session = try await manager.signIn(
                alice, tokens: TokenSet(accessToken: "at-a", refreshToken: "rt-a"), through: "mock")
            let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
            #expect(error?.idTokenCheck == .accessTokenHash)
            let refused = try #require(mock.lastAccessToken.withLock { $0 })
            #expect(session.tokens?.accessToken != refused)
            #expect(manager.state == .reauthenticationRequired(alice))
        }
    }

    @Test func aRefreshWhoseIDTokenNamesSomeoneElseIsRefusedAndEndsTheSession() async throws {
        try await Self.withProvider { mock in
            let provider = mock.provider()
            let alice = Account(issuer: mock.issuer, subject: "alice")
            // The same account: accepted.
            let tokens = try await provider.refresh(using: "rt-0", for: alice, proofKey: nil)
            #expect(tokens.idToken != nil)

            mock.subject.withLock { $0 = "mallory" }
            let error = await #expect(throws: SessionError.self) {
                _ = try await provider.refresh(using: "rt-1", for: alice, proofKey: nil)
            }
            #expect(error?.code == .idTokenRejected)
            #expect(error?.idTokenCheck == .sameAccount)

            // Through a session: the tokens are not adopted, the account must sign in again, its record is gone.
            let store = InMemoryCredentialStore()
            let manager = SessionManager(
                configuration: .init(store: store, providers: [Provider(id: "mock", openID: provider)]))
            let session = try await manager.signIn(
                alice, tokens: TokenSet(accessToken: "at-a", refreshToken: "rt-a"), through: "mock")
            _ = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
            #expect(manager.state == .reauthenticationRequired(alice))
            _ = await manager.finishPendingWork(within: .seconds(30))
            #expect(await store.load(for: alice) == nil)
        }
    }

    @Test func aDeviceGrantWithoutAnIDTokenRefreshesWithItsDPoPKeyToLearnWhoSignedIn() async throws {
        try await Self.withProvider { mock in
            // A DPoP server whose device grant answers without an ID token, and whose refresh needs a proof.
            let signer = try #require(mock.keys.withLock { $0.first })
            let refreshProofs = Lock<[String?]>([])
            mock.server.route("POST", "/device") { _ in
                .json(
                    #"{"device_code":"dc","user_code":"U","verification_uri":"https://id.example/d","expires_in":600,"#
                        + #""interval":1}"#)
            }
            mock.server.route("POST", "/token") { request in
                let form = request.bodyText
                let bound = #""token_type":"DPoP","expires_in":3600,"refresh_token":"rt-2""#
                if form.contains("grant_type=refresh_token") {
                    let proof = request.header("DPoP")
                    refreshProofs.withLock { $0.append(proof) }
                    guard proof != nil else { return .json(#"{"error":"invalid_dpop_proof"}"#, status: 400) }
                    let now = mock.providerNow.timeIntervalSince1970.rounded(.down)
                    let idToken =
                        (try? signer.token([
                            "iss": .string(mock.issuer), "sub": .string("alice"), "aud": .string("my-app"),
                            "exp": .number(now + 300), "iat": .number(now),
                        ])) ?? ""
                    return .json(#"{"access_token":"at-2","id_token":"\#(idToken)",\#(bound)}"#)
                }
                return .json(#"{"access_token":"at-1",\#(bound)}"#)
            }
            let provider = OpenIDProvider(
                configuration: .init(
                    issuer: mock.server.url("/issuer"), clientID: "my-app",
                    validation: IDTokenValidation(algorithms: [.es256]),
                    deviceAuthorizationEndpoint: mock.server.url("/device"), usesDPoP: true))
            // One poll after the one-second interval the answer names.
            let signIn = try await provider.pollDeviceAuthorization(try await provider.startDeviceAuthorization())
            #expect(signIn.account.subject == "alice")
            #expect(signIn.tokens.proofKey != nil && signIn.tokens.tokenType == "DPoP")
            #expect(refreshProofs.withLock { $0.count } == 1)
            let proof = try #require(refreshProofs.withLock { $0.first } ?? nil)
            guard case .object(let jwk)? = try CompactJWS(proof).header["jwk"] else {
                Issue.record("the refresh's proof has no jwk")
                return
            }
            #expect(try VerificationKey(jwk: jwk).thumbprint == signIn.tokens.proofKey?.thumbprint)
        }
    }

    /// A program's provider sign-out (`OpenIDLogout.calling`) counts only a redirect (3xx) to the post-logout URI:
    /// a page (200), even one naming that URI in a `Location` field, is a provider asking the user to confirm.
    @Test(arguments: [(302, true), (303, true), (200, false), (204, false), (400, false)])
    func aProgramsProviderSignOutCountsOnlyARedirectToThePostLogoutURI(_ status: Int, _ signedOut: Bool)
        async throws
    {
        try await Self.withProvider { mock in
            mock.server.route("/logout") { _ in
                LocalServer.Response(status: status, headers: [("Location", "app:/signed-out?state=s-1")])
            }
            let step = OpenIDLogout.calling(mock.provider(), postLogoutRedirectURI: "app:/signed-out")
            if signedOut {
                try await step.run(idToken: "the.id.token")
            } else {
                let error = await #expect(throws: SessionError.self) { try await step.run(idToken: "the.id.token") }
                #expect(error?.code == .authorizationFailed)
                #expect(error?.statusCode == status)
            }
        }
    }

    /// Discovery is kept for exactly its lifetime: at the instant it ends, it is fetched again.
    @Test func metadataIsFetchedAgainTheInstantItsLifetimeEnds() async throws {
        try await Self.withProvider { mock in
            let clock = ManualClock(wallClock: Date())
            let provider = mock.provider(clock: clock)
            let path = "/issuer/.well-known/openid-configuration"
            _ = try await provider.metadata()
            clock.advance(by: .seconds(3599))
            _ = try await provider.metadata()
            #expect(mock.server.requests.filter { $0.path == path }.count == 1, "still within its lifetime")
            clock.advance(by: .seconds(1))
            _ = try await provider.metadata()
            #expect(mock.server.requests.filter { $0.path == path }.count == 2, "its lifetime ended")
        }
    }

    @Test func theEndSessionURLCarriesTheHintClientStateAndRedirect() async throws {
        try await Self.withProvider { mock in
            let url = try await mock.provider().endSessionURL(
                idTokenHint: "the.id.token", postLogoutRedirectURI: "app:/signed-out", state: "s-1")
            let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            #expect(url.path == "/logout")
            #expect(items.map(\.name) == ["id_token_hint", "client_id", "post_logout_redirect_uri", "state"])
            #expect(items.map(\.value) == ["the.id.token", "my-app", "app:/signed-out", "s-1"])
        }
    }
}
