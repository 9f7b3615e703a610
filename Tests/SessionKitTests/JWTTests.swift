import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct JWTTests {
    private typealias Support = OAuthTestSupport

    @Test func readsTheWellKnownHS256Example() throws {
        let token =
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
            + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
        let claims = try JWT.claims(of: token)
        #expect(claims == ["sub": .string("1234567890"), "name": .string("John Doe"), "iat": .number(1_516_239_022)])
        #expect(try JWT.subject(of: token) == "1234567890")
        #expect(try JWT.displayName(of: token) == "John Doe")
    }

    @Test func namesTheAccount() throws {
        let token = Support.jwt(payload: #"{"iss":"https://id.example","sub":"42","preferred_username":"alice"}"#)
        #expect(try JWT.issuer(of: token) == "https://id.example")
        let account = try JWT.account(from: token)
        #expect(account == Account(issuer: "https://id.example", subject: "42"))
        #expect(account.displayName == "alice")
    }

    @Test func prefersNameThenPreferredUsernameThenEmail() throws {
        let all = Support.jwt(payload: #"{"name":"A","preferred_username":"b","email":"c@e"}"#)
        #expect(try JWT.displayName(of: all) == "A")
        let emptyName = Support.jwt(payload: #"{"name":"\n","preferred_username":5,"email":"c@e"}"#)
        #expect(try JWT.displayName(of: emptyName) == "c@e")
        #expect(try JWT.displayName(of: Support.jwt(payload: "{}")) == nil)
        // Without a display claim the account shows its subject.
        #expect(try JWT.account(from: Support.jwt(payload: #"{"iss":"i","sub":"s"}"#)).displayName == "s")
    }

    @Test func acceptsPaddedSegmentsAndAnEmptySignature() throws {
        let header = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8))
        let payload = Base64URL.encode(Array(#"{"sub":"x"}"#.utf8))
        let padding = String(repeating: "=", count: (4 - payload.count % 4) % 4)
        #expect(!padding.isEmpty)
        #expect(try JWT.subject(of: header + "." + payload + padding + ".") == "x")
    }

    @Test(arguments: [
        "", ".", "..", "a.b", "a.b.c.d", "a.b.c.d.e", "not a token", "e30.e30", "e30.e30.e30.e30",
        "e30.W10.", "W10.e30.", "e30.IjEi.", "e30.e30+.", "e30.e3/.", "e30.e 30.", "e30.e30==.", "e3.e30.",
        "e30.eyJzdWIiOiJ4Iiwic3ViIjoieSJ9.",
    ])
    func refusesWhatIsNotAReadableJWT(token: String) {
        let error = Support.sessionError { _ = try JWT.claims(of: token) }
        #expect(error?.code == .malformedTokenResponse)
    }

    @Test func namesAnEncryptedToken() {
        let error = Support.sessionError { _ = try JWT.claims(of: "e30.a.b.c.d") }
        #expect(error?.message.contains("JWE") == true)
    }

    @Test(arguments: [#"{}"#, #"{"sub":""}"#, #"{"sub":42}"#, #"{"sub":null}"#, #"{"sub":["x"]}"#])
    func refusesAMissingOrMistypedSubject(payload: String) {
        let error = Support.sessionError { _ = try JWT.subject(of: Support.jwt(payload: payload)) }
        #expect(error?.code == .malformedTokenResponse)
        #expect(error?.message.contains("sub") == true)
    }

    @Test func neverPutsTokenContentInMessages() {
        let token = Support.jwt(payload: #"{"sub": "SECRETSUBJECT", "x": tru}"#)
        let error = Support.sessionError { _ = try JWT.claims(of: token) }
        #expect(error?.message.contains("SECRET") == false)
        #expect(error?.message.contains(String(token.prefix(10))) == false)
    }
}
