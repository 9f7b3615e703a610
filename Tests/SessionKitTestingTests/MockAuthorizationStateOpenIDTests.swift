import Foundation
import SessionKit
import Testing

@testable import SessionKitTesting

/// The OpenID transitions of the mock's pure state, as plain function calls: which grants draft an ID token and
/// with what, how a tampering is used up, and what the end-session endpoint revokes.
@Suite(.timeLimit(.minutes(1))) struct MockAuthorizationStateOpenIDTests {
    static let now = ContinuousClock.now
    static let signedInAt = Date(timeIntervalSince1970: 1_800_000_000)

    static func state(openID: Bool = true) -> MockAuthorizationState {
        var state = MockAuthorizationState(settings: .init(clientID: "app", openID: openID))
        state.users = ["alice": "pw", "bob": "pw"]
        return state
    }

    /// Authorizes `user` with `nonce` and exchanges the code.
    static func codeGrant(
        _ state: inout MockAuthorizationState, user: String, scope: String, nonce: String?
    ) throws -> MockAuthorizationState.Reply {
        let pkce = PKCE()
        var query = [
            "client_id": "app", "redirect_uri": "http://127.0.0.1/cb", "response_type": "code", "scope": scope,
            "code_challenge": pkce.challenge, "code_challenge_method": "S256",
        ]
        query["nonce"] = nonce
        state.authorizationDecisions.append(user)
        let authorized = state.authorize(query, now: now, wallNow: signedInAt, issuer: "http://mock")
        let answer = try #require(authorized)
        let location = try #require(answer.location.flatMap(URLComponents.init(string:)))
        let code = try #require(location.queryItems?.first { $0.name == "code" }?.value)
        return state.token(
            [
                "grant_type": "authorization_code", "client_id": "app", "code": code,
                "redirect_uri": "http://127.0.0.1/cb", "code_verifier": pkce.verifier,
            ], now: now.advanced(by: .seconds(5)), wallNow: signedInAt.addingTimeInterval(5))
    }

    @Test func theCodeExchangeDraftsAnIDTokenWithTheAuthorizationRequestsNonce() throws {
        var state = Self.state()
        let reply = try Self.codeGrant(&state, user: "alice", scope: "openid profile", nonce: "n-1")
        let draft = try #require(reply.issued?.idToken)
        #expect(draft.user == "alice")
        #expect(draft.nonce == "n-1")
        #expect(draft.authTime == Self.signedInAt, "when the user approved, not when the code was exchanged")
        #expect(draft.accessToken == reply.issued?.accessToken)
        #expect(draft.tampering == nil)
    }

    @Test func noIDTokenWithoutOpenIDInTheScopeOrOnTheServer() throws {
        var state = Self.state()
        #expect(
            try Self.codeGrant(&state, user: "alice", scope: "profile openidish", nonce: "n").issued?.idToken == nil)
        var plain = Self.state(openID: false)
        #expect(try Self.codeGrant(&plain, user: "alice", scope: "openid", nonce: "n").issued?.idToken == nil)
    }

    @Test func aRefreshDraftsTheSameUserWithoutANonceAndTheSignInsAuthTime() throws {
        var state = Self.state()
        let first = try Self.codeGrant(&state, user: "alice", scope: "openid", nonce: "n-1")
        let refreshToken = try #require(first.issued?.refreshToken)
        let refreshed = state.token(
            ["grant_type": "refresh_token", "client_id": "app", "refresh_token": refreshToken],
            now: Self.now.advanced(by: .seconds(600)), wallNow: Self.signedInAt.addingTimeInterval(600))
        let draft = try #require(refreshed.issued?.idToken)
        #expect(draft.user == "alice")
        #expect(draft.nonce == nil)
        #expect(draft.authTime == Self.signedInAt)
    }

    @Test func eachTamperingIsUsedByOneIDTokenInOrder() throws {
        var state = Self.state()
        state.idTokenTamperings = [.expired, .anotherSubject]
        #expect(
            state.token(
                ["grant_type": "password", "client_id": "app", "username": "bob", "password": "pw"],
                now: Self.now, wallNow: Self.signedInAt
            ).issued?.idToken == nil, "no openid: the queue stays")
        let grants = (0..<3).map { _ in
            state.token(
                ["grant_type": "password", "client_id": "app", "username": "bob", "password": "pw", "scope": "openid"],
                now: Self.now, wallNow: Self.signedInAt)
        }
        #expect(grants.map { $0.issued?.idToken?.tampering } == [.expired, .anotherSubject, nil])
    }

    @Test func anEndSessionRevokesOnlyTheHintedUsersGrants() throws {
        var state = Self.state()
        let alice = try Self.codeGrant(&state, user: "alice", scope: "openid", nonce: "n")
        let aliceAgain = try Self.codeGrant(&state, user: "alice", scope: "openid", nonce: "n")
        let bob = try Self.codeGrant(&state, user: "bob", scope: "openid", nonce: "n")
        state.idTokenUsers["signed-for-alice"] = "alice"

        #expect(state.endSession(["id_token_hint": "forged", "client_id": "app"]).status == 400)
        #expect(state.endSession(["id_token_hint": "signed-for-alice", "client_id": "other"]).status == 400)
        #expect(state.endSession(["id_token_hint": "signed-for-alice"]).status == 400)
        #expect(state.endSessions.isEmpty)
        #expect(state.isActive(alice.issued?.refreshToken ?? "", now: Self.now))

        let answer = state.endSession([
            "id_token_hint": "signed-for-alice", "client_id": "app",
            "post_logout_redirect_uri": "https://app.example/out?x=1", "state": "a&b",
        ])
        #expect(answer.status == 302)
        #expect(answer.location == "https://app.example/out?x=1&state=a%26b")
        for tokens in [alice, aliceAgain] {
            #expect(!state.isActive(tokens.issued?.refreshToken ?? "", now: Self.now))
            #expect(!state.isActive(tokens.issued?.accessToken ?? "", now: Self.now))
        }
        #expect(state.isActive(bob.issued?.refreshToken ?? "", now: Self.now))
        #expect(
            state.endSessions == [
                .init(user: "alice", postLogoutRedirectURI: "https://app.example/out?x=1", state: "a&b")
            ])
        #expect(state.endSession(["id_token_hint": "signed-for-alice", "client_id": "app"]).status == 200)
    }
}
