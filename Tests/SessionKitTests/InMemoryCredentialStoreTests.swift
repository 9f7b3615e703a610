import SessionKit
import Testing

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct InMemoryCredentialStoreTests {
    @Test(arguments: CredentialStoreContract.Check.allCases)
    func meetsTheStoreContract(_ check: CredentialStoreContract.Check) async throws {
        try await check.run { InMemoryCredentialStore() }
    }
}
