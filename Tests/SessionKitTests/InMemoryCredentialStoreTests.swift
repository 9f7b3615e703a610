import SessionKit
import Testing

@Suite struct InMemoryCredentialStoreTests {
    @Test(arguments: CredentialStoreContract.Check.allCases)
    func meetsTheStoreContract(_ check: CredentialStoreContract.Check) async throws {
        try await check.run { InMemoryCredentialStore() }
    }
}
