import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// RFC 9449 §10: a sign-in with DPoP makes its key before the authorization request, binds the code to it with
/// `dpop_jkt` when the provider supports DPoP, proves that same key in the code exchange, and keeps it for the
/// session's tokens. Every path that starts a code grant is driven against `MockAuthorizationServer`, which binds the
/// code to the `dpop_jkt` it received and refuses an exchange with a proof of any other key. The thumbprints are
/// computed here from the proofs' JWK headers (and by jwcrypto when the venv is there), not by SessionKit.
@Suite(.timeLimit(.minutes(1))) struct DPoPCodeBindingTests {
    static let clientID = "my-app"

    /// Runs `body` with a mock that knows alice.
    static func withMock<T>(
        dpop: Bool = true, openID: Bool = false, _ body: (MockAuthorizationServer) async throws -> T
    ) async throws -> T {
        try await MockAuthorizationServer.withRunning(
            configuration: .init(clientID: clientID, openID: openID, dpop: dpop)
        ) { mock in
            try mock.addUser("alice")
            return try await body(mock)
        }
    }

    /// An OpenID client of `mock` that accepts its ES256 ID tokens.
    static func openIDProvider(_ mock: MockAuthorizationServer, usesDPoP: Bool? = nil) throws -> OpenIDProvider {
        OpenIDProvider(
            configuration: .init(
                issuer: try #require(URL(string: mock.issuer)), clientID: clientID,
                validation: IDTokenValidation(algorithms: [.es256]), usesDPoP: usesDPoP))
    }

    /// The browser: opens `url` and follows the redirects (to the loopback listener, or the mock's callback).
    static func browse(_ url: URL) async throws -> URL {
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (_, response) = try await browser.data(for: URLRequest(url: url))
        return try #require(response.url)
    }

    /// The RFC 7638 thumbprint of an EC public JWK, computed here: the required members in lexicographic order,
    /// no whitespace, SHA-256, base64url.
    static func thumbprint(ofJWK jwk: [String: JSONValue]) throws -> String {
        let members = try ["crv", "kty", "x", "y"].map { name in
            #""\#(name)":"\#(try #require(jwk[name]?.stringValue, "the JWK has no \(name)"))""#
        }
        #expect(jwk["kty"]?.stringValue == "EC" && jwk["crv"]?.stringValue == "P-256")
        return Base64URL.encode(PlatformCrypto.sha256(Array(("{" + members.joined(separator: ",") + "}").utf8)))
    }

    /// The `jwk` of a DPoP proof's header.
    static func jwk(ofProof proof: String) throws -> [String: JSONValue] {
        let header = try #require(proof.split(separator: ".").first.flatMap { Base64URL.decode(String($0)) })
        guard case .object(let jwk)? = try JSONParser.parse(header)["jwk"] else {
            Issue.record("the proof's header has no jwk")
            return [:]
        }
        return jwk
    }

    /// The `DPoP` headers of the code exchanges the mock received, in order (an empty string for one without).
    static func exchangeProofs(_ mock: MockAuthorizationServer) -> [String] {
        mock.requests.filter { $0.path == "/token" && $0.bodyText.contains("grant_type=authorization_code") }
            .map { $0.header("DPoP") ?? "" }
    }

    /// The `dpop_jkt` of `url`'s query, read here.
    static func dpopJKT(in url: URL) -> String? {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == "dpop_jkt" }?.value
    }

    /// Checks the promise of a sign-in with DPoP against a provider that supports it: one authorization request,
    /// whose `dpop_jkt` is the thumbprint of the one key the code exchange proved, the key the tokens came back with
    /// and the key the server bound them to.
    static func expectOneKeyBindsCodeAndTokens(
        _ mock: MockAuthorizationServer, url: URL?, tokens: TokenSet?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let sent = try #require(mock.authorizationKeyThumbprints.first ?? nil, sourceLocation: sourceLocation)
        #expect(mock.authorizationKeyThumbprints.count == 1, sourceLocation: sourceLocation)
        #expect(sent.count == 43, "a base64url SHA-256", sourceLocation: sourceLocation)
        if let url { #expect(Self.dpopJKT(in: url) == sent, sourceLocation: sourceLocation) }
        let proofs = Self.exchangeProofs(mock)
        try #require(proofs.count == 1, sourceLocation: sourceLocation)
        #expect(try Self.thumbprint(ofJWK: Self.jwk(ofProof: proofs[0])) == sent, sourceLocation: sourceLocation)
        let tokens = try #require(tokens, sourceLocation: sourceLocation)
        #expect(tokens.tokenType == "DPoP", sourceLocation: sourceLocation)
        let key = try #require(tokens.proofKey, sourceLocation: sourceLocation)
        #expect(try Self.thumbprint(ofJWK: key.signingKey.publicJWK) == sent, sourceLocation: sourceLocation)
        #expect(mock.keyThumbprint(boundTo: tokens.accessToken) == sent, sourceLocation: sourceLocation)
        if let refreshToken = tokens.refreshToken {
            #expect(mock.keyThumbprint(boundTo: refreshToken) == sent, sourceLocation: sourceLocation)
        }
        #expect(mock.dpopProofs.allSatisfy { $0.isAccepted }, sourceLocation: sourceLocation)
        let keys = Set(mock.dpopProofs.compactMap(\.keyThumbprint))
        #expect(keys == [sent], "no second key", sourceLocation: sourceLocation)
    }

    // MARK: - Every path that starts a code grant

    @Test func theLoopbackSignInBindsTheCodeToTheKeyItsExchangeProves() async throws {
        try await Self.withMock { mock in
            try mock.approveNextAuthorization(as: "alice")
            let opened = Locked<URL?>(nil)
            let tokens = try await mock.makeClient().authorizeInBrowser(scope: "profile") { url in
                opened.withLock { $0 = url }
                _ = try await Self.browse(url)
            }
            try Self.expectOneKeyBindsCodeAndTokens(mock, url: opened.withLock { $0 }, tokens: tokens)
        }
    }

    @Test func anAppDrivenSignInWithACustomSchemeBindsTheCodeTheSameWay() async throws {
        try await Self.withMock { mock in
            let client = mock.makeClient()
            let request = try client.authorizationRequest(redirectURI: "com.example.app:/oauth/callback")
            try mock.approveNextAuthorization(as: "alice")
            // The browser cannot follow a redirect to the app's scheme: the app reads it from the Location.
            let target = try #require(request.url.query.map { request.url.path + "?" + $0 })
            let answer = try await RawHTTPClient.exchange(
                port: try #require(mock.baseURL.port),
                "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(answer.status == 302)
            let callback = try #require(answer.headers["location"].flatMap { URL(string: $0) })
            #expect(callback.scheme == "com.example.app")
            let code = try request.authorizationCode(from: callback, expectedIssuer: mock.issuer)
            let tokens = try await client.exchange(code: code, for: request)
            try Self.expectOneKeyBindsCodeAndTokens(mock, url: request.url, tokens: tokens)
        }
    }

    @Test func aManagerSignInThroughAProviderKeepsTheKeyItsCodeWasBoundTo() async throws {
        try await Self.withMock { mock in
            let client = mock.makeClient()
            let store = InMemoryCredentialStore()
            let manager = SessionManager(
                configuration: .init(
                    store: store, providers: [Provider(id: "mock", issuer: mock.issuer, client: client)]))
            let account = Account(issuer: mock.issuer, subject: "alice")
            try mock.approveNextAuthorization(as: "alice")
            let session = try await manager.signIn(through: "mock") { [account] in
                (account, try await client.authorizeInBrowser { url in _ = try await Self.browse(url) })
            }
            defer { session.end() }
            try Self.expectOneKeyBindsCodeAndTokens(mock, url: nil, tokens: session.tokens)
            let sent = try #require(mock.authorizationKeyThumbprints.first ?? nil)
            #expect(await store.load(for: account)?.proofKey == session.tokens?.proofKey)

            // The session's requests and refreshes prove the same key.
            let (body, _) = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            #expect(String(decoding: body, as: UTF8.self) == #"{"user":"alice"}"#)
            try await session.refreshTokens()
            #expect(mock.keyThumbprint(boundTo: try #require(session.tokens?.accessToken)) == sent)
            #expect(mock.dpopProofs.count == 3)
            #expect(mock.dpopProofs.allSatisfy { $0.isAccepted && $0.keyThumbprint == sent })
        }
    }

    @Test func anOpenIDSignInBindsTheCodeWhenDiscoveryListsES256() async throws {
        try await Self.withMock(openID: true) { mock in
            let provider = try Self.openIDProvider(mock)
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), providers: [Provider(id: "id", openID: provider)]))
            try mock.approveNextAuthorization(as: "alice")
            let opened = Locked<URL?>(nil)
            let session = try await manager.signIn(through: "id") {
                try await provider.authorizeInBrowser(scope: "profile") { url in
                    opened.withLock { $0 = url }
                    _ = try await Self.browse(url)
                }
            }
            defer { session.end() }
            #expect(session.account == Account(issuer: mock.issuer, subject: "alice"))
            #expect(try await provider.metadata().dpopSigningAlgorithms == ["ES256"])
            try Self.expectOneKeyBindsCodeAndTokens(mock, url: opened.withLock { $0 }, tokens: session.tokens)
        }
    }

    @Test func anAppDrivenOpenIDSignInBindsTheCodeWhenOnlyRFC8414MetadataListsES256() async throws {
        try await Self.withMock(openID: true) { mock in
            // No OpenID discovery document: the provider reads the RFC 8414 authorization server metadata.
            mock.failNext(.openIDConfiguration, with: .bareStatus(404))
            let provider = try Self.openIDProvider(mock)
            let request = try await provider.authorizationRequest(redirectURI: mock.callbackURL.absoluteString)
            #expect(mock.requests.contains { $0.path == "/.well-known/oauth-authorization-server" })
            try mock.approveNextAuthorization(as: "alice")
            let code = try request.authorizationCode(
                from: try await Self.browse(request.url), expectedIssuer: mock.issuer)
            let signIn = try await provider.signIn(code: code, for: request)
            try Self.expectOneKeyBindsCodeAndTokens(mock, url: request.url, tokens: signIn.tokens)
        }
    }

    // MARK: - When no dpop_jkt is sent

    @Test func aSignInWithoutDPoPSendsNoThumbprintAndNoProof() async throws {
        try await Self.withMock { mock in
            try mock.approveNextAuthorization(as: "alice")
            let tokens = try await mock.makeClient(usesDPoP: false).authorizeInBrowser { url in
                #expect(Self.dpopJKT(in: url) == nil)
                _ = try await Self.browse(url)
            }
            #expect(mock.authorizationKeyThumbprints == [nil])
            #expect(Self.exchangeProofs(mock) == [""])
            #expect(tokens.tokenType == "Bearer" && tokens.proofKey == nil)
        }
    }

    @Test func aHandConfiguredClientBindsTheCodeByDefaultAndCanLeaveItUnbound() async throws {
        let configuration = OAuthClient.Configuration(
            tokenEndpoint: try #require(URL(string: "https://id.example/token")), clientID: "app", usesDPoP: true)
        #expect(configuration.bindsAuthorizationCodeToDPoPKey)
        try await Self.withMock { mock in
            var unbinding = mock.makeClient().configuration
            unbinding.bindsAuthorizationCodeToDPoPKey = false
            let client = OAuthClient(configuration: unbinding)
            try mock.approveNextAuthorization(as: "alice")
            let tokens = try await client.authorizeInBrowser { url in
                #expect(Self.dpopJKT(in: url) == nil)
                _ = try await Self.browse(url)
            }
            #expect(mock.authorizationKeyThumbprints == [nil])
            // Still DPoP: the exchange proves a key and the tokens are bound to it.
            let proofs = Self.exchangeProofs(mock)
            try #require(proofs.count == 1)
            let key = try Self.thumbprint(ofJWK: Self.jwk(ofProof: proofs[0]))
            #expect(mock.keyThumbprint(boundTo: tokens.accessToken) == key)
            #expect(try Self.thumbprint(ofJWK: #require(tokens.proofKey).signingKey.publicJWK) == key)
        }
    }

    /// What a provider's metadata says in `dpop_signing_alg_values_supported`.
    enum Listing: String, CaseIterable, CustomTestStringConvertible {
        case absent, empty, otherAlgorithms, es256AmongOthers, aString, notStrings

        var value: JSONValue? {
            switch self {
            case .absent: nil
            case .empty: .array([])
            case .otherAlgorithms: .array([.string("RS256"), .string("PS256"), .string("es256")])
            case .es256AmongOthers: .array([.string("RS256"), .string("ES256")])
            case .aString: .string("ES256")
            case .notStrings: .array([.string("ES256"), .number(1)])
            }
        }

        /// Whether the provider takes ES256 proofs.
        var supportsES256: Bool { self == .es256AmongOthers }
        /// Whether the document is refused: the member is not an array of strings.
        var isMalformed: Bool { self == .aString || self == .notStrings }
        var testDescription: String { rawValue }
    }

    /// The rule: `dpop_jkt` goes only to a provider whose metadata lists ES256 (exactly; names are case-sensitive,
    /// RFC 7518 §3.1), and only when the sign-in uses DPoP (by the metadata, or configured on). A member that is not
    /// an array of strings makes the whole document `providerMetadataRejected`, before any authorization request.
    @Test(arguments: Listing.allCases, [nil, true] as [Bool?])
    func theMetadataDecidesWhetherTheCodeIsBound(_ listing: Listing, usesDPoP: Bool?) async throws {
        try await Self.withMock(openID: true) { mock in
            let browser = URLSession(configuration: .ephemeral)
            defer { browser.finishTasksAndInvalidate() }
            let (data, _) = try await browser.data(from: mock.openIDConfigurationURL)
            guard case .object(var members) = try JSONParser.parse(Array(data)) else {
                Issue.record("the discovery document is not an object")
                return
            }
            members["dpop_signing_alg_values_supported"] = listing.value
            let document = JSONValue.object(members).serialized
            mock.server.route("GET", "/.well-known/openid-configuration") { _ in .json(document) }
            let provider = try Self.openIDProvider(mock, usesDPoP: usesDPoP)
            // Approved in every case, so a sign-in that wrongly goes ahead ends at once rather than waiting.
            try mock.approveNextAuthorization(as: "alice")

            guard !listing.isMalformed else {
                let error = await #expect(throws: SessionError.self) {
                    try await provider.authorizeInBrowser { url in _ = try await Self.browse(url) }
                }
                #expect(error?.code == .providerMetadataRejected)
                #expect(mock.authorizationKeyThumbprints.isEmpty, "no authorization request was sent")
                return
            }
            let signIn = try await provider.authorizeInBrowser { url in _ = try await Self.browse(url) }
            let usesDPoP = usesDPoP ?? listing.supportsES256
            if usesDPoP && listing.supportsES256 {
                try Self.expectOneKeyBindsCodeAndTokens(mock, url: nil, tokens: signIn.tokens)
            } else {
                #expect(mock.authorizationKeyThumbprints == [nil])
                let proofs = Self.exchangeProofs(mock)
                #expect(proofs.count == 1)
                #expect(proofs.allSatisfy { !$0.isEmpty } == usesDPoP, "a proof exactly when the sign-in uses DPoP")
            }
        }
    }

    @Test func dpopJKTCannotBeAnAdditionalParameter() async throws {
        try await Self.withMock { mock in
            let error = #expect(throws: SessionError.self) {
                try mock.makeClient().authorizationRequest(
                    redirectURI: mock.callbackURL.absoluteString, additionalParameters: ["dpop_jkt": "someone-elses"])
            }
            #expect(error?.code == .invalidInput)
            #expect(AuthorizationRequest.reservedParameterNames.contains("dpop_jkt"))
        }
    }

    // MARK: - The mock's side of RFC 9449 §10

    /// A code bound to a DPoP key by a request of `mock`'s DPoP client.
    static func boundCode(_ mock: MockAuthorizationServer) async throws -> AuthorizationRequest {
        let request = try mock.makeClient().authorizationRequest(redirectURI: mock.callbackURL.absoluteString)
        try mock.approveNextAuthorization(as: "alice")
        return request
    }

    @Test func theMockRefusesToExchangeABoundCodeWithAProofOfAnotherKey() async throws {
        try await Self.withMock { mock in
            let request = try await Self.boundCode(mock)
            let code = try request.authorizationCode(from: try await Self.browse(request.url))
            let error = await #expect(throws: SessionError.self) {
                try await mock.makeClient().exchange(
                    code: code, pkce: request.pkce, redirectURI: request.redirectURI, proofKey: DPoPKey.generate())
            }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.oauthError == "invalid_dpop_proof")
            #expect(mock.dpopProofs.last?.refusal == .anotherKey)
            #expect(mock.accessTokens(issuedTo: "alice").isEmpty)
        }
    }

    @Test func theMockRefusesToExchangeABoundCodeWithoutAProof() async throws {
        try await Self.withMock { mock in
            let request = try await Self.boundCode(mock)
            let code = try request.authorizationCode(from: try await Self.browse(request.url))
            let error = await #expect(throws: SessionError.self) {
                try await mock.makeClient(usesDPoP: false).exchange(
                    code: code, pkce: request.pkce, redirectURI: request.redirectURI)
            }
            #expect(error?.oauthError == "invalid_dpop_proof")
            #expect(mock.accessTokens(issuedTo: "alice").isEmpty)
        }
    }

    @Test func theMockExchangesAnUnboundCodeWithAnyKey() async throws {
        try await Self.withMock { mock in
            var configuration = mock.makeClient().configuration
            configuration.bindsAuthorizationCodeToDPoPKey = false
            let client = OAuthClient(configuration: configuration)
            let request = try client.authorizationRequest(redirectURI: mock.callbackURL.absoluteString)
            try mock.approveNextAuthorization(as: "alice")
            let code = try request.authorizationCode(from: try await Self.browse(request.url))
            let other = try DPoPKey.generate()
            let tokens = try await client.exchange(
                code: code, pkce: request.pkce, redirectURI: request.redirectURI, proofKey: other)
            #expect(mock.keyThumbprint(boundTo: tokens.accessToken) == other.thumbprint)
        }
    }

    // MARK: - A JOSE library's thumbprint

    @Test func jwcryptoComputesTheThumbprintTheRequestSentFromTheExchangesProof() async throws {
        guard PythonTools.available("DPoPCodeBindingTests") else { return }
        try await Self.withMock { mock in
            try mock.approveNextAuthorization(as: "alice")
            let tokens = try await mock.makeClient().authorizeInBrowser { url in _ = try await Self.browse(url) }
            let sent = try #require(mock.authorizationKeyThumbprints.first ?? nil)
            let proof = try #require(Self.exchangeProofs(mock).first)
            let verified = try #require(try PythonTools.verify([(proof, try Self.jwk(ofProof: proof))]).first)
            #expect(verified.valid, "jwcrypto verifies the exchange's proof with the key in its header")
            #expect(verified.jkt == sent)
            let key = try #require(tokens.proofKey)
            #expect(try PythonTools.verify([(proof, key.signingKey.publicJWK)]).first?.jkt == sent)
        }
    }
}
