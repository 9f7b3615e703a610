import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where an `OpenIDProvider` revokes (issue 47): the configuration's revocation endpoint wins; else the discovery
/// document's; else the one the provider's RFC 8414 authorization server metadata names (django-oauth-toolkit names
/// it only there); and with none anywhere, sign-out says "this provider has no revocation endpoint"
/// (`noEndpoint`), never an input error. A metadata document that cannot be read is a failure, not "none". (The
/// same against django-oauth-toolkit: `OpenIDConnectIntegrationTests`.)
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct OpenIDRevocationTests {
    typealias Listing = MockAuthorizationServer.RevocationEndpointListing
    static let clientID = MockOpenIDProviderTests.clientID

    /// Runs `body` with an OpenID mock listing its revocation endpoint as `listing`, that knows alice, and a provider
    /// client of it.
    static func withMock<T>(
        listing: Listing, revocationEndpoint: URL? = nil,
        _ body: (MockAuthorizationServer, OpenIDProvider) async throws -> T
    ) async throws -> T {
        try await MockAuthorizationServer.withRunning(
            configuration: .init(clientID: clientID, openID: true, revocationEndpointListing: listing)
        ) { mock in
            try mock.addUser("alice")
            let provider = OpenIDProvider(
                configuration: .init(
                    issuer: try #require(URL(string: mock.issuer)), clientID: clientID,
                    validation: IDTokenValidation(algorithms: [.es256]), revocationEndpoint: revocationEndpoint))
            return try await body(mock, provider)
        }
    }

    /// The form of each revocation request `requests` holds.
    static func revocations(in requests: [RecordedRequest], path: String = "/revoke") -> [[String: String]] {
        requests.filter { $0.method == "POST" && $0.path == path }.map { request in
            var components = URLComponents()
            components.percentEncodedQuery = request.bodyText
            return Dictionary(
                (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first }
            )
        }
    }

    /// Signs alice in through a manager whose provider is `provider`, then signs her out with `options`.
    static func signInAndOut(
        _ mock: MockAuthorizationServer, _ provider: OpenIDProvider, options: SignOutOptions
    ) async throws -> (signIn: OpenIDSignIn, report: SignOutReport) {
        let signIn = try await MockOpenIDProviderTests.signIn(mock, provider, as: "alice")
        let manager = SessionManager(
            configuration: .init(store: InMemoryCredentialStore(), providers: [Provider(id: "mock", openID: provider)]))
        try await manager.signIn(through: "mock") { signIn }
        return (signIn, try #require(await manager.signOut(options: options)))
    }

    // MARK: - The RFC 8414 metadata, where discovery names none

    @Test(arguments: [false, true])
    func signOutRevokesAtTheEndpointTheRFC8414MetadataNames(providerLogout: Bool) async throws {
        try await Self.withMock(listing: .authorizationServerMetadataOnly) { mock, provider in
            #expect(try await provider.metadata().revocationEndpoint == nil, "discovery names none")
            let options = SignOutOptions(
                serverSteps: [.revokeRefreshToken]
                    + (providerLogout
                        ? [
                            .openID(
                                .calling(provider, postLogoutRedirectURI: MockOpenIDProviderTests.postLogoutRedirectURI)
                            )
                        ]
                        : []))
            let (signIn, report) = try await Self.signInAndOut(mock, provider, options: options)
            let refreshToken = try #require(signIn.tokens.refreshToken)

            #expect(report.refreshTokenRevocation == .succeeded, "\(report)")
            #expect(report.providerLogout == (providerLogout ? .succeeded : .notRequested))
            // Its own request, whether or not the provider's sign-out ended the grant too.
            let revocations = Self.revocations(in: mock.requests)
            #expect(revocations.count == 1)
            #expect(revocations.first?["token"] == refreshToken)
            #expect(revocations.first?["token_type_hint"] == "refresh_token")
            #expect(!mock.isActive(token: refreshToken))
        }
    }

    @Test func anUnreadableRFC8414DocumentIsAFailureNotNoEndpointAndIsReadAgainNextTime() async throws {
        try await Self.withMock(listing: .authorizationServerMetadataOnly) { mock, provider in
            let tokens = try mock.issueTokens(for: "alice", scope: "openid")
            let refreshToken = try #require(tokens.refreshToken)
            mock.failNext(.authorizationServerMetadata, with: .serviceUnavailable(retryAfter: nil))
            let error = await #expect(throws: SessionError.self) {
                try await provider.revoke(refreshToken, hint: .refreshToken)
            }
            #expect(error?.code == .providerOutage)
            #expect(mock.revocationRequestCount == 0)

            // The outage was not remembered as "no endpoint": the next revocation reads the document and revokes.
            try await provider.revoke(refreshToken, hint: .refreshToken)
            #expect(mock.revocationRequestCount == 1)
            #expect(!mock.isActive(token: refreshToken))
        }
    }

    // MARK: - The app's own endpoint

    @Test(arguments: Listing.allCases)
    func anEndpointTheAppNamesWinsOverTheMetadata(listing: Listing) async throws {
        try await LocalServer.withRunning { own in
            own.route("POST", "/own-revoke") { _ in .status(200) }
            try await Self.withMock(listing: listing, revocationEndpoint: own.url("/own-revoke")) { mock, provider in
                let (signIn, report) = try await Self.signInAndOut(mock, provider, options: SignOutOptions())

                #expect(report.refreshTokenRevocation == .succeeded, "\(report)")
                let revocations = Self.revocations(in: own.requests, path: "/own-revoke")
                #expect(revocations.count == 1)
                #expect(revocations.first?["token"] == signIn.tokens.refreshToken)
                #expect(mock.revocationRequestCount == 0, "the metadata's endpoint is not used")
            }
        }
    }

    // MARK: - None at all

    @Test func withNoRevocationEndpointAnywhereSignOutSaysSoAndSendsNothing() async throws {
        try await Self.withMock(listing: .nowhere) { mock, provider in
            let options = SignOutOptions(serverSteps: [.revokeRefreshToken, .revokeAccessToken])
            let (signIn, report) = try await Self.signInAndOut(mock, provider, options: options)

            #expect(report.refreshTokenRevocation == .noEndpoint, "\(report)")
            #expect(report.accessTokenRevocation == .noEndpoint, "\(report)")
            #expect("\(report)".contains("refresh-token revocation not sent: the provider has no revocation endpoint"))
            #expect(mock.revocationRequestCount == 0)
            #expect(mock.isActive(token: signIn.tokens.refreshToken ?? ""), "nothing revoked it")
            // The local sign-out is whole all the same.
            #expect(report.isPurgeComplete)
            #expect(report.credentialDeletion == .succeeded)

            let error = await #expect(throws: SessionError.self) {
                try await provider.revoke(signIn.tokens.refreshToken ?? "", hint: .refreshToken)
            }
            #expect(error?.code == .noRevocationEndpoint)
        }
    }

    @Test func anOAuthClientWithoutARevocationEndpointIsNoEndpointToo() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            var configuration = mock.makeClient().configuration
            configuration.revocationEndpoint = nil
            let client = OAuthClient(configuration: configuration)
            let manager = SessionManager(
                configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: client, revoker: client))
            try await manager.signIn(alice, tokens: try mock.issueTokens(for: "alice"))
            let report = try #require(await manager.signOut())
            #expect(report.refreshTokenRevocation == .noEndpoint, "\(report)")
            #expect(mock.revocationRequestCount == 0)
        }
    }

    // MARK: - Where the RFC 8414 document is

    /// A provider at `<server>/tenant` whose discovery document names no revocation endpoint, with an RFC 8414
    /// document at each of `documents` (path and the revocation endpoint's path it names) and `issuer` in them.
    static func serveTenant(_ server: LocalServer, documents: [(path: String, revoke: String)], issuer: String? = nil) {
        let tenant = server.url("/tenant").absoluteString
        server.route("GET", "/tenant/.well-known/openid-configuration") { _ in
            let document: [String: JSONValue] = [
                "issuer": .string(tenant),
                "token_endpoint": .string(server.url("/token").absoluteString),
                "jwks_uri": .string(server.url("/jwks").absoluteString),
            ]
            return .json(JSONValue.object(document).serialized)
        }
        for (path, revoke) in documents {
            server.route("GET", path) { _ in
                let document: [String: JSONValue] = [
                    "issuer": .string(issuer ?? tenant),
                    "token_endpoint": .string(server.url("/token").absoluteString),
                    "revocation_endpoint": .string(server.url(revoke).absoluteString),
                ]
                return .json(JSONValue.object(document).serialized)
            }
        }
        for revoke in Set(documents.map(\.revoke)) { server.route("POST", revoke) { _ in .status(200) } }
    }

    static func tenantProvider(_ server: LocalServer) -> OpenIDProvider {
        OpenIDProvider(configuration: .init(issuer: server.url("/tenant"), clientID: "my-app"))
    }

    @Test func theDocumentIsReadWhereRFC8414PutsItBeforeTheIssuersPath() async throws {
        try await LocalServer.withRunning { server in
            Self.serveTenant(
                server,
                documents: [
                    ("/.well-known/oauth-authorization-server/tenant", "/revoke-rfc8414"),
                    ("/tenant/.well-known/oauth-authorization-server", "/revoke-appended"),
                ])
            try await Self.tenantProvider(server).revoke("rt-1", hint: .refreshToken)
            #expect(Self.revocations(in: server.requests, path: "/revoke-rfc8414").map { $0["token"] } == ["rt-1"])
            #expect(Self.revocations(in: server.requests, path: "/revoke-appended").isEmpty)
        }
    }

    @Test func aServerMountedUnderThePathServesItAppendedToTheIssuer() async throws {
        try await LocalServer.withRunning { server in
            // django-oauth-toolkit under /o/ answers there only.
            Self.serveTenant(server, documents: [("/tenant/.well-known/oauth-authorization-server", "/revoke")])
            try await Self.tenantProvider(server).revoke("rt-1", hint: .refreshToken)
            #expect(Self.revocations(in: server.requests).map { $0["token"] } == ["rt-1"])
        }
    }

    @Test func aDocumentNamingAnotherIssuerIsRefusedAndNothingIsSent() async throws {
        try await LocalServer.withRunning { server in
            Self.serveTenant(
                server, documents: [("/.well-known/oauth-authorization-server/tenant", "/revoke")],
                issuer: "https://elsewhere.example")
            let error = await #expect(throws: SessionError.self) {
                try await Self.tenantProvider(server).revoke("rt-1", hint: .refreshToken)
            }
            #expect(error?.code == .providerMetadataRejected)
            #expect(Self.revocations(in: server.requests).isEmpty)
        }
    }
}
