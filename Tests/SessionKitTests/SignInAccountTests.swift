import Foundation
import SessionKit
import Testing

/// `signIn(makeCurrent:authenticate:)`: the grant names the account, usually through the ID token it returns.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SignInAccountTests {
    /// An unsigned compact JWS with these claims (the signature part is never read).
    func idToken(_ claims: String) -> String {
        func encode(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        }
        return encode(#"{"alg":"RS256"}"#) + "." + encode(claims) + ".c2lnbmF0dXJl"
    }

    @Test func theAccountTheGrantNamesIsSignedInAndStored() async throws {
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store))
        let token = idToken(#"{"iss":"https://id.example","sub":"alice-42","name":"Alice"}"#)
        let session = try await manager.signIn {
            let tokens = TokenSet(accessToken: "access-a", refreshToken: "refresh-a", idToken: token)
            return (try Account(idToken: tokens.idToken ?? ""), tokens)
        }
        let alice = Account(issuer: "https://id.example", subject: "alice-42")
        #expect(session.account == alice)
        #expect(session.account.displayName == "Alice")
        #expect(manager.current === session)
        #expect(manager.state == .active(alice, offline: false))
        #expect(await store.load(for: alice)?.refreshToken == "refresh-a")
    }

    @Test func anIDTokenWithoutASubjectStoresNothing() async throws {
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store))
        let token = idToken(#"{"iss":"https://id.example"}"#)
        await #expect(throws: SessionError.self) {
            try await manager.signIn {
                let tokens = TokenSet(accessToken: "access-a", refreshToken: "refresh-a", idToken: token)
                return (try Account(idToken: tokens.idToken ?? ""), tokens)
            }
        }
        #expect(manager.current == nil)
        guard case .failed(let error) = manager.state else {
            Issue.record("state after a failed sign-in: \(manager.state)")
            return
        }
        #expect(error.code == .malformedTokenResponse)
        #expect(await store.accounts().isEmpty)
    }
}
