import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct OAuthErrorResponseTests {
    private func classify(_ status: Int, _ body: String, retryAfter: Duration? = nil) -> SessionError {
        OAuthErrorResponse.classify(statusCode: status, body: Data(body.utf8), retryAfter: retryAfter)
    }

    @Test func readsAllThreeMembers() throws {
        let response = try #require(
            OAuthErrorResponse.parse(
                Data(
                    #"{"error":"invalid_request","error_description":"Missing code","error_uri":"https://e.example/e"}"#
                        .utf8)))
        #expect(response.error == "invalid_request")
        #expect(response.errorDescription == "Missing code")
        #expect(response.errorURI == "https://e.example/e")
    }

    @Test func cleansAndTruncatesTheDescription() throws {
        let long = String(repeating: "é", count: 300)
        let response = try #require(
            OAuthErrorResponse.parse(
                Data(#"{"error":"x","error_description":"a\nb\u0000c\u202Ed\t \#(long)"}"#.utf8)))
        let description = try #require(response.errorDescription)
        #expect(description.hasPrefix("abcd"))
        #expect(description.hasSuffix("…"))
        #expect(description.unicodeScalars.count == OAuthLimits.maximumDescriptionLength + 1)
        #expect(!description.unicodeScalars.contains { $0.properties.generalCategory == .control })
    }

    @Test func readsAnEmptyOrMistypedDescriptionAsAbsent() throws {
        let empty = try #require(OAuthErrorResponse.parse(Data(#"{"error":"x","error_description":"\n"}"#.utf8)))
        #expect(empty.errorDescription == nil)
        let number = try #require(OAuthErrorResponse.parse(Data(#"{"error":"x","error_description":5}"#.utf8)))
        #expect(number.errorDescription == nil)
    }

    @Test(arguments: [
        "", "not json", "[]", #"{"error":5}"#, #"{"error":""}"#, #"{"error":"a\"b"}"#, #"{"error":"a\\b"}"#,
        #"{"error":"a\nb"}"#, #"{"error":"é"}"#, #"{"message":"invalid_grant"}"#,
        #"{"error":"\#(String(repeating: "x", count: 129))"}"#,
    ])
    func refusesBodiesWithoutAValidErrorCode(body: String) {
        #expect(OAuthErrorResponse.parse(Data(body.utf8)) == nil)
    }

    @Test func acceptsErrorCodesUpTo128Characters() {
        let code = String(repeating: "x", count: 128)
        #expect(OAuthErrorResponse.parse(Data(#"{"error":"\#(code)"}"#.utf8))?.error == code)
        #expect(OAuthErrorResponse.parse(Data(#"{"error":"with space!"}"#.utf8))?.error == "with space!")
    }

    @Test(arguments: [
        ("invalid_grant", SessionError.Code.refreshRejected), ("invalid_client", .authorizationFailed),
        ("unauthorized_client", .authorizationFailed), ("unsupported_grant_type", .authorizationFailed),
        ("invalid_scope", .authorizationFailed), ("invalid_request", .authorizationFailed),
        ("access_denied", .accessDenied), ("expired_token", .authorizationExpired),
        ("server_error", .providerOutage), ("temporarily_unavailable", .providerOutage),
        ("something_new", .authorizationFailed),
    ])
    func mapsEachErrorCode(error: String, code: SessionError.Code) {
        for status in [400, 401] {
            let classified = classify(status, #"{"error":"\#(error)"}"#, retryAfter: .seconds(3))
            #expect(classified.code == code)
            #expect(classified.oauthError == error)
            #expect(classified.statusCode == status)
            #expect(classified.retryAfter == (code == .providerOutage ? .seconds(3) : nil))
        }
    }

    @Test(arguments: [429, 500, 502, 503, 504, 599])
    func classifiesOverloadAndServerErrorsAsOutagesWithRetryAfter(status: Int) {
        let plain = classify(status, "<html>busy</html>", retryAfter: .seconds(30))
        #expect(plain.code == .providerOutage)
        #expect(plain.retryAfter == .seconds(30))
        #expect(plain.isTransient)
        // Even an OAuth body does not turn a 5xx into a terminal error, but its code is kept.
        let withBody = classify(status, #"{"error":"invalid_grant"}"#, retryAfter: nil)
        #expect(withBody.code == .providerOutage)
        #expect(withBody.oauthError == "invalid_grant")
    }

    @Test func classifiesARequestTimeoutAsTimedOut() {
        #expect(classify(408, "").code == .timedOut)
    }

    @Test(arguments: [400, 401, 403, 404, 405, 415, 499])
    func classifiesA4xxWithoutAnOAuthErrorAsAuthorizationFailed(status: Int) {
        let error = classify(status, "<html>Not Found</html>")
        #expect(error.code == .authorizationFailed)
        #expect(error.oauthError == nil)
        #expect(error.statusCode == status)
    }

    @Test(arguments: [-1, 0, 99, 100, 200, 204, 301, 302, 304, 600, 999])
    func classifiesNonFailureStatusesAsMalformed(status: Int) {
        #expect(classify(status, #"{"error":"invalid_grant"}"#).code == .malformedResponse)
    }

    @Test func putsTheCleanedDescriptionInTheMessage() {
        let error = classify(400, #"{"error":"invalid_grant","error_description":"Token expired\r\nX-Forged: 1"}"#)
        #expect(error.message.contains("invalid_grant"))
        #expect(error.message.contains("Token expiredX-Forged: 1"))
        #expect(!error.message.contains("\n") && !error.message.contains("\r"))
    }
}
