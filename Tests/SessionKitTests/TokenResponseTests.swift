import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct TokenResponseTests {
    private typealias Support = OAuthTestSupport

    private func parse(_ body: String, status: Int = 200, retryAfter: Duration? = nil) throws -> TokenSet {
        try TokenResponse.parse(
            data: Support.data(body), statusCode: status, receivedAt: Support.instant, receivedAtWall: Support.wall,
            retryAfter: retryAfter)
    }

    /// A token response with `access_token` "SECRET-access" and the given extra members.
    private func body(_ members: String, tokenType: String? = #""Bearer""#) -> String {
        var fields = [#""access_token": "SECRET-access""#]
        if let tokenType { fields.append(#""token_type": \#(tokenType)"#) }
        if !members.isEmpty { fields.append(members) }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    private func malformed(_ body: String, status: Int = 200, sourceLocation: SourceLocation = #_sourceLocation)
        -> SessionError?
    {
        let error = Support.sessionError(sourceLocation: sourceLocation) { _ = try parse(body, status: status) }
        #expect(error?.code == .malformedTokenResponse, sourceLocation: sourceLocation)
        #expect(error?.message.contains("SECRET") == false, "a token reached a message", sourceLocation: sourceLocation)
        #expect(error?.description.contains("SECRET") == false, sourceLocation: sourceLocation)
        return error
    }

    @Test func readsAFullResponse() throws {
        let tokens = try parse(
            #"{"access_token":"2YotnFZFEjr1zCsicMWpAA","token_type":"Bearer","expires_in":3600,"#
                + #""refresh_token":"tGzv3JOkF0XG5Qx2TlKWIA","scope":"read write","id_token":"a.b.c","extra":[1]}"#)
        #expect(tokens.accessToken == "2YotnFZFEjr1zCsicMWpAA")
        #expect(tokens.refreshToken == "tGzv3JOkF0XG5Qx2TlKWIA")
        #expect(tokens.idToken == "a.b.c")
        #expect(tokens.scope == "read write")
        #expect(tokens.tokenType == "Bearer")
        #expect(tokens.lifetime == .seconds(3600))
        #expect(tokens.expiresAt == Support.instant.advanced(by: .seconds(3600)))
        #expect(tokens.receivedAt == Support.instant)
        #expect(tokens.receivedAtWall == Support.wall)
    }

    @Test func readsAMinimalResponseWithUnknownLifetime() throws {
        let tokens = try parse(body(""))
        #expect(tokens.accessToken == "SECRET-access")
        #expect(tokens.refreshToken == nil && tokens.idToken == nil && tokens.scope == nil)
        #expect(tokens.lifetime == nil && tokens.expiresAt == nil)
    }

    @Test(arguments: [#""bearer""#, #""BEARER""#, #""bEaReR""#])
    func acceptsBearerInAnyCaseAndStoresItCanonically(tokenType: String) throws {
        #expect(try parse(body("", tokenType: tokenType)).tokenType == "Bearer")
    }

    @Test func refusesAMissingTokenType() {
        #expect(malformed(body("", tokenType: nil))?.message.contains("token_type") == true)
        _ = malformed(body("", tokenType: "null"))
    }

    @Test(arguments: [#""DPoP""#, #""MAC""#, #""Bearer ""#, #""""#, "1", "true"])
    func refusesOtherTokenTypes(tokenType: String) {
        _ = malformed(body("", tokenType: tokenType))
    }

    @Test func namesARegisteredForeignTokenTypeAndEchoesNoOther() {
        #expect(malformed(body("", tokenType: #""dpop""#))?.message.contains(#"token type "DPoP""#) == true)
        // An unregistered value may be a token the server put in the wrong field: it is never copied.
        let error = malformed(body("", tokenType: #""SECRET-v\nforged log line""#))
        #expect(error?.message.contains("SECRET") == false)
        #expect(error?.message.contains("\n") == false)
        #expect(error?.message.contains("unregistered") == true)
    }

    @Test(arguments: ["", "null", "[]", #""a string""#, "42", "{", "<html>", #"{"access_token":"#])
    func refusesBodiesThatAreNotAJSONObject(body: String) {
        _ = malformed(body)
    }

    @Test func refusesBodiesOverOneMebibyte() {
        let padding = String(repeating: "x", count: OAuthLimits.maximumBodyBytes)
        let error = malformed(body(#""padding": "\#(padding)""#))
        #expect(error?.message.contains("limit") == true)
    }

    @Test(arguments: [
        #"{"token_type":"Bearer"}"#, #"{"access_token":null,"token_type":"Bearer"}"#,
        #"{"access_token":"","token_type":"Bearer"}"#, #"{"access_token":12345,"token_type":"Bearer"}"#,
        #"{"access_token":["SECRET-access"],"token_type":"Bearer"}"#,
        #"{"access_token":{"v":"SECRET-access"},"token_type":"Bearer"}"#,
    ])
    func refusesAMissingEmptyOrMistypedAccessToken(body: String) {
        #expect(malformed(body)?.message.contains("access_token") == true)
    }

    @Test(arguments: ["SECRET access", "SECRET\naccess", "SECRET\\u0000x", "SECRET-é", "SECRET\\t"])
    func refusesAccessTokensThatCouldCorruptTheAuthorizationHeader(token: String) {
        _ = malformed(#"{"access_token":"\#(token)","token_type":"Bearer"}"#)
    }

    @Test func acceptsAnyVisibleASCIIAccessToken() throws {
        #expect(try parse(#"{"access_token":"a|b!~{}","token_type":"Bearer"}"#).accessToken == "a|b!~{}")
    }

    @Test func refusesDuplicateMembers() {
        _ = malformed(#"{"access_token":"SECRET-a","access_token":"SECRET-b","token_type":"Bearer"}"#)
    }

    // MARK: expires_in

    @Test(arguments: [
        ("3600", Duration.seconds(3600)), (#""3600""#, .seconds(3600)), ("3600.0", .seconds(3600)),
        ("3.6e3", .seconds(3600)), ("1", .seconds(1)), (#""1""#, .seconds(1)), (#""007""#, .seconds(7)),
    ])
    func readsWholeSecondsAsANumberOrADigitString(value: String, lifetime: Duration) throws {
        #expect(try parse(body(#""expires_in": \#(value)"#)).lifetime == lifetime)
    }

    @Test(arguments: ["null", "0", #""0""#, "0.0", "-0"])
    func readsAbsentNullOrZeroAsAnUnknownLifetime(value: String) throws {
        #expect(try parse(body(#""expires_in": \#(value)"#)).lifetime == nil)
    }

    @Test(arguments: [
        "-1", "-3600", "1.5", "0.5", #""""#, #"" 3600""#, #""3600 ""#, #""+5""#, #""-5""#, #""3.5""#, #""3600s""#,
        #""1e3""#, #""٣""#, "true", "[3600]", #"{"s":1}"#,
    ])
    func refusesNegativeFractionalOrMistypedLifetimes(value: String) {
        #expect(malformed(body(#""expires_in": \#(value)"#))?.message.contains("expires_in") == true)
    }

    @Test(arguments: [
        "315360001", "1e300", "99999999999999999999999999", #""99999999999999999999999999""#, #""315360001""#,
    ])
    func clampsLifetimesOverTenYears(value: String) throws {
        let tenYears = Duration.seconds(OAuthLimits.maximumLifetimeSeconds)
        #expect(try parse(body(#""expires_in": \#(value)"#)).lifetime == tenYears)
    }

    @Test func keepsALifetimeOfExactlyTenYears() throws {
        #expect(try parse(body(#""expires_in": 315360000"#)).lifetime == .seconds(315_360_000))
        #expect(try parse(body(#""expires_in": 315359999"#)).lifetime == .seconds(315_359_999))
    }

    // MARK: optional members

    @Test func readsEmptyOrNullOptionalTokensAsAbsent() throws {
        let tokens = try parse(body(#""refresh_token": "", "id_token": null, "scope": """#))
        #expect(tokens.refreshToken == nil && tokens.idToken == nil && tokens.scope == nil)
    }

    @Test(arguments: [#""refresh_token": 1"#, #""id_token": true"#, #""scope": 5"#, #""scope": ["a", 1]"#])
    func refusesMistypedOptionalMembers(member: String) {
        _ = malformed(body(member))
    }

    @Test func joinsAScopeArray() throws {
        #expect(try parse(body(#""scope": ["openid", "", "email"]"#)).scope == "openid email")
        #expect(try parse(body(#""scope": []"#)).scope == nil)
    }

    // MARK: status codes

    @Test(arguments: [201, 202, 204, 299])
    func refusesOtherSuccessStatuses(status: Int) {
        #expect(malformed(body(""), status: status)?.statusCode == status)
    }

    @Test func throwsTheClassifiedErrorForAFailureStatus() {
        let rejected = Support.sessionError { _ = try parse(#"{"error":"invalid_grant"}"#, status: 400) }
        #expect(rejected?.code == .refreshRejected)
        #expect(rejected?.oauthError == "invalid_grant")
        let outage = Support.sessionError { _ = try parse("", status: 503, retryAfter: .seconds(7)) }
        #expect(outage?.code == .providerOutage)
        #expect(outage?.retryAfter == .seconds(7))
    }

    @Test func skipsAByteOrderMark() throws {
        let data = Data([0xEF, 0xBB, 0xBF]) + Support.data(body(""))
        let tokens = try TokenResponse.parse(
            data: data, statusCode: 200, receivedAt: Support.instant, receivedAtWall: Support.wall)
        #expect(tokens.accessToken == "SECRET-access")
    }
}
