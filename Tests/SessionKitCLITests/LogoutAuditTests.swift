import Foundation
import SessionKit
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

@Suite(.timeLimit(.minutes(10))) struct LogoutAuditTests {
    private func arguments(
        resource: URL,
        revocation: URL,
        tokenEndpoint: URL?,
        clientID: String
    ) -> [String] {
        var arguments = [
            "audit", "logout", "--resource", resource.absoluteString, "--revocation-endpoint",
            revocation.absoluteString, "--client-id", clientID,
        ]
        if let tokenEndpoint { arguments += ["--token-endpoint", tokenEndpoint.absoluteString] }
        return arguments
    }

    /// An authorization server that revokes: the MASTG test passes.
    @Test func aServerThatRevokesPassesWithExitZero() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            let refreshToken = try #require(tokens.refreshToken)
            let captured = CapturedConsole(
                environment: ["SESSIONKIT_ACCESS_TOKEN": tokens.accessToken, "SESSIONKIT_REFRESH_TOKEN": refreshToken])
            let status = await captured.run(
                arguments(
                    resource: mock.userInfoEndpoint, revocation: mock.revocationEndpoint,
                    tokenEndpoint: mock.tokenEndpoint, clientID: "sessionkit-tests"))
            #expect(status == .ok, "\(captured.all)")
            #expect(captured.output.contains("PASS: both old tokens are rejected"))
            #expect(!captured.all.contains(tokens.accessToken) && !captured.all.contains(refreshToken))
            #expect(fitsEightyColumns(captured.output))

            // The wire: the resource, the refresh token's revocation, the access token's, the replay, the grant.
            let log = mock.requests
            #expect(log.map(\.path) == ["/api/me", "/revoke", "/revoke", "/api/me", "/token"])
            let revocations = log.filter { $0.path == "/revoke" }.map { request in
                Dictionary(uniqueKeysWithValues: formFields(request.bodyText))
            }
            #expect(revocations.map { $0["token_type_hint"] } == ["refresh_token", "access_token"])
            #expect(revocations.map { $0["token"] } == [refreshToken, tokens.accessToken])
            #expect(revocations.allSatisfy { $0["client_id"] == "sessionkit-tests" })
            #expect(log.filter { $0.path == "/api/me" }.allSatisfy { $0.bearerToken == tokens.accessToken })
            #expect(!mock.isActive(token: tokens.accessToken))
            #expect(!mock.isActive(token: refreshToken))
        }
    }

    @Test func withoutATokenEndpointOnlyTheAccessTokenIsChecked() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            let captured = CapturedConsole(input: [tokens.accessToken, tokens.refreshToken ?? ""])
            let status = await captured.run(
                arguments(
                    resource: mock.userInfoEndpoint, revocation: mock.revocationEndpoint, tokenEndpoint: nil,
                    clientID: "sessionkit-tests") + ["--access-token", "-", "--refresh-token", "-"])
            #expect(status == .ok, "\(captured.all)")
            #expect(captured.output.contains("not tried (no --token-endpoint)"))
            #expect(mock.tokenRequestCount == 0)
        }
    }

    /// A server whose revocation endpoint answers 200 and does nothing, as RFC 7009 allows for unknown tokens
    /// and as a broken server does for every token.
    private final class NonRevokingServer: Sendable {
        static let access = "at-still-valid-0123456789"
        static let refresh = "rt-still-valid-0123456789"

        func install(on server: LocalServer) {
            server.route("GET", "/me") { request in
                request.bearerToken == Self.access || request.bearerToken == "at-new" ? .json("{}") : .status(401)
            }
            server.route("POST", "/revoke") { _ in .status(200) }
            server.route("POST", "/token") { request in
                guard request.bodyText.contains("grant_type=refresh_token"),
                    request.bodyText.contains("refresh_token=\(Self.refresh)")
                else { return .json(#"{"error":"invalid_grant"}"#, status: 400) }
                return .json(
                    #"{"access_token":"at-new","refresh_token":"rt-new","token_type":"Bearer","expires_in":60}"#,
                    headers: [("Cache-Control", "no-store")])
            }
        }
    }

    @Test func aRevocationEndpointThatDoesNothingFailsWithExitOne() async throws {
        try await LocalServer.withRunning { server in
            NonRevokingServer().install(on: server)
            let captured = CapturedConsole(
                environment: ["AT": NonRevokingServer.access, "RT": NonRevokingServer.refresh])
            let status = await captured.run(
                arguments(
                    resource: server.url("/me"), revocation: server.url("/revoke"), tokenEndpoint: server.url("/token"),
                    clientID: "app") + ["--access-token-env", "AT", "--refresh-token-env", "RT"])
            #expect(status == .leak, "\(captured.all)")
            let output = flattened(captured.output)
            #expect(output.contains("STILL ACCEPTED: 200, the revoked access token still works"))
            #expect(output.contains("STILL ACCEPTED: 200, the revoked refresh token was exchanged"))
            #expect(captured.output.contains("FAIL"))
            #expect(
                !captured.all.contains(NonRevokingServer.access) && !captured.all.contains(NonRevokingServer.refresh))
            // The tokens the grant handed out are revoked again, so the audit leaves nothing new alive.
            let revoked = server.requests.filter { $0.path == "/revoke" }.map(\.bodyText)
            #expect(revoked.count == 4)
            #expect(revoked.suffix(2).contains { $0.contains("token=rt-new") })
            #expect(revoked.suffix(2).contains { $0.contains("token=at-new") })
        }
    }

    @Test func anAccessTokenRefusedBeforeLogoutIsAUsageError() async throws {
        try await LocalServer.withRunning { server in
            NonRevokingServer().install(on: server)
            let captured = CapturedConsole(input: ["wrong-access-token", "wrong-refresh-token"])
            let status = await captured.run(
                arguments(
                    resource: server.url("/me"), revocation: server.url("/revoke"), tokenEndpoint: nil, clientID: "app")
                    + ["--access-token", "-", "--refresh-token", "-"])
            #expect(status == .usage)
            #expect(captured.errors.contains("the access token was refused before any logout (status 401)"))
            #expect(server.requests.filter { $0.path == "/revoke" }.isEmpty, "nothing is revoked")
        }
    }

    @Test func aResourceAnsweringNeitherSuccessNorRefusalIsInconclusive() {
        #expect(
            LogoutAudit.check(resourceAnswer: HTTPExchange(status: 500, headers: [:], body: Data())).passed == false)
        #expect(LogoutAudit.check(resourceAnswer: HTTPExchange(status: 403, headers: [:], body: Data())).passed)
        let (check, issued) = LogoutAudit.check(
            tokenAnswer: HTTPExchange(status: 401, headers: [:], body: Data(#"{"error":"invalid_client"}"#.utf8)))
        #expect(
            check
                == .inconclusive(
                    "401 invalid_client: the server does not accept this client for the grant; check --client-id"))
        #expect(issued == nil)
    }
}

/// The name-value pairs of a form body, for checking what was sent.
private func formFields(_ body: String) -> [(String, String)] {
    var components = URLComponents()
    components.percentEncodedQuery = body.replacingOccurrences(of: "+", with: "%20")
    return (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }
}
