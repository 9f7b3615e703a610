import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct DeviceAuthorizationTests {
    private typealias Support = OAuthTestSupport

    /// RFC 8628 §3.2's example response.
    private static let example = """
        {"device_code": "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS", "user_code": "WDJB-MJHT",
         "verification_uri": "https://example.com/device",
         "verification_uri_complete": "https://example.com/device?user_code=WDJB-MJHT",
         "expires_in": 1800, "interval": 5}
        """

    private func parse(_ body: String, status: Int = 200) throws -> DeviceAuthorizationResponse {
        try DeviceAuthorizationResponse.parse(data: Support.data(body), statusCode: status)
    }

    private func body(replacing name: String, with value: String?) -> String {
        var members = [
            "device_code": #""SECRET-device""#, "user_code": #""WDJB-MJHT""#,
            "verification_uri": #""https://example.com/device""#, "expires_in": "1800",
        ]
        members[name] = value
        return "{" + members.map { #""\#($0.key)": \#($0.value)"# }.joined(separator: ", ") + "}"
    }

    private func malformed(_ body: String, sourceLocation: SourceLocation = #_sourceLocation) -> SessionError? {
        let error = Support.sessionError(sourceLocation: sourceLocation) { _ = try parse(body) }
        #expect(error?.code == .malformedResponse, sourceLocation: sourceLocation)
        #expect(error?.message.contains("SECRET") == false, sourceLocation: sourceLocation)
        return error
    }

    // MARK: the response

    @Test func readsRFC8628Example() throws {
        let response = try parse(Self.example)
        #expect(response.deviceCode == "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS")
        #expect(response.userCode == "WDJB-MJHT")
        #expect(response.verificationURI.absoluteString == "https://example.com/device")
        #expect(response.verificationURIComplete?.absoluteString == "https://example.com/device?user_code=WDJB-MJHT")
        #expect(response.expiresIn == .seconds(1800))
        #expect(response.interval == .seconds(5))
        #expect(!response.description.contains("GmRhmhcxhw"))
    }

    @Test func defaultsTheIntervalToFiveSecondsAndRaisesZeroToOne() throws {
        #expect(try parse(body(replacing: "interval", with: nil)).interval == .seconds(5))
        #expect(try parse(body(replacing: "interval", with: "null")).interval == .seconds(5))
        #expect(try parse(body(replacing: "interval", with: "0")).interval == .seconds(1))
        #expect(try parse(body(replacing: "interval", with: #""10""#)).interval == .seconds(10))
    }

    @Test func readsGooglesVerificationURLName() throws {
        var text = body(replacing: "verification_uri", with: nil)
        text.removeLast()
        text += #", "verification_url": "https://www.google.com/device"}"#
        #expect(try parse(text).verificationURI.absoluteString == "https://www.google.com/device")
    }

    @Test func acceptsPlainHTTPVerificationPages() throws {
        let response = try parse(body(replacing: "verification_uri", with: #""http://127.0.0.1:8000/device""#))
        #expect(response.verificationURI.scheme == "http")
    }

    @Test(arguments: ["device_code", "user_code", "verification_uri", "expires_in"])
    func refusesAMissingRequiredMember(name: String) {
        #expect(malformed(body(replacing: name, with: nil))?.message.contains(name) == true)
        _ = malformed(body(replacing: name, with: "null"))
    }

    @Test(arguments: [
        ("device_code", #""""#), ("device_code", "42"), ("user_code", #""""#), ("user_code", #""AB\nCD""#),
        ("user_code", #""AB\u202ECD""#), ("user_code", "[1]"), ("expires_in", "0"), ("expires_in", "-5"),
        ("expires_in", #""soon""#), ("interval", "-1"), ("interval", "2.5"), ("interval", "true"),
        ("verification_uri", #""javascript:alert(1)""#), ("verification_uri", #""file:///etc/passwd""#),
        ("verification_uri", #""/device""#), ("verification_uri", #""https://""#), ("verification_uri", "5"),
        ("verification_uri_complete", #""data:text/html,hi""#), ("verification_uri_complete", "{}"),
    ])
    func refusesInvalidMembers(name: String, value: String) {
        _ = malformed(body(replacing: name, with: value))
    }

    @Test func refusesAnOverlongUserCode() {
        _ = malformed(body(replacing: "user_code", with: "\"\(String(repeating: "A", count: 129))\""))
    }

    @Test(arguments: ["", "[]", "nope", #"{"device_code": "a", "device_code": "b"}"#])
    func refusesBodiesThatAreNotOneJSONObject(body: String) {
        _ = malformed(body)
    }

    @Test func classifiesFailureStatuses() {
        let denied = Support.sessionError { _ = try parse(#"{"error":"invalid_client"}"#, status: 401) }
        #expect(denied?.code == .authorizationFailed)
        #expect(denied?.oauthError == "invalid_client")
        #expect(Support.sessionError { _ = try parse("", status: 503) }?.code == .providerOutage)
        #expect(Support.sessionError { _ = try parse(Self.example, status: 201) }?.code == .malformedResponse)
    }

    // MARK: polling

    private func polling(expiresIn: Int = 600, interval: Int = 5) -> DevicePollingState {
        let authorization = DeviceAuthorizationResponse(
            deviceCode: "d", userCode: "u", verificationURI: URL(string: "https://e.example/device")!,
            expiresIn: .seconds(expiresIn), interval: .seconds(interval))
        return DevicePollingState(authorization: authorization, receivedAt: Support.instant)
    }

    private func answer(
        _ state: inout DevicePollingState,
        _ status: Int,
        _ body: String,
        at seconds: Int = 10,
        retryAfter: Duration? = nil
    ) -> DevicePollingState.Next {
        state.handle(
            statusCode: status, body: Support.data(body), receivedAt: Support.instant.advanced(by: .seconds(seconds)),
            receivedAtWall: Support.wall, retryAfter: retryAfter)
    }

    private func failure(_ next: DevicePollingState.Next) -> SessionError? {
        if case .failed(let error) = next { return error }
        Issue.record("expected .failed, got \(next)")
        return nil
    }

    @Test func waitsOneIntervalBeforeTheFirstPoll() {
        #expect(polling(interval: 7).firstPoll == .poll(after: .seconds(7)))
    }

    @Test func keepsPollingWhileAuthorizationIsPending() {
        var state = polling()
        for second in [5, 10, 15] {
            #expect(answer(&state, 400, #"{"error":"authorization_pending"}"#, at: second) == .poll(after: .seconds(5)))
        }
        #expect(!state.isFinished)
    }

    @Test func slowDownAddsFiveSecondsForEveryLaterPoll() {
        var state = polling()
        #expect(answer(&state, 400, #"{"error":"slow_down"}"#) == .poll(after: .seconds(10)))
        #expect(answer(&state, 400, #"{"error":"authorization_pending"}"#) == .poll(after: .seconds(10)))
        #expect(answer(&state, 400, #"{"error":"slow_down"}"#) == .poll(after: .seconds(15)))
        #expect(state.interval == .seconds(15))
    }

    @Test func finishesWithTheTokensWhenApproved() {
        var state = polling()
        let next = answer(&state, 200, #"{"access_token":"at","token_type":"Bearer","expires_in":60}"#, at: 42)
        let expected = TokenSet(
            accessToken: "at", lifetime: .seconds(60), receivedAt: Support.instant.advanced(by: .seconds(42)),
            receivedAtWall: Support.wall)
        #expect(next == .finished(expected))
        #expect(state.isFinished)
    }

    @Test func failsOnAnInvalidTokenResponse() {
        var state = polling()
        #expect(failure(answer(&state, 200, #"{"access_token":"at"}"#))?.code == .malformedTokenResponse)
        #expect(state.isFinished)
    }

    @Test(arguments: [
        ("access_denied", SessionError.Code.accessDenied), ("expired_token", .authorizationExpired),
        ("invalid_grant", .authorizationFailed), ("invalid_client", .authorizationFailed),
    ])
    func failsOnTerminalErrors(error: String, code: SessionError.Code) {
        var state = polling()
        let failed = failure(answer(&state, 400, #"{"error":"\#(error)"}"#))
        #expect(failed?.code == code)
        #expect(failed?.oauthError == error)
        #expect(state.isFinished)
    }

    @Test func failsOnA4xxWithoutAnOAuthError() {
        var state = polling()
        #expect(failure(answer(&state, 404, "not found"))?.code == .authorizationFailed)
    }

    @Test func answersInvalidInputOnceFinished() {
        var state = polling()
        _ = answer(&state, 400, #"{"error":"access_denied"}"#)
        #expect(failure(answer(&state, 400, #"{"error":"authorization_pending"}"#))?.code == .invalidInput)
        #expect(failure(state.handleTransportFailure(at: Support.instant))?.code == .invalidInput)
    }

    @Test func backsOffExponentiallyOnOutagesAndHonoursRetryAfter() {
        var state = polling(expiresIn: 100_000)
        #expect(answer(&state, 503, "") == .poll(after: .seconds(10)))
        #expect(answer(&state, 500, "") == .poll(after: .seconds(20)))
        #expect(state.handleTransportFailure(at: Support.instant) == .poll(after: .seconds(40)))
        #expect(answer(&state, 429, "", retryAfter: .seconds(120)) == .poll(after: .seconds(120)))
        for _ in 0..<20 { _ = state.handleTransportFailure(at: Support.instant) }
        #expect(state.handleTransportFailure(at: Support.instant) == .poll(after: .seconds(300)))
        // The protocol's own answer ends the backoff.
        #expect(answer(&state, 400, #"{"error":"authorization_pending"}"#) == .poll(after: .seconds(5)))
        #expect(answer(&state, 502, "") == .poll(after: .seconds(10)))
        #expect(state.interval == .seconds(5))
    }

    @Test func aSlowDownInA5xxBodyIsStillASlowDown() {
        var state = polling()
        #expect(answer(&state, 503, #"{"error":"slow_down"}"#) == .poll(after: .seconds(10)))
    }

    @Test func failsWhenTheNextPollWouldComeAfterTheCodeExpires() {
        var state = polling(expiresIn: 30, interval: 5)
        #expect(answer(&state, 400, #"{"error":"authorization_pending"}"#, at: 25) == .poll(after: .seconds(5)))
        let expired = failure(answer(&state, 400, #"{"error":"authorization_pending"}"#, at: 26))
        #expect(expired?.code == .authorizationExpired)
        #expect(state.isFinished)

        var outage = polling(expiresIn: 30, interval: 5)
        #expect(
            failure(outage.handleTransportFailure(at: Support.instant.advanced(by: .seconds(21))))?.code
                == .authorizationExpired)
    }
}
