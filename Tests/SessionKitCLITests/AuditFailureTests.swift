import Foundation
import SessionKit
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

/// Every way of not getting an HTTP answer exits 3 with a message that names the host and port, and no token.
@Suite(.timeLimit(.minutes(10))) struct AuditFailureTests {
    static let tokens = ["SESSIONKIT_TOKEN_A": "failure-token-a-0123", "SESSIONKIT_TOKEN_B": "failure-token-b-0123"]

    private func auditCache(_ url: URL, timeout: String? = nil) async -> (ExitCode, CapturedConsole) {
        let captured = CapturedConsole(environment: Self.tokens)
        var arguments = ["audit", "cache", "--url", url.absoluteString]
        if let timeout { arguments += ["--timeout", timeout] }
        let status = await captured.run(arguments)
        #expect(!captured.all.contains("failure-token"), "a token was printed")
        #expect(captured.output.isEmpty)
        return (status, captured)
    }

    @Test func anUnreachablePortExitsThree() async throws {
        let server = try await LocalServer.start()
        let url = server.url("/me")
        await server.stop()
        let (status, captured) = await auditCache(url)
        #expect(status == .failure)
        #expect(captured.errors.contains("could not connect to 127.0.0.1:\(url.port ?? 0)"), "\(captured.errors)")
    }

    @Test func withJSONAFailureIsStillOneObject() async throws {
        let server = try await LocalServer.start()
        let url = server.url("/me")
        await server.stop()
        let captured = CapturedConsole(environment: Self.tokens)
        #expect(await captured.run(["audit", "cache", "--url", url.absoluteString, "--json"]) == .failure)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(captured.output.utf8)) as? [String: Any])
        #expect(Set(root.keys) == ["audit", "url", "verdict", "exitCode", "reason"])
        #expect(root["verdict"] as? String == "inconclusive")
        #expect((root["reason"] as? String)?.contains("could not connect to 127.0.0.1") == true)
    }

    @Test func anAnswerThatIsNotHTTPExitsThree() async throws {
        try await LocalServer.withRunning { server in
            server.route("/me") { _ in LocalServer.Response().failing(with: .garbage) }
            let (status, captured) = await auditCache(server.url("/me"))
            #expect(status == .failure)
            #expect(captured.errors.contains("did not answer with HTTP"), "\(captured.errors)")
        }
    }

    /// The one test that waits for real: the handler is held at a gate until the client gives up after 1 s.
    @Test func aServerThatNeverAnswersTimesOutAndExitsThree() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("/me") { _ in
                await gate.wait()
                return .json("{}")
            }
            let (status, captured) = await auditCache(server.url("/me"), timeout: "1")
            gate.open()
            #expect(status == .failure)
            #expect(captured.errors.contains("did not answer within 1 s (--timeout)"), "\(captured.errors)")
        }
    }

    @Test func httpsToAPortThatSpeaksPlainHTTPIsATLSFailure() async throws {
        // The TLS ClientHello never completes an HTTP request head; a short request timeout makes the server answer
        // it at once with a plain-text 408, which is what the client's TLS layer then fails to read.
        let configuration = LocalServer.Configuration(requestTimeout: .milliseconds(100))
        try await LocalServer.withRunning(configuration: configuration) { server in
            server.route("/me") { _ in .json("{}") }
            let url = URL(string: "https://127.0.0.1:\(server.port)/me")!
            let (status, captured) = await auditCache(url, timeout: "5")
            #expect(status == .failure)
            #expect(
                captured.errors.contains("TLS handshake with 127.0.0.1:\(server.port) failed"), "\(captured.errors)")
        }
    }

    @Test func logoutAuditReportsAnUnreachableRevocationEndpointWithExitThree() async throws {
        let gone = try await LocalServer.start()
        let revocation = gone.url("/revoke")
        await gone.stop()
        try await LocalServer.withRunning { server in
            server.route("/me") { _ in .json("{}") }
            let captured = CapturedConsole(
                environment: [
                    "SESSIONKIT_ACCESS_TOKEN": "failure-token-at", "SESSIONKIT_REFRESH_TOKEN": "failure-token-rt",
                ])
            let status = await captured.run([
                "audit", "logout", "--resource", server.url("/me").absoluteString, "--revocation-endpoint",
                revocation.absoluteString, "--client-id", "app",
            ])
            #expect(status == .failure)
            #expect(captured.errors.contains("could not connect to 127.0.0.1:\(revocation.port ?? 0)"))
            #expect(!captured.all.contains("failure-token"))
        }
    }
}
