#if os(Linux)
    import Foundation
    import SessionKit
    import Testing

    /// The Secret Service store against a real keyring: `scripts/test` runs the suites inside a D-Bus session of
    /// their own with an unlocked GNOME Keyring and sets `SESSIONKIT_REQUIRE_SECRET_SERVICE=1`, so there the
    /// suite fails if the service is missing. A plain `swift test` without a keyring skips it, saying why.
    @Suite(
        .timeLimit(.minutes(TimeLimit.heavy)),
        // Without SESSIONKIT_REQUIRE_SECRET_SERVICE=1, a missing service skips the suite with this comment.
        .enabled("no Secret Service on the session bus; scripts/test provides one") {
            await SecretServiceTestGate.shouldRun()
        }
    )
    struct SecretServiceCredentialStoreTests {
        private let alice = CredentialStoreContract.account(1)
        private let bob = CredentialStoreContract.account(2)

        /// A service name no other test uses, so tests running in parallel never see each other's items.
        private static func uniqueService() -> String { "dev.sessionkit.tests.\(UUID().uuidString)" }

        @Test func theServiceIsAvailable() async throws {
            try await SecretServiceCredentialStore(service: Self.uniqueService()).checkAvailability()
        }

        @Test(arguments: CredentialStoreContract.Check.allCases)
        func meetsTheStoreContract(_ check: CredentialStoreContract.Check) async throws {
            let service = Self.uniqueService()
            do {
                try await check.run { SecretServiceCredentialStore(service: service) }
            } catch {
                try? await SecretServiceCredentialStore(service: service).deleteAll()
                throw error
            }
            try await SecretServiceCredentialStore(service: service).deleteAll()
            #expect(try Self.keyringAccountKeys(service: service).isEmpty)
        }

        @Test func deleteLeavesNothingOfTheAccountInTheKeyring() async throws {
            let service = Self.uniqueService()
            let store = SecretServiceCredentialStore(service: service)
            try await store.save(CredentialStoreContract.fullRecord(for: alice))
            try await store.save(CredentialStoreContract.fullRecord(for: bob))
            try await store.save(CredentialStoreContract.fullRecord(for: alice, version: 2))
            // Saving twice replaced the item rather than adding one.
            #expect(
                try Self.keyringAccountKeys(service: service).sorted() == [alice.storageKey, bob.storageKey].sorted())
            try await store.delete(for: alice)
            #expect(try Self.keyringAccountKeys(service: service) == [bob.storageKey])
            try await store.deleteAll()
            #expect(try Self.keyringAccountKeys(service: service).isEmpty)
        }

        @Test func deleteAllLeavesOtherServicesAlone() async throws {
            let mine = SecretServiceCredentialStore(service: Self.uniqueService())
            let theirs = SecretServiceCredentialStore(service: Self.uniqueService())
            try await mine.save(CredentialStoreContract.fullRecord(for: alice))
            try await theirs.save(CredentialStoreContract.fullRecord(for: alice, version: 9))
            try await mine.deleteAll()
            #expect(try await mine.load(for: alice) == nil)
            #expect(try await theirs.load(for: alice) == CredentialStoreContract.fullRecord(for: alice, version: 9))
            #expect(try await theirs.accounts() == [alice])
            try await theirs.deleteAll()
            #expect(try Self.keyringAccountKeys(service: theirs.service).isEmpty)
        }

        @Test func anItemThatFailsItsChecksIsCorruptAndCanBeDeleted() async throws {
            let service = Self.uniqueService()
            let store = SecretServiceCredentialStore(service: service)
            // Garbage, a record of version 0, and Bob's record filed under Alice's name.
            var old =
                try JSONSerialization.jsonObject(
                    with: JSONEncoder().encode(CredentialStoreContract.fullRecord(for: alice))
                ) as? [String: Any]
            old?["version"] = 0
            let cases: [(Data, String)] = [
                (Data("not json \u{1}".utf8), "not a JSON credential record"),
                (try JSONSerialization.data(withJSONObject: try #require(old)), "format version 0"),
                (try JSONEncoder().encode(CredentialStoreContract.fullRecord(for: bob)), "another account"),
            ]
            for (secret, problem) in cases {
                try Self.storeRawItem(service: service, key: alice.storageKey, secret: secret)
                let error = try await #require(throws: SessionError.self) { try await store.load(for: alice) }
                #expect(error.code == .corruptCredentials)
                #expect(error.message.contains(problem), "\(error.message)")
                #expect(!error.message.contains("refresh-"))
                #expect(try await store.accounts().isEmpty)
                try await store.delete(for: alice)
                #expect(try await store.load(for: alice) == nil)
                #expect(try Self.keyringAccountKeys(service: service).isEmpty)
            }
        }

        /// The item's secret, read with `secret-tool`, holds what the table in Getting Started says, in every
        /// configuration (`StoredCredentialsTests` reads the other stores).
        @Test(arguments: StoredCredentialsTests.Configuration.all)
        func aRecordHoldsWhatTheTableSaysAndNothingMore(_ configuration: StoredCredentialsTests.Configuration)
            async throws
        {
            try await TemporaryDirectory.with { directory in
                let service = Self.uniqueService()
                let lock =
                    configuration.settings.contains(.sharedStore)
                    ? CrossProcessLock(file: directory.appendingPathComponent(".refresh.lock")) : nil
                let store = SecretServiceCredentialStore(service: service, refreshLock: lock)
                do {
                    try await StoredCredentialsTests.check(store: store, configuration) {
                        try Self.keyringSecret(service: service, key: StoredCredentialsTests.account.storageKey)
                    }
                } catch {
                    try? await store.deleteAll()
                    throw error
                }
                try await store.deleteAll()
            }
        }

        // MARK: - The keyring, seen from outside

        /// The secret of the item of `key`, as `secret-tool lookup` prints it; `nil` when there is none.
        static func keyringSecret(service: String, key: String) throws -> Data? {
            let tool = try #require(
                ChildProcess.tool("secret-tool"), "secret-tool is missing (Debian: libsecret-tools)")
            let lookup = try ChildProcess(tool, ["lookup", "service", service, "account", key])
            // The output is the (test) secret: parse it, never print it.
            let (output, status) = lookup.finish()
            return status == 0 && !output.isEmpty ? Data(output.utf8) : nil
        }

        /// The `account` attribute of every item of `service`, as `secret-tool search --all` lists them.
        static func keyringAccountKeys(service: String) throws -> [String] {
            let tool = try #require(
                ChildProcess.tool("secret-tool"), "secret-tool is missing (Debian: libsecret-tools)")
            let search = try ChildProcess(tool, ["search", "--all", "service", service], mergingStandardError: true)
            // The output holds the (test) secrets: parse it, never print it.
            let (output, _) = search.finish()
            let prefix = "attribute.account = "
            return output.split(separator: "\n").filter { $0.hasPrefix(prefix) }.map {
                String($0.dropFirst(prefix.count))
            }
        }

        /// Stores bytes SessionKit did not write as the item of `key`, with SessionKit's schema and attributes.
        static func storeRawItem(service: String, key: String, secret: Data) throws {
            let tool = try #require(
                ChildProcess.tool("secret-tool"), "secret-tool is missing (Debian: libsecret-tools)")
            let input = Pipe()
            let process = Process()
            process.executableURL = tool
            process.arguments = [
                "store", "--label=test", "xdg:schema", SecretServiceCredentialStore.schemaName, "service", service,
                "account", key,
            ]
            process.standardInput = input
            try process.run()
            input.fileHandleForWriting.write(secret)
            try input.fileHandleForWriting.close()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
    }

    /// Whether the Secret Service suite runs: always when it is required, else only when a service answers.
    enum SecretServiceTestGate {
        static func shouldRun() async -> Bool {
            if ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_SECRET_SERVICE"] == "1" { return true }
            do {
                try await SecretServiceCredentialStore(service: "dev.sessionkit.tests.probe").checkAvailability()
                return true
            } catch {
                return false
            }
        }
    }

    /// What the Secret Service store says when it cannot work; runs anywhere on Linux, keyring or not.
    @Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SecretServiceAvailabilityTests {
        @Test func withoutASessionBusTheStoreIsUnavailableAndSaysWhy() async throws {
            let child = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found next to the tests")
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            environment["XDG_RUNTIME_DIR"] = nil
            let check = try ChildProcess(
                child, ["secret-service-check", "dev.sessionkit.tests"], environment: environment)
            let (output, status) = check.finish()
            #expect(status == 0)
            #expect(output.hasPrefix("unavailable storeUnavailable: "), "\(output)")
            // Either the library is missing, or (as on the test machines) the bus is.
            #expect(output.contains("DBUS_SESSION_BUS_ADDRESS is unset") || output.contains("libsecret-1.so.0"))
        }
    }
#endif
