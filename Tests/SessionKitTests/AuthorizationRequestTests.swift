import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct AuthorizationRequestTests {
    private typealias Support = OAuthTestSupport
    private static let endpoint = URL(string: "https://id.example/authorize")!

    private func request(
        endpoint: URL = endpoint,
        clientID: String = "s6BhdRkqt3",
        redirectURI: String = "com.example.app:/oauth/cb",
        scope: String? = "openid profile",
        state: String = "xyz",
        additional: [String: String] = [:]
    ) throws -> AuthorizationRequest {
        try AuthorizationRequest(
            authorizationEndpoint: endpoint, clientID: clientID, redirectURI: redirectURI, scope: scope, state: state,
            pkce: try PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"), additionalParameters: additional)
    }

    private func query(_ url: URL) -> [(String, String)] {
        Support.decodeForm(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? "")
    }

    @Test func buildsTheCodeFlowURLWithPKCE() throws {
        let url = try request(additional: ["prompt": "login", "login_hint": "a+b@example.com"]).url
        #expect(
            url.absoluteString
                == "https://id.example/authorize?response_type=code&client_id=s6BhdRkqt3"
                + "&redirect_uri=com.example.app%3A%2Foauth%2Fcb&scope=openid+profile&state=xyz"
                + "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
                + "&login_hint=a%2Bb%40example.com&prompt=login")
        let decoded = query(url)
        #expect(decoded.first { $0.0 == "login_hint" }?.1 == "a+b@example.com")
        #expect(decoded.first { $0.0 == "redirect_uri" }?.1 == "com.example.app:/oauth/cb")
    }

    @Test func theClientPassesAdditionalParametersAndRefusesReservedOnes() throws {
        let client = OAuthClient(
            configuration: .init(
                tokenEndpoint: URL(string: "https://id.example/token")!,
                authorizationEndpoint: Self.endpoint, clientID: "s6BhdRkqt3"))
        let url = try client.authorizationRequest(
            redirectURI: "com.example.app:/oauth/cb", additionalParameters: ["prompt": "login"]
        ).url
        #expect(query(url).first { $0.0 == "prompt" }?.1 == "login")
        #expect(throws: SessionError.self) {
            try client.authorizationRequest(
                redirectURI: "com.example.app:/oauth/cb", additionalParameters: ["state": "x"])
        }
    }

    @Test func printingTheRequestDoesNotRevealTheVerifier() throws {
        let built = try request()
        #expect(!"\(built)".contains(built.pkce.verifier))
        #expect(!String(reflecting: built).contains(built.pkce.verifier))
    }

    /// A server keeps a pending sign-in where the instance the callback reaches finds it: every field comes back,
    /// the verifier the code exchange sends included.
    @Test func encodingAndDecodingKeepsEveryFieldAndTheVerifier() throws {
        let built = try AuthorizationRequest(
            authorizationEndpoint: Self.endpoint, clientID: "s6BhdRkqt3", redirectURI: "https://app.example/cb",
            scope: "openid", nonce: "n-0S6_WzA2Mj", pkce: PKCE(), indicators: .none,
            additionalParameters: ["prompt": "login"])
        let decoded = try JSONDecoder().decode(AuthorizationRequest.self, from: JSONEncoder().encode(built))
        #expect(decoded == built)
        #expect(decoded.pkce.verifier == built.pkce.verifier)
    }

    /// A DPoP sign-in's key never leaves the process, so its request cannot be kept anywhere else.
    @Test func aRequestMadeWithADPoPKeyIsNotEncoded() throws {
        let built = try AuthorizationRequest(
            authorizationEndpoint: Self.endpoint, clientID: "s6BhdRkqt3", redirectURI: "https://app.example/cb",
            scope: nil, pkce: PKCE(), proofKey: try DPoPKey.generate())
        #expect(throws: EncodingError.self) { try JSONEncoder().encode(built) }
    }

    @Test func omitsANilOrEmptyScope() throws {
        #expect(!query(try request(scope: nil).url).contains { $0.0 == "scope" })
        #expect(try request(scope: "").scope == nil)
    }

    @Test func keepsTheEndpointsOwnQuery() throws {
        let url = try request(endpoint: URL(string: "https://id.example/authorize?tenant=a%20b")!).url
        #expect(url.absoluteString.hasPrefix("https://id.example/authorize?tenant=a%20b&response_type=code&"))
    }

    @Test func defaultsToAFreshRandomState() throws {
        let pkce = PKCE()
        let first = try AuthorizationRequest(
            authorizationEndpoint: Self.endpoint, clientID: "c", redirectURI: "app:/cb", scope: nil, pkce: pkce)
        let second = try AuthorizationRequest(
            authorizationEndpoint: Self.endpoint, clientID: "c", redirectURI: "app:/cb", scope: nil, pkce: pkce)
        #expect(first.state.count == 43)
        #expect(first.state != second.state)
        #expect(query(first.url).first { $0.0 == "state" }?.1 == first.state)
    }

    @Test(arguments: Array(AuthorizationRequest.reservedParameterNames) + [""])
    func refusesAdditionalParametersThatWouldOverrideItsOwn(name: String) {
        #expect(Support.sessionError { _ = try request(additional: [name: "x"]) }?.code == .invalidInput)
    }

    @Test func refusesAParameterTheEndpointQueryAlreadyHas() {
        let endpoint = URL(string: "https://id.example/authorize?client_id=other")!
        #expect(Support.sessionError { _ = try request(endpoint: endpoint) }?.code == .invalidInput)
    }

    @Test(arguments: [
        "http://id.example/authorize", "https://id.example/authorize#x", "ftp://id.example/a", "id.example/authorize",
    ])
    func refusesUnsafeEndpoints(endpoint: String) {
        #expect(Support.sessionError { _ = try request(endpoint: URL(string: endpoint)!) }?.code == .invalidInput)
    }

    @Test func allowsPlainHTTPToLoopback() throws {
        #expect(try request(endpoint: URL(string: "http://127.0.0.1:8000/o/authorize/")!).url.scheme == "http")
    }

    @Test(arguments: [
        ("clientID", ""), ("clientID", "é"), ("clientID", "a\nb"), ("state", ""), ("state", "a\u{7F}"),
        ("redirectURI", ""), ("redirectURI", "/relative"), ("scope", "a  b"), ("scope", " a"), ("scope", "a\"b"),
        ("scope", "a\\b"), ("scope", "é"),
    ])
    func refusesInvalidArguments(argument: String, value: String) {
        let error = Support.sessionError {
            switch argument {
            case "clientID": _ = try request(clientID: value)
            case "state": _ = try request(state: value)
            case "redirectURI": _ = try request(redirectURI: value)
            default: _ = try request(scope: value)
            }
        }
        #expect(error?.code == .invalidInput)
    }
}

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct AuthorizationResponseTests {
    private typealias Support = OAuthTestSupport

    private func parse(_ callback: String, state: String = "xyz", issuer: String? = nil) throws -> String {
        try AuthorizationResponse.parse(
            callbackURL: URL(string: callback)!, expectedState: state, expectedIssuer: issuer)
    }

    private func error(_ callback: String, state: String = "xyz", issuer: String? = nil) -> SessionError? {
        let error = Support.sessionError { _ = try parse(callback, state: state, issuer: issuer) }
        #expect(error?.message.contains("SECRET") == false)
        #expect(error?.message.contains("xyz") == false)
        return error
    }

    @Test func returnsTheCodeWhenTheStateMatches() throws {
        #expect(try parse("com.example.app:/cb?code=SplxlOBeZQQYbYS6WxSbIA&state=xyz") == "SplxlOBeZQQYbYS6WxSbIA")
        #expect(try parse("https://app.example/cb?state=xyz&code=a%2Bb&extra=1") == "a+b")
        #expect(try parse("https://app.example/cb?state=x+y%26z&code=c", state: "x y&z") == "c")
    }

    @Test func refusesAMissingOrDifferentStateAsCSRF() {
        #expect(error("app:/cb?code=SECRET")?.code == .invalidInput)
        #expect(error("app:/cb?code=SECRET&state=xy")?.code == .invalidInput)
        #expect(error("app:/cb?code=SECRET&state=xyzz")?.code == .invalidInput)
        #expect(error("app:/cb?code=SECRET&state=")?.code == .invalidInput)
        // State is checked first: a forged error callback is not reported as the user's denial.
        #expect(error("app:/cb?error=access_denied&state=evil")?.code == .invalidInput)
    }

    @Test func refusesAnEmptyExpectedState() {
        #expect(error("app:/cb?code=SECRET&state=", state: "")?.code == .invalidInput)
    }

    @Test func mapsAccessDenied() {
        let denied = error("app:/cb?error=access_denied&error_description=User+said+no&state=xyz")
        #expect(denied?.code == .accessDenied)
        #expect(denied?.oauthError == "access_denied")
        #expect(denied?.message.contains("User said no") == true)
    }

    @Test(arguments: ["invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope", "x_new"])
    func mapsOtherErrorsToAuthorizationFailed(code: String) {
        let failed = error("app:/cb?state=xyz&error=\(code)")
        #expect(failed?.code == .authorizationFailed)
        #expect(failed?.oauthError == code)
    }

    @Test func mapsServerErrorsToAnOutage() {
        #expect(error("app:/cb?state=xyz&error=temporarily_unavailable")?.code == .providerOutage)
        #expect(error("app:/cb?state=xyz&error=server_error")?.code == .providerOutage)
    }

    @Test func refusesAnInvalidErrorCodeWithoutEchoingIt() {
        let failed = error("app:/cb?state=xyz&error=%0Aforged%22")
        #expect(failed?.code == .authorizationFailed)
        #expect(failed?.oauthError == nil)
        #expect(failed?.message.contains("forged") == false)
    }

    @Test func refusesRepeatedParameters() {
        #expect(error("app:/cb?code=SECRET1&code=SECRET2&state=xyz")?.code == .malformedResponse)
        #expect(error("app:/cb?code=SECRET&state=xyz&state=xyz")?.code == .malformedResponse)
    }

    @Test func refusesACallbackWithoutCodeOrError() {
        #expect(error("app:/cb?state=xyz")?.code == .malformedResponse)
        #expect(error("app:/cb?state=xyz&code=")?.code == .malformedResponse)
        #expect(error("app:/cb?state=xyz#code=SECRET")?.code == .malformedResponse)
    }

    /// Foundation's `URL(string:)` already re-encodes a stray `%`, so broken escapes arrive as invalid UTF-8.
    @Test func refusesBrokenEncoding() {
        #expect(error("app:/cb?state=xyz&code=%E2%98")?.code == .malformedResponse)
        #expect(error("app:/cb?state=xyz&code=%C3%28")?.code == .malformedResponse)
    }

    @Test func checksTheIssuerWhenOneIsExpected() throws {
        #expect(try parse("app:/cb?code=c&state=xyz&iss=https%3A%2F%2Fid.example", issuer: "https://id.example") == "c")
        #expect(try parse("app:/cb?code=c&state=xyz", issuer: "https://id.example") == "c")
        #expect(
            error("app:/cb?code=SECRET&state=xyz&iss=https%3A%2F%2Fevil.example", issuer: "https://id.example")?.code
                == .invalidInput)
        #expect(try parse("app:/cb?code=c&state=xyz&iss=anything") == "c")
    }
}
