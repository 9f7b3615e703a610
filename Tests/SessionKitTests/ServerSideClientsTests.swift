import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The code the Confidential Clients and Resource Indicators article shows, run against a loopback server that
/// checks what a confidential client sends; and a check that the article shows exactly this code (the
/// `// sample-begin:` convention of ``CodeSamplesTests``).
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ServerSideClientsTests {
    static let article = "Sources/SessionKit/SessionKit.docc/ServerSideClients.md"

    @Test func serverSideClientSample() async throws {
        let clientSecret = "s3cret:with+odd chars"
        let expectedBasic = "Basic " + Data("reports-backend:s3cret%3Awith%2Bodd+chars".utf8).base64EncodedString()
        try await LocalServer.withRunning { server in
            // An authorization server that accepts only this client, authenticated with HTTP Basic.
            let tokens = #"{"access_token":"at-2","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-2"}"#
            let refused = #"{"error":"invalid_client"}"#
            server.route("POST", "/token") { request in
                request.header("Authorization") == expectedBasic ? .json(tokens) : .json(refused, status: 401)
            }
            server.route("POST", "/revoke") { request in
                request.header("Authorization") == expectedBasic ? .text("") : .json(refused, status: 401)
            }
            let provider = server.baseURL
            let refreshToken = "rt-1"
            var outcome = ""

            // sample-begin: server-side-client
            let oauth = OAuthClient(
                configuration: .init(
                    tokenEndpoint: provider.appendingPathComponent("token"),
                    revocationEndpoint: provider.appendingPathComponent("revoke"),
                    clientID: "reports-backend",
                    clientAuthentication: .clientSecretBasic(clientSecret),  // from your secret store
                    resources: [URL(string: "https://api.example.com/")!]))
            do {
                let renewed = try await oauth.refresh(using: refreshToken)  // authenticated, for api.example.com
                outcome = "renewed until \(renewed.expiresAt != nil)"
                try await oauth.revoke(renewed.refreshToken ?? refreshToken, hint: .refreshToken)
            } catch let error as SessionError where error.oauthError == "invalid_client" {
                // The client's own credentials were refused (a rotated secret?): fix the configuration.
                // The user's grant is fine; this is not refreshRejected, so nobody is signed out.
                outcome = "client refused"
            }
            // sample-end: server-side-client

            #expect(outcome == "renewed until true")
            let sent = server.requests
            #expect(sent.map(\.path) == ["/token", "/revoke"])
            #expect(sent.allSatisfy { $0.header("Authorization") == expectedBasic })
            #expect(
                sent[0].bodyText
                    == "grant_type=refresh_token&refresh_token=rt-1&resource=https%3A%2F%2Fapi.example.com%2F")
            #expect(!sent[0].bodyText.contains("client_secret") && !sent[1].bodyText.contains("client_id"))
        }
    }

    @Test func articleShowsTheTestedCode() throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let document = try String(contentsOf: root.appendingPathComponent(Self.article), encoding: .utf8)
        let shown = try CodeSamplesTests.markedBlocks(in: document)
        #expect(shown.map(\.name) == ["server-side-client"])
        for (name, block) in shown {
            let tested = try #require(CodeSamplesTests.sample(name, in: source), "no sample \(name) here")
            #expect(block == tested, "\(Self.article): the block marked \(name) differs from the tested code")
        }
    }
}
