import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(Security)
    import Security
#endif
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``KeychainCredentialStore``'s logic, on every platform, over ``FakeKeychain`` (the Keychain calls modelled on
/// their documented behaviour); only the thin file of `SecItem…` calls is left to the Apple CI.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct KeychainCredentialStoreTests {
    private let alice = CredentialStoreContract.account(1)
    private let bob = CredentialStoreContract.account(2)
    private let service = "com.example.app"

    private func store(
        _ keychain: FakeKeychain,
        accessGroup: String? = nil,
        accessibility: KeychainCredentialStore.Accessibility = .afterFirstUnlockThisDeviceOnly,
        requireUserPresence: Bool = false,
        useDataProtectionKeychain: Bool = true
    ) -> KeychainCredentialStore {
        KeychainCredentialStore(
            service: service, accessGroup: accessGroup, accessibility: accessibility,
            requireUserPresence: requireUserPresence, useDataProtectionKeychain: useDataProtectionKeychain,
            calls: keychain)
    }

    private func record(_ account: Account, refresh: String) -> CredentialRecord {
        CredentialRecord(account: account, refreshToken: refresh, accessToken: "access-\(refresh)")
    }

    private func expectError(
        _ code: SessionError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            Issue.record("expected SessionError.\(code), nothing was thrown", sourceLocation: sourceLocation)
        } catch let error as SessionError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected SessionError.\(code), got \(error)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - Contract

    @Test(arguments: CredentialStoreContract.Check.allCases, [false, true])
    func meetsTheStoreContract(_ check: CredentialStoreContract.Check, requireUserPresence: Bool) async throws {
        try await check.run { store(FakeKeychain(), requireUserPresence: requireUserPresence) }
    }

    // MARK: - Items and attributes

    @Test func itemsCarryTheServiceTheAccountAndTheChosenProtection() async throws {
        let keychain = FakeKeychain()
        try await store(keychain).save(record(alice, refresh: "r1"))
        try await store(keychain, accessibility: .whenUnlockedThisDeviceOnly).save(record(bob, refresh: "r1"))
        let carol = CredentialStoreContract.account(3)
        try await store(keychain, accessibility: .whenPasscodeSetThisDeviceOnly, requireUserPresence: true)
            .save(record(carol, refresh: "r1"))

        let items = keychain.withState { $0.items }
        #expect(items.map(\.service) == [service, service, service])
        #expect(items.map(\.account) == ["\(alice.storageKey).1", "\(bob.storageKey).1", "\(carol.storageKey).1"])
        #expect(
            items.map(\.accessGroup) == ["TEAMID.com.example.app", "TEAMID.com.example.app", "TEAMID.com.example.app"])
        #expect(items.map(\.dataProtectionKeychain) == [true, true, true])
        #expect(
            items.map(\.protection) == [
                .accessible(.afterFirstUnlockThisDeviceOnly), .accessible(.whenUnlockedThisDeviceOnly),
                .userPresence(.whenPasscodeSetThisDeviceOnly),
            ])
        // The account is in the generic attribute, in clear (it is not secret); the tokens only in the secret.
        let generic = try #require(items[0].generic)
        #expect(try JSONDecoder().decode(Account.self, from: generic) == alice)
        #expect(!String(decoding: generic, as: UTF8.self).contains("r1"))
        #expect(String(decoding: items[0].secret, as: UTF8.self).contains("access-r1"))
    }

    @Test func theLoginKeychainIsUsedWhenTheDataProtectionKeychainIsNot() async throws {
        let keychain = FakeKeychain()
        keychain.withState { $0.hasDataProtectionEntitlement = false }
        // A command-line tool on macOS: no keychain-access-groups entitlement.
        await expectError(.storeUnavailable) { try await store(keychain).save(record(alice, refresh: "r1")) }
        let login = store(keychain, useDataProtectionKeychain: false)
        try await login.save(record(alice, refresh: "r1"))
        #expect(try await login.load(for: alice)?.refreshToken == "r1")
        #expect(keychain.withState { $0.items.map(\.dataProtectionKeychain) } == [false])
    }

    // MARK: - Saves add, never update

    @Test func aSaveAddsTheNextGenerationThenDeletesTheOlder() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        keychain.withState { $0.calls = [] }
        try await store.save(record(alice, refresh: "r2"))

        let key = alice.storageKey
        #expect(
            keychain.withState { $0.calls } == [
                .copyAttributes, .add(account: "\(key).2"), .delete(account: "\(key).1"),
            ])
        #expect(keychain.withState { $0.items.map(\.account) } == ["\(key).2"])
        #expect(try await store.load(for: alice)?.refreshToken == "r2")
    }

    @Test func anItemWrittenBeforeGenerationsIsReadAndThenReplaced() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        // The layout of earlier versions: the storage key alone names the item.
        try await store.save(record(alice, refresh: "r1"))
        keychain.withState { state in state.items[0].account = alice.storageKey }
        #expect(try await store.load(for: alice)?.refreshToken == "r1")
        #expect(try await store.accounts() == [alice])

        try await store.save(record(alice, refresh: "r2"))
        #expect(keychain.withState { $0.items.map(\.account) } == ["\(alice.storageKey).1"])
        #expect(try await store.load(for: alice)?.refreshToken == "r2")
    }

    @Test func aSaveRacingAnotherProcessGoesAboveItsGeneration() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        let key = alice.storageKey
        // An app extension saves the same account between this store's listing and its add.
        let raced = Locked(false)
        keychain.withState { state in
            state.before = { call, state in
                guard call == .add(account: "\(key).2"), !raced.withLock({ $0 }) else { return nil }
                raced.withLock { $0 = true }
                var other = state.items[0]
                other.account = "\(key).2"
                other.secret = Data("from the extension".utf8)
                state.items.append(other)
                return .duplicateItem
            }
        }
        try await store.save(record(alice, refresh: "r2"))

        #expect(keychain.withState { $0.items.map(\.account) } == ["\(key).3"])
        #expect(try await store.load(for: alice)?.refreshToken == "r2")
    }

    @Test func aSaveThatKeepsMeetingDuplicatesStopsWithAStorageFailure() async throws {
        let keychain = FakeKeychain()
        keychain.withState { state in
            state.before = { call, _ in
                if case .add = call { return .duplicateItem }
                return nil
            }
        }
        await expectError(.storageFailure) { try await store(keychain).save(record(alice, refresh: "r1")) }
        #expect(keychain.withState { $0.calls.filter { if case .add = $0 { true } else { false } }.count } == 8)
    }

    @Test func aLoadRacingASaveInAnotherProcessReadsTheNewerRecord() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        let newer = try #require(keychain.withState { $0.items.first })
        let key = alice.storageKey
        // The extension replaces generation 1 by 2 between this load's listing and its read.
        keychain.withState { state in
            state.before = { call, state in
                guard call == .copyData(account: "\(key).1") else { return nil }
                state.items.removeAll()
                var replacement = newer
                replacement.account = "\(key).2"
                replacement.secret = state.addedItems[0].secret
                state.items.append(replacement)
                return nil
            }
        }
        #expect(try await store.load(for: alice)?.refreshToken == "r1")
        #expect(
            keychain.withState { $0.calls.suffix(4) } == [
                .copyAttributes, .copyData(account: "\(key).1"), .copyAttributes, .copyData(account: "\(key).2"),
            ])
    }

    @Test func olderItemsLeftBehindAreShadowedAndRemovedByTheNextSaveOrDelete() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        // The deletion of generation 1 fails (say, the process is killed): generation 2 wins.
        keychain.withState { state in
            state.before = { call, _ in
                if case .delete = call { return .interactionNotAllowed }
                return nil
            }
        }
        try await store.save(record(alice, refresh: "r2"))
        #expect(keychain.withState { $0.items.count } == 2)
        #expect(try await store.load(for: alice)?.refreshToken == "r2")
        #expect(try await store.accounts() == [alice])

        keychain.withState { $0.before = nil }
        try await store.save(record(alice, refresh: "r3"))
        #expect(keychain.withState { $0.items.map(\.account) } == ["\(alice.storageKey).3"])
        try await store.delete(for: alice)
        #expect(keychain.withState { $0.items.isEmpty })
    }

    // MARK: - User presence: prompt to read, never to write

    @Test func userPresencePromptsToReadTheRecordAndNeverToWriteOrList() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain, requireUserPresence: true)
        try await store.save(record(alice, refresh: "r1"))
        try await store.save(record(alice, refresh: "r2"))
        _ = try await store.accounts()
        try await store.delete(for: bob)
        #expect(keychain.withState { $0.prompts } == 0)

        #expect(try await store.load(for: alice)?.refreshToken == "r2")
        #expect(keychain.withState { $0.prompts } == 1)
    }

    @Test func aRotationInTheBackgroundIsStoredAndTheNextLaunchPresentsTheNewRefreshToken() async throws {
        let keychain = FakeKeychain()
        try await store(keychain, requireUserPresence: true).save(record(alice, refresh: "retired"))

        // The refresher rotates the token in the background: the screen is locked and no prompt can be shown.
        keychain.withState { state in
            state.deviceLocked = true
            state.presence = .cannotAsk
        }
        try await store(keychain, requireUserPresence: true).save(record(alice, refresh: "rotated"))
        #expect(keychain.withState { $0.prompts } == 0)
        #expect(
            !keychain.withState { $0.items.contains { String(decoding: $0.secret, as: UTF8.self).contains("retired") } }
        )

        // The next launch, in the foreground, reads the rotated token.
        keychain.withState { state in
            state.deviceLocked = false
            state.presence = .approve
        }
        #expect(try await store(keychain, requireUserPresence: true).load(for: alice)?.refreshToken == "rotated")
    }

    @Test func aDismissedOrFailedPromptIsUserCancelledAndKeepsTheRecord() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain, requireUserPresence: true)
        try await store.save(record(alice, refresh: "r1"))

        keychain.withState { $0.presence = .cancel }
        await expectError(.userCancelled) { _ = try await store.load(for: alice) }
        keychain.withState { $0.presence = .fail }
        await expectError(.userCancelled) { _ = try await store.load(for: alice) }
        keychain.withState { $0.presence = .cannotAsk }
        await expectError(.storeUnavailable) { _ = try await store.load(for: alice) }

        keychain.withState { $0.presence = .approve }
        #expect(try await store.load(for: alice)?.refreshToken == "r1")
    }

    @Test func accessibilityDecidesWhatALockedDeviceAllows() async throws {
        let keychain = FakeKeychain()
        let background = store(keychain)
        let foreground = store(keychain, accessibility: .whenUnlockedThisDeviceOnly)
        keychain.withState { $0.deviceLocked = true }
        // After first unlock: usable while locked, so a background refresh can store its tokens.
        try await background.save(record(alice, refresh: "r1"))
        #expect(try await background.load(for: alice)?.refreshToken == "r1")
        // When unlocked: refused while locked, with the code that says "not now".
        await expectError(.storeUnavailable) { try await foreground.save(record(bob, refresh: "r1")) }
        keychain.withState { $0.deviceLocked = false }
        try await foreground.save(record(bob, refresh: "r1"))
        #expect(try await foreground.load(for: bob)?.refreshToken == "r1")
    }

    // MARK: - Access groups (an app and its extensions)

    @Test func anAppAndItsExtensionShareRecordsThroughTheirAccessGroup() async throws {
        let keychain = FakeKeychain()
        let shared = "TEAMID.com.example.shared"
        keychain.withState { $0.entitledGroups = ["TEAMID.com.example.app", shared] }
        let app = store(keychain, accessGroup: shared)
        let widget = store(keychain, accessGroup: shared)
        try await app.save(record(alice, refresh: "r1"))
        #expect(try await widget.load(for: alice)?.refreshToken == "r1")
        #expect(keychain.withState { $0.items.map(\.accessGroup) } == [shared])

        // The app's default group is another group: its items are not the shared ones.
        let privateStore = store(keychain, accessGroup: "TEAMID.com.example.app")
        #expect(try await privateStore.load(for: alice) == nil)
        // A group the app is not entitled to is refused, not silently replaced by the default.
        await expectError(.storeUnavailable) {
            try await store(keychain, accessGroup: "OTHERTEAM.shared").save(record(bob, refresh: "r1"))
        }
        try await widget.delete(for: alice)
        #expect(try await app.accounts().isEmpty)
    }

    // MARK: - OSStatus mapping

    @Test func everyOSStatusMapsToItsSessionErrorCode() {
        let expected: [(KeychainStatus, Int32, SessionError.Code?)] = [
            (.success, 0, nil),
            (.itemNotFound, -25300, .storageFailure),
            (.duplicateItem, -25299, .storageFailure),
            (.interactionNotAllowed, -25308, .storeUnavailable),
            (.userCanceled, -128, .userCancelled),
            (.authFailed, -25293, .userCancelled),
            (.missingEntitlement, -34018, .storeUnavailable),
            (.notAvailable, -25291, .storeUnavailable),
            (.param, -50, .storageFailure),
            (KeychainStatus(rawValue: -26275), -26275, .storageFailure),
        ]
        for (status, value, code) in expected {
            #expect(status.rawValue == value)
            let error = KeychainCredentialStore.error(for: status, action: "reading the record k", reason: "why")
            #expect(error?.code == code, "\(status)")
            if let error {
                #expect(error.message.contains("reading the record k") && error.message.contains("OSStatus \(value)"))
            }
        }
    }

    #if canImport(Security)
        @Test func statusValuesAreTheSecurityFrameworks() {
            #expect(KeychainStatus.success.rawValue == errSecSuccess)
            #expect(KeychainStatus.param.rawValue == errSecParam)
            #expect(KeychainStatus.userCanceled.rawValue == errSecUserCanceled)
            #expect(KeychainStatus.notAvailable.rawValue == errSecNotAvailable)
            #expect(KeychainStatus.authFailed.rawValue == errSecAuthFailed)
            #expect(KeychainStatus.duplicateItem.rawValue == errSecDuplicateItem)
            #expect(KeychainStatus.itemNotFound.rawValue == errSecItemNotFound)
            #expect(KeychainStatus.interactionNotAllowed.rawValue == errSecInteractionNotAllowed)
            #expect(KeychainStatus.missingEntitlement.rawValue == errSecMissingEntitlement)
        }
    #endif

    @Test(arguments: [
        (KeychainStatus.userCanceled, SessionError.Code.userCancelled),
        (.authFailed, .userCancelled),
        (.interactionNotAllowed, .storeUnavailable),
        (.missingEntitlement, .storeUnavailable),
        (.notAvailable, .storeUnavailable),
        (KeychainStatus(rawValue: -34), .storageFailure),
    ])
    func everyCallReportsTheMappedError(_ status: KeychainStatus, _ code: SessionError.Code) async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        keychain.withState { state in state.before = { _, _ in status } }
        await expectError(code) { try await store.save(record(alice, refresh: "r2")) }
        await expectError(code) { _ = try await store.load(for: alice) }
        await expectError(code) { try await store.delete(for: alice) }
        await expectError(code) { try await store.deleteAll() }
        await expectError(code) { _ = try await store.accounts() }
        // Nothing was lost.
        keychain.withState { $0.before = nil }
        #expect(try await store.load(for: alice)?.refreshToken == "r1")
    }

    @Test func notFoundIsNoRecordForReadsAndSuccessForDeletes() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        #expect(try await store.load(for: alice) == nil)
        #expect(try await store.accounts().isEmpty)
        try await store.delete(for: alice)
        try await store.deleteAll()
    }

    // MARK: - Bad items

    @Test func itemsThatAreNotThisStoresAreIgnoredAndNeverCrashASave() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        let key = alice.storageKey
        let planted = ["\(key).01", "\(key).+2", "\(key).", "\(key).18446744073709551615", "\(key).-1", "not a key"]
        keychain.withState { state in
            let template = state.items[0]
            for name in planted {
                var item = template
                item.account = name
                item.secret = Data("planted".utf8)
                state.items.append(item)
            }
        }
        #expect(try await store.load(for: alice)?.refreshToken == "r1")
        #expect(try await store.accounts() == [alice])
        try await store.save(record(alice, refresh: "r2"))
        #expect(try await store.load(for: alice)?.refreshToken == "r2")
        // deleteAll removes what is not this store's too: the service is this store's.
        try await store.deleteAll()
        #expect(keychain.withState { $0.items.isEmpty })
    }

    @Test func aCorruptItemIsReportedAndLeftForDeleteToRemove() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(alice, refresh: "r1"))
        keychain.withState { $0.items[0].secret = Data("{\"version\":1,\"garbage".utf8) }
        await expectError(.corruptCredentials) { _ = try await store.load(for: alice) }
        #expect(keychain.withState { $0.items.count } == 1)
        try await store.delete(for: alice)
        #expect(try await store.load(for: alice) == nil)
    }

    @Test func aRecordFiledUnderAnotherAccountIsCorrupt() async throws {
        let keychain = FakeKeychain()
        let store = store(keychain)
        try await store.save(record(bob, refresh: "bob's"))
        keychain.withState { $0.items[0].account = "\(alice.storageKey).1" }
        await expectError(.corruptCredentials) { _ = try await store.load(for: alice) }
    }

    // MARK: - Reinstallation

    @Test func itemsOfAPreviousInstallationArePurgedOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let keychain = FakeKeychain()
            let store = store(keychain)
            try await store.save(record(alice, refresh: "from the previous installation"))
            let marker = directory.appendingPathComponent("Application Support/SessionKit/marker")
            #expect(try await store.purgeItemsFromPreviousInstallation(marker: marker))
            #expect(try await store.accounts().isEmpty)
            try await store.save(record(alice, refresh: "r1"))
            #expect(try await !store.purgeItemsFromPreviousInstallation(marker: marker))
            #expect(try await store.load(for: alice)?.refreshToken == "r1")
        }
    }

    // MARK: - An app and its extension

    /// An app and its extension share the items through an access group and name one lock file in the app group
    /// container: the one that refreshes second finds the tokens the first stored and uses them, instead of
    /// presenting the refresh token the first had rotated (which the server's reuse detection would punish by
    /// revoking the grant).
    @Test func anAppAndItsExtensionOnOneAccessGroupAndLockRefreshOnceBetweenThem() async throws {
        try await TemporaryDirectory.with { container in
            try await MockAuthorizationServer.withRunning { mock in
                try mock.addUser("alice")
                let account = Account(issuer: mock.issuer, subject: "alice")
                let keychain = FakeKeychain()
                let shared = "TEAMID.com.example.shared"
                keychain.withState { $0.entitledGroups = ["TEAMID.com.example.app", shared] }
                let lock = CrossProcessLock(file: container.appendingPathComponent("refresh.lock"))
                func manager() -> SessionManager {
                    let store = KeychainCredentialStore(
                        service: service, accessGroup: shared, refreshLock: lock, calls: keychain)
                    #expect(store.refreshLock == lock)
                    return SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
                }
                let seeding = manager()
                try await seeding.signIn(account, tokens: try mock.issueTokens(for: "alice")).end()
                let app = manager()
                let appExtension = manager()
                await app.restore()
                await appExtension.restore()
                let one = try #require(app.current)
                let two = try #require(appExtension.current)
                mock.invalidateAccessTokens(for: "alice")

                _ = try await one.data(for: URLRequest(url: mock.userInfoEndpoint))
                _ = try await two.data(for: URLRequest(url: mock.userInfoEndpoint))

                #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
                #expect(mock.repeatedRefreshTokenCount == 0)
                #expect(two.isActive)
                #expect(one.tokens?.refreshToken == two.tokens?.refreshToken)
            }
        }
    }

    #if !canImport(Security)
        @Test func withoutTheSecurityFrameworkEveryCallIsStoreUnavailable() async throws {
            let store = KeychainCredentialStore(service: service)
            await expectError(.storeUnavailable) { try await store.save(record(alice, refresh: "r1")) }
            await expectError(.storeUnavailable) { _ = try await store.load(for: alice) }
            await expectError(.storeUnavailable) { try await store.delete(for: alice) }
            await expectError(.storeUnavailable) { try await store.deleteAll() }
            await expectError(.storeUnavailable) { _ = try await store.accounts() }
        }
    #endif
}
