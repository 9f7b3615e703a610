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
            installTokenEndpoint(on: server)
        }

        func installTokenEndpoint(on server: LocalServer) {
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
            // The tokens the grant handed out are revoked, and since this server revokes nothing, the output says
            // plainly that they are still live.
            let revoked = server.requests.filter { $0.path == "/revoke" }.map(\.bodyText)
            #expect(revoked.count == 4)
            #expect(revoked.suffix(2).contains { $0.contains("token=rt-new") })
            #expect(revoked.suffix(2).contains { $0.contains("token=at-new") })
            #expect(output.contains("STILL LIVE after the audit: the new access token (the resource still accepts it"))
            #expect(!output.contains("were revoked"))
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

    /// A server that keeps the old tokens alive but does revoke the ones its grant issues: the audit revokes them
    /// and checks the new access token is refused before saying so.
    @Test func tokensTheGrantIssuedAreRevokedForRealAndSaidSo() async throws {
        try await LocalServer.withRunning { server in
            let revoked = Lock<Set<String>>([])
            server.route("GET", "/me") { request in
                let token = request.bearerToken ?? ""
                let live =
                    token == NonRevokingServer.access || (token == "at-new" && !revoked.withLock { $0.contains(token) })
                return live ? .json(#"{"user":"alice"}"#) : .status(401)
            }
            server.route("POST", "/revoke") { request in
                for token in ["at-new", "rt-new"]
                where request.bodyText.contains("token=\(token)&") || request.bodyText.hasSuffix("token=\(token)") {
                    revoked.withLock { _ = $0.insert(token) }
                }
                return .status(200)
            }
            NonRevokingServer().installTokenEndpoint(on: server)
            let captured = CapturedConsole(
                environment: ["AT": NonRevokingServer.access, "RT": NonRevokingServer.refresh])
            let status = await captured.run(
                arguments(
                    resource: server.url("/me"), revocation: server.url("/revoke"), tokenEndpoint: server.url("/token"),
                    clientID: "app") + ["--access-token-env", "AT", "--refresh-token-env", "RT"])
            #expect(status == .leak)
            #expect(revoked.withLock { $0 } == ["at-new", "rt-new"], "\(server.requests.map(\.bodyText))")
            #expect(
                flattened(captured.output).contains(
                    "the 2 tokens the grant issued were revoked, and the resource now rejects the new access token"))
        }
    }

    /// A 200 whose body is empty of user data after logout is neither a pass nor a leak.
    @Test func anEmptySuccessAfterLogoutIsDoubtful() async throws {
        try await LocalServer.withRunning { server in
            let revoked = Lock(false)
            server.route("GET", "/me") { _ in
                revoked.withLock { $0 } ? .json("{}") : .json(#"{"user":"alice"}"#)
            }
            server.route("POST", "/revoke") { _ in
                revoked.withLock { $0 = true }
                return .status(200)
            }
            let captured = CapturedConsole(environment: [
                "AT": "at-q9x-0123456789zz", "RT": "rt-q9x-0123456789zz",
            ])
            let status = await captured.run(
                arguments(
                    resource: server.url("/me"), revocation: server.url("/revoke"), tokenEndpoint: nil, clientID: "app")
                    + ["--access-token-env", "AT", "--refresh-token-env", "RT"])
            #expect(status == .failure, "\(captured.all)")
            let output = flattened(captured.output)
            #expect(output.contains("doubtful: 200 with an empty body after logout"))
            #expect(output.contains("DOUBTFUL:"))
            #expect(!output.contains("PASS") && !output.contains("FAIL"))
        }
    }

    /// A server trickling one byte a second is cut off at --timeout, not after the whole body.
    @Test(.timeLimit(.minutes(1))) func theTimeoutIsADeadlineOnTheWholeRequest() async throws {
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { _ in
                LocalServer.Response.json("{}").failing(with: .trickle(every: .milliseconds(200)))
            }
            let captured = CapturedConsole(environment: ["AT": "at-trickle-0123456789", "RT": "rt-trickle-0123456789"])
            let status = await captured.run(
                arguments(
                    resource: server.url("/me"), revocation: server.url("/revoke"), tokenEndpoint: nil, clientID: "app")
                    + ["--access-token-env", "AT", "--refresh-token-env", "RT", "--timeout", "1"])
            #expect(status == .failure)
            #expect(
                captured.errors.contains("127.0.0.1:\(server.port) did not answer within 1 s (--timeout)"),
                "\(captured.errors)")
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
