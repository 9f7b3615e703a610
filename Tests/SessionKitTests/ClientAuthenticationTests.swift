import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a confidential client sends, read back from a real loopback server: the client authentication of RFC 6749
/// §2.3.1 on every grant, revocation and device authorization, the RFC 8707 `resource` and `audience` parameters,
/// and the secret's absence from every description, dump and error.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ClientAuthenticationTests {
    static let secret = "SECRET-7f3a9c+/=é"
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    /// The authentication methods, by name.
    enum Method: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case none, basic, post

        var authentication: ClientAuthentication {
            switch self {
            case .none: .none
            case .basic: .clientSecretBasic(ClientAuthenticationTests.secret)
            case .post: .clientSecretPost(ClientAuthenticationTests.secret)
            }
        }

        var testDescription: String { rawValue }
    }

    /// Every request an `OAuthClient` sends to the authorization server.
    enum Operation: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case refresh, codeExchange, password, devicePoll, revocation, deviceAuthorization

        var path: String {
            switch self {
            case .revocation: "/revoke"
            case .deviceAuthorization: "/device"
            default: "/token"
            }
        }

        /// Whether RFC 8707 parameters belong on it (revocation takes none).
        var carriesIndicators: Bool { self != .revocation }

        var testDescription: String { rawValue }
    }

    static let tokenJSON =
        #"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-2","scope":"read"}"#
    static let deviceJSON =
        #"{"device_code":"dc-1","user_code":"WDJB-MJHT","verification_uri":"https://id.example/device","#
        + #""expires_in":600,"interval":1}"#

    /// A server that answers the token, revocation and device authorization endpoints successfully.
    static func withServer(_ body: (LocalServer) async throws -> Void) async throws {
        try await LocalServer.withRunning { server in
            server.route("POST", "/token") { _ in .json(Self.tokenJSON) }
            server.route("POST", "/revoke") { _ in .text("") }
            server.route("POST", "/device") { _ in .json(Self.deviceJSON) }
            try await body(server)
        }
    }

    static func client(
        _ server: LocalServer, clientID: String = "backend", _ authentication: ClientAuthentication,
        resources: [URL] = [], audience: String? = nil, clock: (any SessionClock)? = nil
    ) -> OAuthClient {
        OAuthClient(
            configuration: .init(
                tokenEndpoint: server.url("/token"), revocationEndpoint: server.url("/revoke"),
                deviceAuthorizationEndpoint: server.url("/device"),
                authorizationEndpoint: URL(string: "https://id.example/authorize")!, clientID: clientID,
                clientAuthentication: authentication, resources: resources, audience: audience, clock: clock))
    }

    /// Runs `operation` on `client`.
    static func perform(_ operation: Operation, on client: OAuthClient) async throws {
        switch operation {
        case .refresh:
            _ = try await client.refresh(using: "rt-1")
        case .codeExchange:
            _ = try await client.exchange(code: "code-1", pkce: PKCE(verifier: verifier), redirectURI: "app:/cb")
        case .password:
            _ = try await client.password(username: "alice", password: "pw")
        case .devicePoll:
            let authorization = DeviceAuthorizationResponse(
                deviceCode: "dc-1", userCode: "U", verificationURI: URL(string: "https://id.example/d")!,
                expiresIn: .seconds(600), interval: .zero)
            _ = try await client.pollDeviceAuthorization(authorization)
        case .revocation:
            try await client.revoke("rt-1", hint: .refreshToken)
        case .deviceAuthorization:
            _ = try await client.startDeviceAuthorization(scope: "read")
        }
    }

    static func form(_ request: RecordedRequest) -> [(String, String)] {
        OAuthTestSupport.decodeForm(request.bodyText)
    }

    static func values(_ name: String, in request: RecordedRequest) -> [String] {
        form(request).filter { $0.0 == name }.map(\.1)
    }

    /// The client ID and secret an `Authorization: Basic` header carries, decoded as RFC 6749 §2.3.1 says a server
    /// must: base64, split at the first `:`, then each side form-urlencoded-decoded.
    static func basicCredentials(_ request: RecordedRequest) -> (id: String, secret: String)? {
        guard let header = request.header("Authorization"), header.hasPrefix("Basic "),
            let data = Data(base64Encoded: String(header.dropFirst(6))),
            let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        func decode(_ part: Substring) -> String {
            part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "<invalid>"
        }
        return (decode(text[..<colon]), decode(text[text.index(after: colon)...]))
    }

    // MARK: - The wire form

    @Test(arguments: Method.allCases, Operation.allCases)
    func everyRequestAuthenticatesAsConfigured(method: Method, operation: Operation) async throws {
        try await Self.withServer { server in
            try await Self.perform(operation, on: Self.client(server, method.authentication))
            let request = try #require(server.requests.last)
            #expect(request.path == operation.path)
            let clientIDs = Self.values("client_id", in: request)
            let secrets = Self.values("client_secret", in: request)
            switch method {
            case .none:
                #expect(request.header("Authorization") == nil)
                #expect(clientIDs == ["backend"] && secrets.isEmpty)
            case .basic:
                let credentials = try #require(Self.basicCredentials(request), "an Authorization: Basic header")
                #expect(credentials.id == "backend" && credentials.secret == Self.secret)
                #expect(secrets.isEmpty, "one authentication method per request (RFC 6749 §2.3.1)")
                // The header names the client; only the device authorization request repeats it.
                #expect(clientIDs == (operation == .deviceAuthorization ? ["backend"] : []))
            case .post:
                #expect(request.header("Authorization") == nil)
                #expect(clientIDs == ["backend"] && secrets == [Self.secret])
            }
        }
    }

    @Test(arguments: [
        ("a:b", "c+d e", "Basic " + Data("a%3Ab:c%2Bd+e".utf8).base64EncodedString()),
        ("client", "p%w=1&x", "Basic " + Data("client:p%25w%3D1%26x".utf8).base64EncodedString()),
        ("é", "☃", "Basic " + Data("%C3%A9:%E2%98%83".utf8).base64EncodedString()),
    ])
    func basicFormEncodesTheIDAndTheSecretBeforeBase64(clientID: String, secret: String, header: String) async throws {
        try await Self.withServer { server in
            _ = try await Self.client(server, clientID: clientID, .clientSecretBasic(secret)).refresh(using: "rt")
            let request = try #require(server.requests.last)
            #expect(request.header("Authorization") == header)
            let credentials = try #require(Self.basicCredentials(request))
            #expect(credentials.id == clientID && credentials.secret == secret)
        }
    }

    @Test func aColonInTheClientIDNeverSplitsTheCredentials() async throws {
        let clientID = "tenant:app + ü"
        let secret = "s:e:c r+e%t"
        try await Self.withServer { server in
            for operation in Operation.allCases {
                try await Self.perform(
                    operation, on: Self.client(server, clientID: clientID, .clientSecretBasic(secret)))
            }
            #expect(server.requests.count == Operation.allCases.count)
            for request in server.requests {
                let header = try #require(request.header("Authorization"))
                let decoded = try #require(Data(base64Encoded: String(header.dropFirst(6))))
                #expect(String(decoding: decoded, as: UTF8.self).filter { $0 == ":" }.count == 1)
                let credentials = try #require(Self.basicCredentials(request))
                #expect(credentials.id == clientID && credentials.secret == secret)
            }
        }
    }

    @Test(arguments: [ClientAuthentication.clientSecretBasic(""), .clientSecretPost("")], Operation.allCases)
    func anEmptySecretIsInvalidInputAndSendsNothing(
        authentication: ClientAuthentication, operation: Operation
    ) async throws {
        try await Self.withServer { server in
            let error = await #expect(throws: SessionError.self) {
                try await Self.perform(operation, on: Self.client(server, authentication))
            }
            #expect(error?.code == .invalidInput)
            #expect(server.requests.isEmpty)
        }
    }

    @Test func theSecretIsNeverInTheAuthorizationURL() async throws {
        try await Self.withServer { server in
            for method in Method.allCases {
                let request = try Self.client(server, method.authentication).authorizationRequest(
                    redirectURI: "app:/cb")
                let query = try #require(request.url.query)
                #expect(!query.contains("client_secret"))
                #expect(!request.url.absoluteString.contains("SECRET"))
                #expect(request.url.absoluteString.contains("client_id=backend"))
            }
        }
    }

    // MARK: - Redirects

    @Test(arguments: [Operation.refresh, .revocation, .deviceAuthorization])
    func aRedirectNeverCarriesTheSecretAnywhere(operation: Operation) async throws {
        try await LocalServer.withRunning { elsewhere in
            elsewhere.route("/token") { _ in .json(Self.tokenJSON) }
            try await LocalServer.withRunning { server in
                let target = elsewhere.url("/token").absoluteString
                for path in ["/token", "/revoke", "/device"] {
                    server.route(path) { _ in LocalServer.Response(status: 307, headers: [("Location", target)]) }
                }
                for method in [Method.basic, .post] {
                    await #expect(throws: SessionError.self) {
                        try await Self.perform(operation, on: Self.client(server, method.authentication))
                    }
                }
                #expect(server.requests.count == 2)
                #expect(elsewhere.requests.isEmpty, "the redirect target received nothing")
            }
        }
    }

    // MARK: - Redaction

    @Test(arguments: [Method.basic, .post])
    func theSecretIsInNoDescriptionOrDump(method: Method) throws {
        let authentication = method.authentication
        let configuration = OAuthClient.Configuration(
            tokenEndpoint: URL(string: "https://id.example/token")!, clientID: "backend",
            clientAuthentication: authentication)
        let client = OAuthClient(configuration: configuration)
        let token = try TokenRequest(
            grant: .refreshToken("rt", scope: nil), clientID: "backend", authentication: authentication)
        let revocation = try RevocationRequest(
            token: "rt", tokenTypeHint: .refreshToken, clientID: "backend", authentication: authentication)
        func dumped(_ value: some Any) -> String {
            var text = ""
            dump(value, to: &text)
            return text
        }
        let renderings: [String] = [
            "\(authentication)", String(reflecting: authentication), dumped(authentication),
            "\(configuration)", String(reflecting: configuration), dumped(configuration),
            "\(client)", String(reflecting: client), dumped(client),
            "\(token)", String(reflecting: token), dumped(token), "\(token.formParameters)",
            "\(revocation)", String(reflecting: revocation), dumped(revocation),
            "\(Mirror(reflecting: authentication).children.map(\.value))",
        ]
        for text in renderings {
            #expect(!text.contains("SECRET"), "\(text)")
        }
        #expect("\(authentication)".contains(authentication.methodName))
        #expect("\(client)".contains("client_auth: \(authentication.methodName)"))
        #expect(token.secrets.contains(Self.secret))
    }

    @Test func methodNamesAreTheRegisteredOnes() {
        #expect(ClientAuthentication.none.methodName == "none")
        #expect(ClientAuthentication.clientSecretBasic("s").methodName == "client_secret_basic")
        #expect(ClientAuthentication.clientSecretPost("s").methodName == "client_secret_post")
        #expect(ClientAuthentication.clientSecretBasic("a") != .clientSecretBasic("b"))
        #expect(ClientAuthentication.clientSecretBasic("a") != .clientSecretPost("a"))
    }

    /// A server whose error text quotes the secret (or Basic's encoded credentials) it was sent.
    @Test(arguments: [Method.basic, .post], Operation.allCases)
    func anErrorThatQuotesTheSecretIsRedacted(method: Method, operation: Operation) async throws {
        try await LocalServer.withRunning { server in
            let secret = Self.secret
            let handler: LocalServer.Handler = { request in
                let credentials = request.header("Authorization").map { String($0.dropFirst(6)) } ?? ""
                let quoted = "client secret \(secret) (\(FormURLEncoding.encode(secret))) or \(credentials) is wrong"
                return .json(
                    #"{"error":"invalid_client","error_description":"\#(quoted)"}"#, status: 401)
            }
            for path in ["/token", "/revoke", "/device"] { server.route(path, handler) }
            let client = Self.client(server, method.authentication)
            let error = await #expect(throws: SessionError.self) { try await Self.perform(operation, on: client) }
            #expect(error?.code == .authorizationFailed)
            #expect(error?.oauthError == "invalid_client")
            let text = "\(String(describing: error)) \(error?.message ?? "")"
            #expect(!text.contains(secret) && !text.contains(FormURLEncoding.encode(secret)), "\(text)")
            if let header = ClientAuthentication.clientSecretBasic(secret).authorizationHeader(clientID: "backend") {
                #expect(!text.contains(String(header.dropFirst(6))))
            }
            #expect(text.contains("<redacted"), "the description was kept, with the secret redacted")
        }
    }

    // MARK: - RFC 8707 resource and audience

    static let resources = [
        URL(string: "https://api.example/v1")!, URL(string: "https://files.example/?tenant=a%20b&x=1")!,
    ]

    @Test(arguments: Operation.allCases)
    func resourcesAndAudienceGoOnEveryGrant(operation: Operation) async throws {
        try await Self.withServer { server in
            let client = Self.client(server, .clientSecretBasic("s"), resources: Self.resources, audience: "urn:api")
            try await Self.perform(operation, on: client)
            let request = try #require(server.requests.last)
            if operation.carriesIndicators {
                #expect(Self.values("resource", in: request) == Self.resources.map(\.absoluteString))
                #expect(Self.values("audience", in: request) == ["urn:api"])
            } else {
                #expect(Self.values("resource", in: request).isEmpty && Self.values("audience", in: request).isEmpty)
            }
        }
    }

    @Test func noResourceOrAudienceByDefault() async throws {
        try await Self.withServer { server in
            for operation in Operation.allCases {
                try await Self.perform(operation, on: Self.client(server, .none))
            }
            for request in server.requests {
                #expect(!Self.form(request).contains { $0.0 == "resource" || $0.0 == "audience" })
            }
        }
    }

    @Test func theAuthorizationURLCarriesTheResourcesAndTheAudience() async throws {
        try await Self.withServer { server in
            let client = Self.client(server, .clientSecretPost("s"), resources: Self.resources, audience: "urn:api")
            let request = try client.authorizationRequest(redirectURI: "app:/cb", additionalParameters: ["prompt": "x"])
            let query = try #require(request.url.query)
            let pairs = OAuthTestSupport.decodeForm(query)
            #expect(pairs.filter { $0.0 == "resource" }.map(\.1) == Self.resources.map(\.absoluteString))
            #expect(pairs.filter { $0.0 == "audience" }.map(\.1) == ["urn:api"])
            #expect(pairs.map(\.0).suffix(4) == ["resource", "resource", "audience", "prompt"])
            #expect(request.resources == Self.resources.map(\.absoluteString) && request.audience == "urn:api")
        }
    }

    @Test(arguments: ["resource", "audience"])
    func additionalParametersCannotRepeatResourceOrAudience(name: String) async throws {
        try await Self.withServer { server in
            #expect(AuthorizationRequest.reservedParameterNames.contains(name))
            for client in [Self.client(server, .none), Self.client(server, .none, resources: Self.resources)] {
                let error = #expect(throws: SessionError.self) {
                    try client.authorizationRequest(redirectURI: "app:/cb", additionalParameters: [name: "x"])
                }
                #expect(error?.code == .invalidInput)
            }
        }
    }

    @Test(arguments: ["client_id", "client_secret", "resource", "audience"])
    func tokenRequestsReserveTheClientAndTargetNames(name: String) {
        let error = OAuthTestSupport.sessionError {
            _ = try TokenRequest(
                grant: .refreshToken("r", scope: nil), clientID: "c", authentication: .clientSecretBasic("s"),
                additionalParameters: [name: "x"])
        }
        #expect(error?.code == .invalidInput)
        let revocation = OAuthTestSupport.sessionError {
            _ = try RevocationRequest(
                token: "t", tokenTypeHint: nil, clientID: "c", authentication: .clientSecretPost("s"),
                additionalParameters: ["client_secret": "x"])
        }
        #expect(revocation?.code == .invalidInput)
    }

    static let badResources: [URL] = [
        URL(string: "/relative/api")!, URL(string: "api.example/v1")!, URL(string: "https://api.example/v1#part")!,
        URL(string: "https://api.example/#")!,
    ]

    @Test(arguments: badResources)
    func anInvalidResourceIsRefusedBeforeAnythingIsSent(resource: URL) async throws {
        try await Self.withServer { server in
            let client = Self.client(server, .clientSecretBasic("s"), resources: [Self.resources[0], resource])
            for operation in Operation.allCases where operation.carriesIndicators {
                let error = await #expect(throws: SessionError.self) { try await Self.perform(operation, on: client) }
                #expect(error?.code == .invalidInput)
            }
            let authorization = #expect(throws: SessionError.self) {
                try client.authorizationRequest(redirectURI: "app:/cb")
            }
            #expect(authorization?.code == .invalidInput)
            #expect(server.requests.isEmpty)
        }
    }

    @Test func anEmptyAudienceIsRefusedBeforeAnythingIsSent() async throws {
        try await Self.withServer { server in
            let client = Self.client(server, .none, audience: "")
            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: "rt") }
            #expect(error?.code == .invalidInput)
            #expect(throws: SessionError.self) { try client.authorizationRequest(redirectURI: "app:/cb") }
            #expect(server.requests.isEmpty)
        }
    }

    @Test func aResourceRelativeToABaseIsSentAbsolute() async throws {
        try await Self.withServer { server in
            let relative = try #require(URL(string: "v2/items?x=1", relativeTo: URL(string: "https://api.example/")))
            _ = try await Self.client(server, .none, resources: [relative]).refresh(using: "rt")
            let request = try #require(server.requests.last)
            #expect(Self.values("resource", in: request) == ["https://api.example/v2/items?x=1"])
        }
    }
}
