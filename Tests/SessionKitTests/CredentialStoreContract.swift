import Foundation
import SessionKit
import Testing

/// What every ``CredentialStore`` must do, written once and run against each implementation.
///
/// A suite runs `@Test(arguments: CredentialStoreContract.Check.allCases)` and hands each check a factory that
/// builds a fresh, empty store of its kind.
enum CredentialStoreContract {
    typealias Factory = @Sendable () async throws -> any CredentialStore

    enum Check: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case roundTrip
        case saveReplacesTheWholeRecord
        case deleteOneLeavesTheOthers
        case deleteMissingSucceeds
        case deleteAllRemovesEveryRecord
        case accountsListsEverySavedAccount
        case concurrentSavesOfDifferentAccounts
        case unicodeAndHugeTokens
        case sameSubjectAtDifferentIssuersStaysSeparate

        var testDescription: String { rawValue }

        func run(_ make: Factory) async throws {
            let store = try await make()
            switch self {
            case .roundTrip: try await CredentialStoreContract.roundTrip(store)
            case .saveReplacesTheWholeRecord: try await CredentialStoreContract.saveReplacesTheWholeRecord(store)
            case .deleteOneLeavesTheOthers: try await CredentialStoreContract.deleteOneLeavesTheOthers(store)
            case .deleteMissingSucceeds: try await CredentialStoreContract.deleteMissingSucceeds(store)
            case .deleteAllRemovesEveryRecord: try await CredentialStoreContract.deleteAllRemovesEveryRecord(store)
            case .accountsListsEverySavedAccount:
                try await CredentialStoreContract.accountsListsEverySavedAccount(store)
            case .concurrentSavesOfDifferentAccounts:
                try await CredentialStoreContract.concurrentSavesOfDifferentAccounts(store)
            case .unicodeAndHugeTokens: try await CredentialStoreContract.unicodeAndHugeTokens(store)
            case .sameSubjectAtDifferentIssuersStaysSeparate:
                try await CredentialStoreContract.sameSubjectAtDifferentIssuersStaysSeparate(store)
            }
        }
    }

    // MARK: - Fixtures

    static func account(_ number: Int, issuer: String = "https://id.example") -> Account {
        Account(issuer: issuer, subject: "user-\(number)", displayName: "User \(number)")
    }

    /// A record with every field set, distinct per account and `version`.
    static func fullRecord(for account: Account, version: Int = 1) -> CredentialRecord {
        CredentialRecord(
            account: account,
            refreshToken: "refresh-\(account.storageKey)-\(version)",
            accessToken: "access-\(account.storageKey)-\(version)",
            accessTokenExpiresAt: Date(timeIntervalSince1970: 1_900_000_000.25 + Double(version)),
            idToken: "id-\(account.storageKey)-\(version)",
            scope: "openid profile v\(version)",
            tokenType: "Bearer",
            savedAt: Date(timeIntervalSinceReferenceDate: 700_000_000.123_456 + Double(version))
        )
    }

    // MARK: - Checks

    static func roundTrip(_ store: any CredentialStore) async throws {
        let record = fullRecord(for: account(1))
        try await store.save(record)
        #expect(try await store.load(for: account(1)) == record)
        #expect(try await store.load(for: account(2)) == nil)
    }

    static func saveReplacesTheWholeRecord(_ store: any CredentialStore) async throws {
        try await store.save(fullRecord(for: account(1)))
        // The second record drops the optional fields: none of the first may survive.
        let replacement = CredentialRecord(account: account(1), refreshToken: "refresh-only", tokenType: "bearer")
        try await store.save(replacement)
        let loaded = try await store.load(for: account(1))
        #expect(loaded == replacement)
        #expect(loaded?.accessToken == nil)
        #expect(loaded?.idToken == nil)
        #expect(loaded?.scope == nil)
    }

    static func deleteOneLeavesTheOthers(_ store: any CredentialStore) async throws {
        for number in 1...3 { try await store.save(fullRecord(for: account(number))) }
        try await store.delete(for: account(2))
        #expect(try await store.load(for: account(2)) == nil)
        #expect(try await store.load(for: account(1)) == fullRecord(for: account(1)))
        #expect(try await store.load(for: account(3)) == fullRecord(for: account(3)))
        #expect(Set(try await store.accounts()) == [account(1), account(3)])
    }

    static func deleteMissingSucceeds(_ store: any CredentialStore) async throws {
        try await store.delete(for: account(1))
        try await store.save(fullRecord(for: account(1)))
        try await store.delete(for: account(1))
        try await store.delete(for: account(1))
        #expect(try await store.load(for: account(1)) == nil)
        #expect(try await store.accounts().isEmpty)
    }

    static func deleteAllRemovesEveryRecord(_ store: any CredentialStore) async throws {
        for number in 1...3 { try await store.save(fullRecord(for: account(number))) }
        try await store.deleteAll()
        #expect(try await store.accounts().isEmpty)
        for number in 1...3 { #expect(try await store.load(for: account(number)) == nil) }
        // The store is still usable afterwards.
        try await store.save(fullRecord(for: account(4)))
        #expect(try await store.load(for: account(4)) == fullRecord(for: account(4)))
        try await store.deleteAll()
        try await store.deleteAll()
    }

    static func accountsListsEverySavedAccount(_ store: any CredentialStore) async throws {
        #expect(try await store.accounts().isEmpty)
        let saved = (1...5).map { account($0) }
        for account in saved { try await store.save(fullRecord(for: account)) }
        try await store.save(fullRecord(for: saved[0], version: 2))
        let listed = try await store.accounts()
        #expect(listed.count == saved.count)
        #expect(Set(listed) == Set(saved))
        #expect(Set(listed.map(\.displayName)) == Set(saved.map(\.displayName)))
    }

    static func concurrentSavesOfDifferentAccounts(_ store: any CredentialStore) async throws {
        let accounts = (1...16).map { account($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for account in accounts {
                group.addTask {
                    for version in 1...3 { try await store.save(fullRecord(for: account, version: version)) }
                }
            }
            try await group.waitForAll()
        }
        for account in accounts {
            #expect(try await store.load(for: account) == fullRecord(for: account, version: 3))
        }
        #expect(Set(try await store.accounts()) == Set(accounts))
    }

    static func unicodeAndHugeTokens(_ store: any CredentialStore) async throws {
        // NUL, quotes, backslashes, combining marks, right-to-left text, emoji and a lone high code point.
        let alphabet = ["\u{0}", "\"", "\\", "e\u{301}", "שלום", "👩‍👩‍👧", "日本", "\u{10FFFD}", "\n", "a"]
        let huge = (0..<65_536).map { alphabet[$0 % alphabet.count] }.joined()
        let unicodeAccount = Account(issuer: "https://ïd.example/ß", subject: "用户/42 ✓", displayName: "Zoë 👋")
        let record = CredentialRecord(
            account: unicodeAccount,
            refreshToken: huge,
            accessToken: "añ\u{0}👍" + huge.prefix(1000),
            idToken: String(huge.reversed()),
            scope: "lire écrire"
        )
        try await store.save(record)
        let loaded = try await store.load(for: unicodeAccount)
        #expect(loaded == record)
        #expect(loaded?.refreshToken?.unicodeScalars.count == huge.unicodeScalars.count)
        #expect(try await store.accounts().map(\.displayName) == ["Zoë 👋"])
    }

    static func sameSubjectAtDifferentIssuersStaysSeparate(_ store: any CredentialStore) async throws {
        let first = Account(issuer: "https://one.example", subject: "42")
        let second = Account(issuer: "https://two.example", subject: "42")
        // Different splits of the same characters must not meet either.
        let third = Account(issuer: "https://one.example/4", subject: "2")
        for account in [first, second, third] { try await store.save(fullRecord(for: account)) }
        #expect(try await store.load(for: first) == fullRecord(for: first))
        #expect(try await store.load(for: second) == fullRecord(for: second))
        #expect(try await store.load(for: third) == fullRecord(for: third))
        try await store.delete(for: first)
        #expect(try await store.load(for: first) == nil)
        #expect(try await store.load(for: second) == fullRecord(for: second))
        #expect(Set(try await store.accounts()) == [second, third])
    }
}
