import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A command-line sign-in against django-oauth-toolkit: the loopback listener on an ephemeral port of 127.0.0.1
/// (RFC 8252 §7.3, which the server honours for its registered `http://127.0.0.1/callback` on any port), the test
/// playing the browser: it follows the authorization URL as a signed-in user and delivers the server's redirect to
/// the listener, the way a browser would.
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: run scripts/test, which starts django-oauth-toolkit on loopback"
    )
)
struct LoopbackSignInIntegrationTests {
    typealias Fixture = AuthorizationServerFixture

    static func client(_ server: Fixture) -> OAuthClient {
        OAuthClient(
            configuration: .init(
                tokenEndpoint: server.url("/o/token/"), revocationEndpoint: server.url("/o/revoke_token/"),
                authorizationEndpoint: server.url("/o/authorize/"), clientID: Fixture.pkceClientID))
    }

    /// What the browser got from the listener: the status and the page.
    static func deliver(_ callback: URL) async -> (status: Int, page: String)? {
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        guard let (data, response) = try? await browser.data(for: URLRequest(url: callback)),
            let http = response as? HTTPURLResponse
        else { return nil }
        return (http.statusCode, String(decoding: data, as: UTF8.self))
    }

    /// `url` with its `state` replaced.
    static func replacingState(of url: URL, with state: String) -> URL {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.queryItems = components.queryItems?.map {
            $0.name == "state" ? URLQueryItem(name: "state", value: state) : $0
        }
        return components.url!
    }

    @Test func aBrowserSignInThroughTheLoopbackListenerGetsTokensAndTheClosePage() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let client = Self.client(server)
        let page = Locked<(status: Int, page: String)?>(nil)
        let redirect = Locked<URL?>(nil)
        let tokens = try await client.authorizeInBrowser(scope: "read") { url in
            // The browser: the user signs in, the server redirects to the listener's port.
            let callback = try await server.followAuthorization(url, as: user.username)
            redirect.withLock { $0 = callback }
            let answer = await Self.deliver(callback)
            page.withLock { $0 = answer }
        }
        let callback = try #require(redirect.withLock { $0 })
        #expect(callback.host == "127.0.0.1")
        #expect(callback.port != nil && callback.port != 80, "the server kept the listener's ephemeral port")
        let shown = try #require(page.withLock { $0 })
        #expect(shown.status == 200)
        #expect(shown.page.lowercased().contains("close"), "the page tells the user they can close the tab")
        #expect(try await server.me(accessToken: tokens.accessToken).status == 200)
        // A second delivery of the same callback finds the listener closed: one callback, once.
        #expect(await Self.deliver(callback) == nil)
    }

    @Test func aCallbackWithAnotherStateIsRefusedAndNoCodeIsExchanged() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let client = Self.client(server)
        try await server.clearLog(username: user.username)
        let page = Locked<(status: Int, page: String)?>(nil)
        let error = await #expect(throws: SessionError.self) {
            _ = try await client.authorizeInBrowser(scope: "read") { url in
                let callback = try await server.followAuthorization(url, as: user.username)
                let forged = Self.replacingState(of: callback, with: "forged-state")
                let answer = await Self.deliver(forged)
                page.withLock { $0 = answer }
            }
        }
        #expect(error?.code == .invalidInput)
        #expect(page.withLock { $0?.status } == 400)
        let exchanges = try await server.log().filter { $0.path == "/o/token/" && $0.username == user.username }
        #expect(exchanges.isEmpty, "a code was exchanged after a wrong state")
    }

    @Test func aCallbackAfterTheDeadlineFindsTheListenerClosed() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let client = Self.client(server)
        let pending = Locked<URL?>(nil)
        let error = await #expect(throws: SessionError.self) {
            _ = try await client.authorizeInBrowser(scope: "read", timeout: .milliseconds(300)) { url in
                // The user is slow: the redirect is ready, but the browser delivers it only after the deadline.
                pending.withLock { $0 = url }
            }
        }
        #expect(error?.code == .timedOut)
        let url = try #require(pending.withLock { $0 })
        let callback = try await server.followAuthorization(url, as: user.username)
        #expect(await Self.deliver(callback) == nil, "the listener still answered after its deadline")
    }
}
