import Foundation
import SessionKit
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A confidential client (`client_secret_basic`, `client_secret_post`) and RFC 8707 resource indicators against
/// django-oauth-toolkit: the confidential clients of Tests/AuthorizationServer/authserver/bootstrap.py, and the
/// request log's `client_auth`, `resource` and `audience` (Tests/AuthorizationServer/README.md).
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: run scripts/test, which starts django-oauth-toolkit on loopback"
    )
)
struct ConfidentialClientIntegrationTests {
    typealias Fixture = AuthorizationServerFixture

    static let passwordClientID = "confidential-client"
    static let codeClientID = "confidential-code-client"
    static let deviceClientID = "confidential-device-client"
    static let secret = "confidential-secret"
    static let awkwardClientID = "awkward client:+é"
    static let awkwardSecret = "s3:cr+t é/%=&☃"

    enum Method: String, CaseIterable, Sendable {
        case basic, post

        func authentication(_ secret: String = ConfidentialClientIntegrationTests.secret) -> ClientAuthentication {
            self == .basic ? .clientSecretBasic(secret) : .clientSecretPost(secret)
        }
    }

    static func client(
        _ server: Fixture, clientID: String = passwordClientID, _ authentication: ClientAuthentication,
        resources: [URL] = [], audience: String? = nil
    ) -> OAuthClient {
        OAuthClient(
            configuration: .init(
                tokenEndpoint: server.url("/o/token/"), revocationEndpoint: server.url("/o/revoke_token/"),
                deviceAuthorizationEndpoint: server.url("/o/device-authorization/"),
                authorizationEndpoint: server.url("/o/authorize/"), clientID: clientID,
                clientAuthentication: authentication, resources: resources, audience: audience))
    }

    /// A request log entry, with the fields this suite reads.
    struct Entry: Decodable {
        let path: String
        let grantType: String?
        let clientID: String?
        let clientAuth: String?
        let resource: [String]?
        let audience: String?

        private enum CodingKeys: String, CodingKey {
            case path, resource, audience
            case grantType = "grant_type"
            case clientID = "client_id"
            case clientAuth = "client_auth"
        }
    }

    static func log(_ server: Fixture, username: String? = nil) async throws -> [Entry] {
        let query = username.map { "?username=\($0)" } ?? ""
        let response = try await server.send(URLRequest(url: server.url("/test/log" + query)))
        #expect(response.status == 200)
        return try JSONDecoder().decode([Entry].self, from: response.body)
    }

    /// RFC 7662 introspection of `token` as the introspection client: DOT reports a token's RFC 8707 resources as
    /// `aud`.
    static func introspect(_ server: Fixture, _ token: String) async throws -> [String: Any] {
        var request = URLRequest(url: server.url("/o/introspect/"))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        let credentials = Data("introspection-client:introspection-secret".utf8).base64EncodedString()
        request.setValue("Basic \(credentials)", forHTTPHeaderField: "Authorization")
        request.httpBody = Data("token=\(token)".utf8)
        let response = try await server.send(request)
        return try #require(response.json)
    }

    // MARK: - Authentication

    @Test(arguments: Method.allCases)
    func aConfidentialClientGetsRefreshesAndRevokes(method: Method) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server, method.authentication())

        let tokens = try await oauth.password(username: user.username, password: user.password)
        #expect(try await server.me(accessToken: tokens.accessToken).status == 200)
        let renewed = try await oauth.refresh(using: try #require(tokens.refreshToken))
        let refresh = try #require(renewed.refreshToken)
        try await oauth.revoke(refresh, hint: .refreshToken)

        // The revocation really revoked: the refresh token is now invalid_grant, its access token 401.
        let error = await #expect(throws: SessionError.self) { try await oauth.refresh(using: refresh) }
        #expect(error?.code == .refreshRejected)
        #expect(error?.oauthError == "invalid_grant")
        #expect(try await server.me(accessToken: renewed.accessToken).status == 401)

        let entries = try await Self.log(server, username: user.username).filter { !$0.path.hasPrefix("/api/") }
        #expect(entries.map(\.path) == ["/o/token/", "/o/token/", "/o/revoke_token/", "/o/token/"])
        #expect(entries.allSatisfy { $0.clientAuth == method.rawValue }, "\(entries.map(\.clientAuth))")
        // With Basic the header names the client and the body does not (RFC 6749 §2.3.1); DOT accepts that.
        #expect(entries.allSatisfy { $0.clientID == (method == .basic ? nil : Self.passwordClientID) })
    }

    @Test(arguments: Method.allCases)
    func aWrongSecretIsAuthorizationFailedAndNeverQuoted(method: Method) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let wrong = "wrong-secret-\(UUID().uuidString)"
        let oauth = Self.client(server, method.authentication(wrong))
        let error = await #expect(throws: SessionError.self) {
            try await oauth.password(username: user.username, password: user.password)
        }
        // invalid_client is the client's configuration, not the user's grant: authorizationFailed, never
        // refreshRejected (which would sign the user out).
        #expect(error?.code == .authorizationFailed)
        #expect(error?.oauthError == "invalid_client")
        #expect(error?.statusCode == 401)
        let text = "\(String(describing: error)) \(error?.message ?? "")"
        #expect(!text.contains(wrong))

        // Refresh and revocation are refused the same way, and the revocation revoked nothing.
        let tokens = try await Self.client(server, method.authentication())
            .password(username: user.username, password: user.password)
        let refresh = try #require(tokens.refreshToken)
        let refreshError = await #expect(throws: SessionError.self) { try await oauth.refresh(using: refresh) }
        #expect(refreshError?.code == .authorizationFailed && refreshError?.oauthError == "invalid_client")
        let revokeError = await #expect(throws: SessionError.self) {
            try await oauth.revoke(refresh, hint: .refreshToken)
        }
        #expect(revokeError?.code == .authorizationFailed && revokeError?.oauthError == "invalid_client")
        let revokeText = String(describing: revokeError)
        #expect(!revokeText.contains(wrong))
        #expect(try await server.me(accessToken: tokens.accessToken).status == 200)
    }

    @Test func withoutAuthenticationTheConfidentialClientIsRefused() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let unauthenticated = Self.client(server, .none)
        let error = await #expect(throws: SessionError.self) {
            try await unauthenticated.password(username: user.username, password: user.password)
        }
        #expect(error?.code == .authorizationFailed && error?.oauthError == "invalid_client")

        let tokens = try await Self.client(server, .clientSecretBasic(Self.secret))
            .password(username: user.username, password: user.password)
        let refresh = try #require(tokens.refreshToken)
        let revokeError = await #expect(throws: SessionError.self) {
            try await unauthenticated.revoke(refresh, hint: .refreshToken)
        }
        #expect(revokeError?.oauthError == "invalid_client")
        let refreshError = await #expect(throws: SessionError.self) {
            try await unauthenticated.refresh(using: refresh)
        }
        #expect(refreshError?.oauthError == "invalid_client")
        #expect(try await server.me(accessToken: tokens.accessToken).status == 200, "nothing was revoked")

        let device = Self.client(server, clientID: Self.deviceClientID, .none)
        let deviceError = await #expect(throws: SessionError.self) { try await device.startDeviceAuthorization() }
        #expect(deviceError?.code == .authorizationFailed && deviceError?.oauthError == "invalid_client")
    }

    /// RFC 6749 §2.3.1: the client ID and secret are form-urlencoded before Basic joins them; DOT decodes them so.
    @Test(arguments: Method.allCases)
    func anIDAndSecretWithColonPlusSpaceAndNonASCIIAuthenticate(method: Method) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let oauth = Self.client(server, clientID: Self.awkwardClientID, method.authentication(Self.awkwardSecret))
        let tokens = try await oauth.password(username: user.username, password: user.password)
        let renewed = try await oauth.refresh(using: try #require(tokens.refreshToken))
        try await oauth.revoke(try #require(renewed.refreshToken), hint: .refreshToken)
        #expect(try await server.me(accessToken: renewed.accessToken).status == 401)
    }

    @Test(arguments: Method.allCases)
    func theAuthorizationCodeGrantWithResources(method: Method) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let api = server.url("/api/")
        let oauth = Self.client(server, clientID: Self.codeClientID, method.authentication(), resources: [api])
        let authorization = try oauth.authorizationRequest(redirectURI: Fixture.redirectURI.absoluteString)
        #expect(!authorization.url.absoluteString.contains(Self.secret))

        // The browser's part: a signed-in user, and the authorization endpoint's redirect.
        var login = URLRequest(url: server.url("/test/login"))
        login.httpMethod = "POST"
        login.setValue("application/json", forHTTPHeaderField: "Content-Type")
        login.httpBody = try JSONSerialization.data(withJSONObject: ["username": user.username])
        let cookie = try #require(try await server.send(login).string("cookie"))
        var browse = URLRequest(url: authorization.url)
        browse.httpShouldHandleCookies = false
        browse.setValue(cookie, forHTTPHeaderField: "Cookie")
        let redirect = try await server.send(browse)
        #expect(redirect.status == 302)
        let callback = try #require(redirect.header("Location").flatMap(URL.init(string:)))
        let code = try authorization.authorizationCode(from: callback)

        let tokens = try await oauth.exchange(code: code, for: authorization)
        #expect(try await Self.introspect(server, tokens.accessToken)["aud"] as? [String] == [api.absoluteString])
        #expect(try await server.me(accessToken: tokens.accessToken).status == 200)
        let renewed = try await oauth.refresh(using: try #require(tokens.refreshToken))
        #expect(try await Self.introspect(server, renewed.accessToken)["aud"] as? [String] == [api.absoluteString])

        let entries = try await Self.log(server, username: user.username).filter { $0.path == "/o/token/" }
        #expect(entries.map(\.grantType) == ["authorization_code", "refresh_token"])
        #expect(entries.allSatisfy { $0.clientAuth == method.rawValue && $0.resource == [api.absoluteString] })
    }

    @Test(arguments: Method.allCases)
    func theDeviceGrantAuthenticatesBothRequests(method: Method) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let api = server.url("/api/")
        let oauth = Self.client(server, clientID: Self.deviceClientID, method.authentication(), resources: [api])
        let device = try await oauth.startDeviceAuthorization()
        let polling = Task { try await oauth.pollDeviceAuthorization(device) }
        try await server.approveDevice(userCode: device.userCode, username: user.username)
        let tokens = try await polling.value
        #expect(try await Self.introspect(server, tokens.accessToken)["aud"] as? [String] == [api.absoluteString])

        let polls = try await Self.log(server, username: user.username).filter { $0.path == "/o/token/" }
        #expect(polls.last?.clientAuth == method.rawValue)
        let starts = try await Self.log(server).filter {
            $0.path == "/o/device-authorization/" && $0.clientID == Self.deviceClientID
        }
        #expect(starts.contains { $0.clientAuth == method.rawValue && $0.resource == [api.absoluteString] })
    }

    // MARK: - RFC 8707 on django-oauth-toolkit

    @Test func resourcesBecomeTheTokensAudienceAndTheAPIEnforcesIt() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let api = server.url("/api/")
        let other = URL(string: "https://b.example/x?q=1")!
        let oauth = Self.client(server, .clientSecretBasic(Self.secret), resources: [api, other], audience: "ignored")
        let tokens = try await oauth.password(username: user.username, password: user.password)
        let introspection = try await Self.introspect(server, tokens.accessToken)
        #expect(introspection["aud"] as? [String] == [api.absoluteString, other.absoluteString])
        #expect(try await server.me(accessToken: tokens.accessToken).status == 200)

        // A refresh that sends the same resources keeps them.
        let renewed = try await oauth.refresh(using: try #require(tokens.refreshToken))
        #expect(
            try await Self.introspect(server, renewed.accessToken)["aud"] as? [String] == introspection["aud"]
                as? [String])

        // A refresh that asks for a resource beyond the grant's is refused: invalid_target.
        let beyond = Self.client(
            server, .clientSecretBasic(Self.secret), resources: [URL(string: "https://c.example/")!])
        let error = await #expect(throws: SessionError.self) {
            try await beyond.refresh(using: try #require(renewed.refreshToken))
        }
        #expect(error?.code == .authorizationFailed && error?.oauthError == "invalid_target")

        // A token for another resource server is refused by this one.
        let elsewhere = try await Self.client(
            server, .clientSecretPost(Self.secret), resources: [URL(string: "https://other.example/")!]
        )
        .password(username: user.username, password: user.password)
        let refused = try await server.me(accessToken: elsewhere.accessToken)
        #expect(refused.status == 401)
        #expect(refused.header("WWW-Authenticate")?.contains("not valid for this resource") == true)

        let entries = try await Self.log(server, username: user.username).filter { $0.path == "/o/token/" }
        #expect(entries.first?.resource == [api.absoluteString, other.absoluteString])
        #expect(entries.first?.audience == "ignored")
    }

    @Test func theAudienceParameterIsIgnoredAndAURNResourceRefused() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let audienceOnly = Self.client(server, .clientSecretPost(Self.secret), audience: "https://api.example/")
        let tokens = try await audienceOnly.password(username: user.username, password: user.password)
        #expect(try await Self.introspect(server, tokens.accessToken)["aud"] == nil)

        // RFC 8707 allows any absolute URI; DOT wants a host too.
        let urn = Self.client(server, .clientSecretPost(Self.secret), resources: [URL(string: "urn:example:api")!])
        let error = await #expect(throws: SessionError.self) {
            try await urn.password(username: user.username, password: user.password)
        }
        #expect(error?.code == .authorizationFailed && error?.oauthError == "invalid_target")
    }
}
