import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// No token leaves through `dump()`, `Mirror`, or an error's message, and an error keeps the failure that caused
/// it, typed.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CredentialRedactionTests {
    private static let secrets = ["at-SECRET-1", "rt-SECRET-2", "id-SECRET-3", "code-SECRET-4", "pw-SECRET-5"]

    /// Everything `dump()` prints and every value `Mirror` reaches, recursively.
    private static func reflections(of value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        var texts = [dumped]
        var pending: [Any] = [value]
        while let next = pending.popLast() {
            for child in Mirror(reflecting: next).children {
                texts.append(String(describing: child.value))
                pending.append(child.value)
            }
        }
        return texts
    }

    private static func expectNoSecret(in value: Any, _ name: String) {
        for text in reflections(of: value) {
            for secret in secrets { #expect(!text.contains(secret), "\(name) shows \(secret): \(text)") }
        }
    }

    @Test func tokenSetsShowNoTokenThroughDumpOrMirror() {
        let tokens = TokenSet(accessToken: "at-SECRET-1", refreshToken: "rt-SECRET-2", idToken: "id-SECRET-3")
        Self.expectNoSecret(in: tokens, "TokenSet")
        Self.expectNoSecret(in: [tokens], "[TokenSet]")
        #expect(Mirror(reflecting: tokens).children.contains { $0.label == "tokenType" })
        // Each token is there by name, redacted: a debugger shows that it is held, never what it is.
        let labels = Set(Mirror(reflecting: tokens).children.compactMap(\.label))
        #expect(labels.isSuperset(of: ["accessToken", "refreshToken", "idToken"]), "\(labels)")
    }

    @Test func credentialRecordsShowNoTokenThroughDumpOrMirror() {
        let record = CredentialRecord(
            account: alice, refreshToken: "rt-SECRET-2", accessToken: "at-SECRET-1", idToken: "id-SECRET-3")
        Self.expectNoSecret(in: record, "CredentialRecord")
        #expect(Mirror(reflecting: record).children.contains { $0.label == "account" })
    }

    @Test func tokenRequestsShowNoCredentialThroughDumpOrMirror() throws {
        let requests = [
            try TokenRequest(
                grant: .refreshToken("rt-SECRET-2", scope: "read"), clientID: "app",
                additionalParameters: ["client_secret": "pw-SECRET-5"]),
            try TokenRequest(
                grant: .authorizationCode(code: "code-SECRET-4", codeVerifier: PKCE().verifier, redirectURI: "app:/cb"),
                clientID: "app"),
            try TokenRequest(grant: .password(username: "alice", password: "pw-SECRET-5", scope: nil), clientID: "app"),
        ]
        for request in requests {
            Self.expectNoSecret(in: request, "TokenRequest")
            Self.expectNoSecret(in: request.grant, "TokenRequest.Grant")
            Self.expectNoSecret(in: request.formParameters, "TokenRequest.FormParameter")
        }
    }

    /// A token endpoint that quotes the refresh token it was sent in its error_description: the message, the
    /// description and the localized description show the rest of what it said, and never the token.
    @Test func aServersErrorDescriptionNeverCarriesATokenIntoAMessage() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("POST", "/token") { request in
                let sent =
                    request.bodyText.split(separator: "&").first { $0.hasPrefix("refresh_token=") }?
                    .dropFirst("refresh_token=".count) ?? ""
                return .json(
                    #"{"error":"invalid_grant","error_description":"refresh token \#(sent) was revoked"}"#,
                    status: 400)
            }
            let client = OAuthClient(configuration: .init(tokenEndpoint: server.url("/token"), clientID: "app"))
            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: "rt-SECRET-2") }
            #expect(error?.code == .refreshRejected)
            for text in [error?.message, error?.description, error?.localizedDescription, error?.errorDescription] {
                #expect(text?.contains("rt-SECRET-2") == false, "\(text ?? "nil")")
                #expect(text?.contains("was revoked") == true, "\(text ?? "nil")")
            }
        }
    }

    /// A transfer that fails below HTTP keeps its URLError, typed, with its code.
    @Test func aFailedRequestKeepsItsURLError() async throws {
        let server = try await LocalServer.start()
        let url = server.url("/gone")
        await server.stop()
        let session = UserSession(
            account: alice, tokens: tokens("alice"), configuration: UserSession.Configuration(retryPolicy: .never))
        defer { session.end() }
        for call: @Sendable () async throws -> Void in [
            { _ = try await session.data(for: URLRequest(url: url)) },
            { _ = try await session.download(for: URLRequest(url: url)) },
        ] {
            let error = await #expect(throws: SessionError.self) { try await call() }
            #expect(error?.code == .networkUnavailable)
            let underlying = error?.underlyingError as? URLError
            #expect(underlying?.code == .cannotConnectToHost)
            #expect(error?.localizedDescription == error?.message)
        }
    }

    @Test func errorsCompareByWhatTheySayNotByTheirCause() {
        let a = SessionError(.networkUnavailable, "down", underlyingError: URLError(.timedOut))
        let b = SessionError(.networkUnavailable, "down", underlyingError: URLError(.cannotConnectToHost))
        #expect(a == b)
        #expect(Set([a, b]).count == 1)
    }
}
