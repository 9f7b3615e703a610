import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct TokenRequestTests {
    private typealias Support = OAuthTestSupport
    private static let endpoint = URL(string: "https://id.example/token")!
    private static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    private static let awkward = "a+b/c=d&e f%g é☃"

    private func bodyText(_ request: TokenRequest) -> String {
        String(decoding: request.body, as: UTF8.self)
    }

    @Test func encodesARefreshGrant() throws {
        let request = try TokenRequest(grant: .refreshToken("tGzv3JOkF0XG5Qx2TlKWIA", scope: nil), clientID: "app")
        #expect(bodyText(request) == "grant_type=refresh_token&refresh_token=tGzv3JOkF0XG5Qx2TlKWIA&client_id=app")
        let scoped = try TokenRequest(grant: .refreshToken("r", scope: "read write"), clientID: "app")
        #expect(bodyText(scoped) == "grant_type=refresh_token&refresh_token=r&scope=read+write&client_id=app")
    }

    @Test func encodesAnAuthorizationCodeGrantWithItsVerifier() throws {
        let request = try TokenRequest(
            grant: .authorizationCode(
                code: "SplxlOBeZQQYbYS6WxSbIA", codeVerifier: Self.verifier, redirectURI: "com.example.app:/cb?x=1"),
            clientID: "s6BhdRkqt3")
        #expect(
            bodyText(request)
                == "grant_type=authorization_code&code=SplxlOBeZQQYbYS6WxSbIA"
                + "&redirect_uri=com.example.app%3A%2Fcb%3Fx%3D1&code_verifier=\(Self.verifier)&client_id=s6BhdRkqt3")
    }

    @Test func encodesADeviceCodeGrant() throws {
        let request = try TokenRequest(grant: .deviceCode("GmRh_mhcx"), clientID: "tv")
        #expect(
            bodyText(request)
                == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&device_code=GmRh_mhcx&client_id=tv"
        )
        #expect(request.grant.grantType == "urn:ietf:params:oauth:grant-type:device_code")
    }

    @Test func encodesAPasswordGrant() throws {
        let request = try TokenRequest(
            grant: .password(username: "alice@example.com", password: "p@ss word", scope: "openid"), clientID: "test")
        #expect(
            bodyText(request)
                == "grant_type=password&username=alice%40example.com&password=p%40ss+word&scope=openid&client_id=test")
    }

    @Test func tokensWithReservedCharactersArriveIntact() throws {
        let request = try TokenRequest(
            grant: .refreshToken(Self.awkward, scope: nil), clientID: "c l+i",
            additionalParameters: ["z": Self.awkward, "a": "1"])
        #expect(
            bodyText(request)
                == "grant_type=refresh_token&refresh_token=a%2Bb%2Fc%3Dd%26e+f%25g+%C3%A9%E2%98%83"
                + "&client_id=c+l%2Bi&a=1&z=a%2Bb%2Fc%3Dd%26e+f%25g+%C3%A9%E2%98%83")
        let decoded = Support.decodeForm(bodyText(request))
        #expect(decoded.map(\.0) == ["grant_type", "refresh_token", "client_id", "a", "z"])
        #expect(decoded.map(\.1) == ["refresh_token", Self.awkward, "c l+i", "1", Self.awkward])
    }

    @Test func buildsAFormPostThatIsNeverCached() throws {
        let request = try TokenRequest(grant: .deviceCode("d"), clientID: "c").urlRequest(endpoint: Self.endpoint)
        #expect(request.url == Self.endpoint)
        #expect(request.httpMethod == "POST")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded")
        #expect(request.value(forHTTPHeaderField: "Accept") == "application/json")
        #expect(request.value(forHTTPHeaderField: "Cache-Control") == "no-store")
        #expect(
            request.httpBody
                == Data(
                    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code&device_code=d&client_id=c".utf8))
    }

    @Test(arguments: [
        "http://127.0.0.1:8000/token", "http://localhost/token", "http://[::1]:9/t", "HTTPS://id.example/t",
    ])
    func acceptsTLSOrLoopbackEndpoints(endpoint: String) throws {
        let request = try TokenRequest(grant: .deviceCode("d"), clientID: "c")
        _ = try request.urlRequest(endpoint: URL(string: endpoint)!)
    }

    @Test(arguments: [
        "http://id.example/token", "http://127.0.0.1.evil.example/t", "http://10.0.0.1/t", "ftp://id.example/t",
        "https://id.example/token#frag", "file:///token", "/relative",
    ])
    func refusesEndpointsThatWouldExposeTheGrant(endpoint: String) throws {
        let request = try TokenRequest(grant: .deviceCode("d"), clientID: "c")
        let error = Support.sessionError { _ = try request.urlRequest(endpoint: URL(string: endpoint)!) }
        #expect(error?.code == .invalidInput)
    }

    @Test(arguments: [
        TokenRequest.Grant.refreshToken("", scope: nil), .deviceCode(""),
        .authorizationCode(code: "", codeVerifier: TokenRequestTests.verifier, redirectURI: "app:/cb"),
        .authorizationCode(code: "c", codeVerifier: TokenRequestTests.verifier, redirectURI: ""),
        .authorizationCode(code: "c", codeVerifier: "short", redirectURI: "app:/cb"),
        .password(username: "", password: "p", scope: nil), .password(username: "u", password: "", scope: nil),
    ])
    func refusesEmptyOrInvalidGrantValues(grant: TokenRequest.Grant) {
        #expect(Support.sessionError { _ = try TokenRequest(grant: grant, clientID: "c") }?.code == .invalidInput)
    }

    @Test(arguments: ["grant_type", "client_id", "refresh_token", ""])
    func refusesAdditionalParametersThatRepeatItsOwn(name: String) {
        let error = Support.sessionError {
            _ = try TokenRequest(
                grant: .refreshToken("r", scope: nil), clientID: "c", additionalParameters: [name: "x"])
        }
        #expect(error?.code == .invalidInput)
    }

    @Test func refusesAnEmptyClientID() {
        #expect(
            Support.sessionError { _ = try TokenRequest(grant: .deviceCode("d"), clientID: "") }?.code == .invalidInput)
    }

    @Test func descriptionRedactsEveryCredential() throws {
        let request = try TokenRequest(
            grant: .password(username: "SECRETuser", password: "SECRETpass", scope: nil), clientID: "c")
        #expect(!request.description.contains("SECRET"))
        #expect(request.description.contains("password"))
        #expect(!"\(request.grant)".contains("SECRET"))
        #expect(!String(reflecting: request.grant).contains("SECRET"))
        #expect(!"\(request.formParameters)".contains("SECRET"))
        #expect("\(request.formParameters)".contains("grant_type=password"))
        let code = TokenRequest.Grant.authorizationCode(
            code: "SECRETcode", codeVerifier: "SECRETverifier", redirectURI: "app:/cb")
        #expect(!"\(code)".contains("SECRET") && "\(code)".contains("app:/cb"))
        #expect(!"\(TokenRequest.Grant.refreshToken("SECRETr", scope: "a"))".contains("SECRET"))
        #expect(!"\(TokenRequest.Grant.deviceCode("SECRETd"))".contains("SECRET"))
    }
}
