import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A model of the browser sheet: it follows the provider's redirects as a browser would and hands back the URL it
/// ended on, or behaves as the test tells it (the user closes it, or something else answers).
final class BrowserSheetModel: WebAuthenticationSession {
    enum Behaviour: Sendable {
        case follow
        case cancel
        /// Follows, then returns this URL made from the one it ended on.
        case rewrite(@Sendable (URL) -> URL)
    }

    let behaviour: Behaviour
    /// Each sheet shown: its URL and whether it was ephemeral.
    let shown = Lock<[(url: URL, ephemeral: Bool)]>([])

    init(_ behaviour: Behaviour = .follow) { self.behaviour = behaviour }

    func authenticate(url: URL, redirectURI: URL, ephemeral: Bool) async throws -> URL {
        shown.withLock { $0.append((url, ephemeral)) }
        if case .cancel = behaviour { throw SessionError(.userCancelled, "the user closed the sheet") }
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (_, response) = try await browser.data(for: URLRequest(url: url))
        let landed = try #require(response.url)
        if case .rewrite(let change) = behaviour { return change(landed) }
        return landed
    }
}

/// Browser sign-in and sign-out through the system's sheet (issue 50), with a model of the sheet against the mock
/// OpenID provider: code + PKCE + nonce, ephemeral by default; a closed sheet is `userCancelled` and changes nothing;
/// a callback elsewhere or with another state exchanges no code.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct WebAuthenticationSignInTests {
    static func query(_ url: URL) -> [String: String] {
        Dictionary(
            (URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []).map {
                ($0.name, $0.value ?? "")
            },
            uniquingKeysWith: { first, _ in first })
    }

    @Test func aSignInThroughTheSheetIsEphemeralUsesPKCEAndANonceAndSignsTheUserIn() async throws {
        try await MockOpenIDProviderTests.withOpenIDMock { mock, provider in
            let sheet = BrowserSheetModel()
            let manager = SessionManager(
                configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: provider))
            try mock.approveNextAuthorization(as: "alice")
            let session = try await manager.signIn {
                try await provider.signIn(with: sheet, redirectURI: mock.callbackURL, scope: "profile")
            }
            #expect(session.account.subject == "alice" && session.account.issuer == mock.issuer)
            let shown = try #require(sheet.shown.withLock { $0 }.first)
            #expect(shown.ephemeral, "ephemeral by default")
            let query = Self.query(shown.url)
            #expect(query["code_challenge_method"] == "S256" && query["code_challenge"]?.isEmpty == false)
            #expect(query["nonce"]?.isEmpty == false && query["state"]?.isEmpty == false)
            #expect(query["scope"]?.split(whereSeparator: { $0 == " " || $0 == "+" }).contains("openid") == true)
            #expect(manager.state == .active(session.account, offline: false))

            // Signing out at the provider through the same sheet: the end-session URL with the ID token as hint,
            // and its redirect back with the state sent.
            let idToken = try #require(session.tokens?.idToken)
            try await provider.signOut(with: sheet, idTokenHint: idToken, postLogoutRedirectURI: mock.callbackURL)
            #expect(mock.endSessions.map(\.user) == ["alice"])
            #expect(sheet.shown.withLock { $0 }.count == 2)
            session.end()
        }
    }

    @Test func anAppWantingSingleSignOnOptsOutOfTheEphemeralSheet() async throws {
        try await MockOpenIDProviderTests.withOpenIDMock { mock, provider in
            let sheet = BrowserSheetModel()
            try mock.approveNextAuthorization(as: "bob")
            let signIn = try await provider.signIn(with: sheet, redirectURI: mock.callbackURL, ephemeral: false)
            #expect(signIn.account.subject == "bob")
            #expect(sheet.shown.withLock { $0 }.map(\.ephemeral) == [false])
        }
    }

    /// The user closes the sheet while Alice is signed in: `userCancelled`, and Alice stays signed in and current,
    /// with nothing stored for anyone else.
    @Test func aClosedSheetIsUserCancelledAndChangesNothing() async throws {
        try await MockOpenIDProviderTests.withOpenIDMock { mock, provider in
            let store = InMemoryCredentialStore()
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: provider))
            let alice = try await manager.signIn(Account(issuer: mock.issuer, subject: "alice"), tokens: tokens("a"))
            await #expect(throws: SessionError(.userCancelled, "the user closed the sheet")) {
                try await manager.signIn {
                    try await provider.signIn(with: BrowserSheetModel(.cancel), redirectURI: mock.callbackURL)
                }
            }
            #expect(manager.current === alice && alice.isActive)
            #expect(manager.state == .active(alice.account, offline: false))
            #expect(await store.accounts() == [alice.account])
            #expect(mock.tokenRequestCount == 0)
            alice.end()
        }
    }

    /// A callback at another address, or with another state, is refused before any code is exchanged.
    @Test func aCallbackElsewhereOrWithAnotherStateExchangesNoCode() async throws {
        try await MockOpenIDProviderTests.withOpenIDMock { mock, provider in
            let elsewhere = BrowserSheetModel(
                .rewrite { url in
                    var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                    components.path = "/not-the-callback"
                    return components.url!
                })
            try mock.approveNextAuthorization(as: "alice")
            await #expect(throws: SessionError.self) {
                _ = try await provider.signIn(with: elsewhere, redirectURI: mock.callbackURL)
            }
            let forged = BrowserSheetModel(
                .rewrite { url in
                    var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                    components.queryItems = (components.queryItems ?? []).map {
                        $0.name == "state" ? URLQueryItem(name: "state", value: "forged") : $0
                    }
                    return components.url!
                })
            try mock.approveNextAuthorization(as: "alice")
            do {
                _ = try await provider.signIn(with: forged, redirectURI: mock.callbackURL)
                Issue.record("a forged state was accepted")
            } catch let error as SessionError {
                #expect(error.code == .invalidInput)
            }
            #expect(mock.tokenRequestCount == 0, "no code was exchanged")
        }
    }

    /// The provider's sign-out through the sheet checks the state it returns: another one, or none, is refused.
    @Test func aSignOutReturningAnotherStateOrNoneIsRefused() async throws {
        try await MockOpenIDProviderTests.withOpenIDMock { mock, provider in
            try mock.approveNextAuthorization(as: "alice")
            let signIn = try await provider.signIn(with: BrowserSheetModel(), redirectURI: mock.callbackURL)
            let idToken = try #require(signIn.tokens.idToken)
            func replacingState(with value: String?) -> BrowserSheetModel {
                BrowserSheetModel(
                    .rewrite { url in
                        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                        let others = (components.queryItems ?? []).filter { $0.name != "state" }
                        components.queryItems = others + (value.map { [URLQueryItem(name: "state", value: $0)] } ?? [])
                        return components.url!
                    })
            }
            for sheet in [replacingState(with: "forged"), replacingState(with: nil)] {
                do {
                    try await provider.signOut(
                        with: sheet, idTokenHint: idToken, postLogoutRedirectURI: mock.callbackURL)
                    Issue.record("a sign-out returning another state was accepted")
                } catch let error as SessionError {
                    #expect(error.code == .invalidInput)
                }
            }
        }
    }
}
