import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RevocationRequestTests {
    private typealias Support = OAuthTestSupport

    private func classify(_ status: Int, _ body: String = "", retryAfter: Duration? = nil)
        -> RevocationRequest.Outcome
    {
        RevocationRequest.classify(statusCode: status, body: Data(body.utf8), retryAfter: retryAfter)
    }

    @Test func encodesTokenHintAndClient() throws {
        let request = try RevocationRequest(
            token: "45ghiukldjahdnhzdauz", tokenTypeHint: .refreshToken, clientID: "app")
        #expect(
            String(decoding: request.body, as: UTF8.self)
                == "token=45ghiukldjahdnhzdauz&token_type_hint=refresh_token&client_id=app")
        let unhinted = try RevocationRequest(token: "t", tokenTypeHint: nil, clientID: "app")
        #expect(String(decoding: unhinted.body, as: UTF8.self) == "token=t&client_id=app")
        let access = try RevocationRequest(token: "t", tokenTypeHint: .accessToken, clientID: "app")
        #expect(String(decoding: access.body, as: UTF8.self) == "token=t&token_type_hint=access_token&client_id=app")
    }

    @Test(arguments: ["a+b", "a/b", "a=b==", "a&token=evil", "a b", "é☃😀", "%41", "\n"])
    func tokensWithReservedCharactersArriveIntact(token: String) throws {
        let request = try RevocationRequest(
            token: token, tokenTypeHint: .accessToken, clientID: "app", additionalParameters: ["x": token])
        let decoded = Support.decodeForm(String(decoding: request.body, as: UTF8.self))
        #expect(decoded.map(\.0) == ["token", "token_type_hint", "client_id", "x"])
        #expect(decoded.map(\.1) == [token, "access_token", "app", token])
    }

    @Test func buildsAFormPostThatIsNeverCached() throws {
        let endpoint = URL(string: "https://id.example/revoke")!
        let request = try RevocationRequest(token: "t", tokenTypeHint: nil, clientID: "c").urlRequest(
            endpoint: endpoint)
        #expect(request.url == endpoint)
        #expect(request.httpMethod == "POST")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded")
        #expect(request.value(forHTTPHeaderField: "Accept") == "application/json")
        #expect(request.value(forHTTPHeaderField: "Cache-Control") == "no-store")
        #expect(request.httpBody == Data("token=t&client_id=c".utf8))
        let plain = Support.sessionError {
            _ = try RevocationRequest(token: "t", tokenTypeHint: nil, clientID: "c")
                .urlRequest(endpoint: URL(string: "http://id.example/revoke")!)
        }
        #expect(plain?.code == .invalidInput)
    }

    @Test func refusesEmptyValuesAndReservedParameters() {
        #expect(
            Support.sessionError { _ = try RevocationRequest(token: "", tokenTypeHint: nil, clientID: "c") }?.code
                == .invalidInput)
        #expect(
            Support.sessionError { _ = try RevocationRequest(token: "t", tokenTypeHint: nil, clientID: "") }?.code
                == .invalidInput)
        for name in ["token", "token_type_hint", "client_id"] {
            let error = Support.sessionError {
                _ = try RevocationRequest(
                    token: "t", tokenTypeHint: nil, clientID: "c", additionalParameters: [name: "x"])
            }
            #expect(error?.code == .invalidInput)
        }
    }

    @Test func descriptionRedactsTheToken() throws {
        let request = try RevocationRequest(token: "SECRET-refresh", tokenTypeHint: .refreshToken, clientID: "c")
        #expect(!request.description.contains("SECRET"))
    }

    @Test(arguments: [200, 204])
    func treatsSuccessAsRevokedEvenForAnUnknownToken(status: Int) {
        #expect(classify(status) == .revoked)
        #expect(classify(status, #"{"error":"invalid_token"}"#) == .revoked)
    }

    @Test func retriesA503OrA429AfterTheServersWait() {
        #expect(classify(503, retryAfter: .seconds(5)) == .retryable(after: .seconds(5)))
        #expect(classify(503) == .retryable(after: nil))
        #expect(classify(429, retryAfter: .seconds(1)) == .retryable(after: .seconds(1)))
    }

    @Test func reportsAnUnsupportedTokenType() {
        #expect(classify(400, #"{"error":"unsupported_token_type"}"#) == .unsupportedTokenType)
    }

    @Test func failsOnEverythingElse() {
        guard case .failed(let client) = classify(401, #"{"error":"invalid_client"}"#) else {
            Issue.record("expected .failed")
            return
        }
        #expect(client.code == .authorizationFailed)
        #expect(client.oauthError == "invalid_client")
        #expect(client.message.contains("revocation endpoint"))
        guard case .failed(let server) = classify(500), case .failed(let redirect) = classify(302) else {
            Issue.record("expected .failed")
            return
        }
        #expect(server.code == .providerOutage)
        #expect(redirect.code == .malformedResponse)
        // unsupported_token_type is its own outcome only on the status RFC 7009 gives it.
        guard case .failed = classify(401, #"{"error":"unsupported_token_type"}"#) else {
            Issue.record("expected .failed")
            return
        }
    }
}
