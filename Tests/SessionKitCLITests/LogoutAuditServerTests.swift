import Foundation
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

/// `sessionkit audit logout` against the project's real django-oauth-toolkit server: it passes when the arguments
/// are right, and every wrong argument or failing endpoint is inconclusive (exit 3) with the argument named, never
/// a leak (exit 1).
@Suite(
    .enabled(if: AuthServer.shouldRun, "the authorization server is not running (scripts/test starts it)"),
    .timeLimit(.minutes(10)))
struct LogoutAuditServerTests {
    private struct Arguments {
        var resource: URL
        var revocation: URL
        var tokenEndpoint: URL?
        var clientID = AuthServer.clientID

        var list: [String] {
            var list = [
                "audit", "logout", "--resource", resource.absoluteString, "--revocation-endpoint",
                revocation.absoluteString, "--client-id", clientID, "--access-token-env", "AT", "--refresh-token-env",
                "RT",
            ]
            if let tokenEndpoint { list += ["--token-endpoint", tokenEndpoint.absoluteString] }
            return list
        }
    }

    /// Signs a new user in, lets `prepare` adjust the server and the arguments, runs the audit.
    private func audit(
        _ change: (inout Arguments) -> Void = { _ in },
        prepare: (AuthServer, String) async throws -> Void = { _, _ in }
    ) async throws -> (ExitCode, CapturedConsole, AuthServer, (username: String, access: String, refresh: String)) {
        let server = try AuthServer.required()
        let user = try await server.signInNewUser()
        try await prepare(server, user.username)
        var arguments = Arguments(
            resource: server.url("/api/me"), revocation: server.url("/o/revoke_token/"),
            tokenEndpoint: server.url("/o/token/"))
        change(&arguments)
        let captured = CapturedConsole(environment: ["AT": user.access, "RT": user.refresh])
        let status = await captured.run(arguments.list)
        #expect(!captured.all.contains(user.access) && !captured.all.contains(user.refresh), "a token was printed")
        #expect(fitsEightyColumns(captured.output))
        return (status, captured, server, user)
    }

    @Test func theRightArgumentsPassAndTheTokensAreDead() async throws {
        let (status, captured, server, user) = try await audit()
        #expect(status == .ok, "\(captured.all)")
        #expect(captured.output.contains("PASS: both old tokens are rejected"))
        #expect(try await server.meStatus(accessToken: user.access) == 401)
    }

    @Test func anUnknownClientIsInconclusiveAndNamesTheClientID() async throws {
        let (status, captured, server, user) = try await audit { $0.clientID = "no-such-client" }
        #expect(status == .failure, "\(captured.all)")
        #expect(
            flattened(captured.output).contains(
                "invalid_client: the server does not accept this client; check --client-id"))
        #expect(flattened(captured.output).contains("INCONCLUSIVE: the tokens were not revoked"))
        #expect(try await server.meStatus(accessToken: user.access) == 200, "nothing was revoked, as it says")
    }

    @Test func aRevocationEndpointAnswering404IsInconclusive() async throws {
        let (status, captured, _, _) = try await audit {
            $0.revocation = $0.resource.deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("o/no-such-endpoint/")
        }
        #expect(status == .failure, "\(captured.all)")
        #expect(flattened(captured.output).contains("404: nothing revokes tokens there; check --revocation-endpoint"))
    }

    @Test func aRevocationEndpointRedirectingToALoginPageIsInconclusive() async throws {
        let server = try AuthServer.required()
        let (status, captured, _, _) = try await audit { $0.revocation = server.url("/o/authorize/") }
        #expect(status == .failure, "\(captured.all)")
        let output = flattened(captured.output)
        #expect(output.contains("302, a redirect to /test/login-required"), "\(captured.output)")
        #expect(output.contains("not a revocation endpoint (a login page?); check --revocation-endpoint"))
    }

    @Test(arguments: [500, 503])
    func aFailingRevocationEndpointIsInconclusive(status code: Int) async throws {
        let (status, captured, server, user) = try await audit(prepare: { server, username in
            try await server.control(username: username, ["revoke_status": code])
        })
        #expect(status == .failure, "\(captured.all)")
        #expect(flattened(captured.output).contains("\(code): the revocation endpoint failed and did not revoke"))
        #expect(try await server.meStatus(accessToken: user.access) == 200)
    }

    @Test func aRefreshGrantAnswering500IsInconclusiveAndNamesTheTokenEndpoint() async throws {
        let (status, captured, _, _) = try await audit(prepare: { server, username in
            try await server.control(username: username, ["token_status": 500])
        })
        #expect(status == .failure, "\(captured.all)")
        let output = flattened(captured.output)
        #expect(output.contains("3. GET the resource again with the same access token: rejected: 401"))
        #expect(output.contains("inconclusive: 500: the token endpoint failed"), "\(captured.output)")
        #expect(output.contains("check --token-endpoint"))
        #expect(!output.contains("FAIL"))
    }

    @Test func aResourceRedirectingToALoginPageIsInconclusiveAndNamesTheResource() async throws {
        let server = try AuthServer.required()
        let (status, captured, _, user) = try await audit { $0.resource = server.url("/o/authorize/") }
        #expect(status == .failure, "\(captured.all)")
        let output = flattened(captured.output)
        #expect(output.contains("the resource redirects before any logout (302 to /test/login-required"))
        #expect(output.contains("check --resource"))
        #expect(try await server.meStatus(accessToken: user.access) == 200, "nothing revoked before a live call")
    }

    /// nginx caches `/api/me` (`max-age=60`): the replay after revocation is a cache hit, and is named so.
    @Test func aRevokedTokenAnsweredFromACacheHitIsNamed() async throws {
        let server = try AuthServer.required()
        try await NginxProxy.withRunning(upstream: server.baseURL) { nginx in
            let (status, captured, _, _) = try await audit { $0.resource = nginx.url("/honour/api/me") }
            #expect(status == .leak, "\(captured.all)")
            let output = flattened(captured.output)
            #expect(
                output.contains(
                    "STILL ACCEPTED: 200 (X-Cache-Status: HIT): answered from a cache hit, not by the server"),
                "\(captured.output)")
            #expect(output.contains("the server itself rejects the token (401)"))
            #expect(!output.contains("JWTs"), "not the self-contained-token note: the server did revoke")
        }
    }

    @Test func jsonFollowsTheDocumentedSchema() async throws {
        let server = try AuthServer.required()
        let user = try await server.signInNewUser()
        let captured = CapturedConsole(environment: ["AT": user.access, "RT": user.refresh])
        let arguments = Arguments(
            resource: server.url("/api/me"), revocation: server.url("/o/revoke_token/"),
            tokenEndpoint: server.url("/o/token/"))
        #expect(await captured.run(arguments.list + ["--json"]) == .ok)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(captured.output.utf8)) as? [String: Any])
        #expect(Set(root.keys) == ["audit", "verdict", "exitCode", "reason", "steps", "mintedTokens"])
        #expect(root["audit"] as? String == "logout")
        #expect(root["verdict"] as? String == "pass")
        #expect(root["exitCode"] as? Int == 0)
        let steps = try #require(root["steps"] as? [[String: Any]])
        #expect(steps.map { $0["id"] as? String } == ["1", "2a", "2b", "3", "4"])
        #expect(steps.map { $0["result"] as? String } == ["live", "revoked", "revoked", "rejected", "rejected"])
        #expect(steps.allSatisfy { Set($0.keys) == ["id", "action", "status", "result", "detail"] })
        #expect(root["mintedTokens"] is NSNull)
    }
}
