import SessionKit
import Testing

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct AccountTests {
    @Test func identityIgnoresDisplayName() {
        let a = Account(issuer: "https://id.example", subject: "42", displayName: "Alice")
        let b = Account(issuer: "https://id.example", subject: "42", displayName: "Alice B.")
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.storageKey == b.storageKey)
    }

    @Test func storageKeysNeverCollideAcrossTheSeparator() {
        let a = Account(issuer: "https://id.example/a", subject: "b")
        let b = Account(issuer: "https://id.example", subject: "a/b")
        #expect(a != b)
        #expect(a.storageKey != b.storageKey)
        #expect(!a.storageKey.contains("/"))
    }

    @Test func tokenDescriptionsAreRedacted() {
        let tokens = TokenSet(accessToken: "secret-access", refreshToken: "secret-refresh", lifetime: .seconds(60))
        #expect(!tokens.description.contains("secret"))
        let record = CredentialRecord(account: Account(issuer: "i", subject: "s"), refreshToken: "secret-refresh")
        #expect(!record.description.contains("secret"))
        #expect(!"\(SessionError(.sessionEnded, "ended"))".contains("secret"))
    }
}
