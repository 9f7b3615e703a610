#if canImport(Security)
    import Foundation
    import Security

    /// A credential store in the Keychain (Apple platforms): one generic-password item per account.
    ///
    /// Items have `kSecAttrService` = ``service``, `kSecAttrAccount` = the account's ``Account/storageKey``,
    /// the record as JSON in `kSecValueData`, and the ``Account`` (not secret) as JSON in `kSecAttrGeneric`, so
    /// ``accounts()`` lists accounts without reading, or prompting for, any secret.
    ///
    /// By default items are readable after the device's first unlock and never leave this device
    /// (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`): a background refresh can read them while the
    /// screen is locked, and backups restored to another device do not carry them. With
    /// `requireUserPresence`, every read and update asks for Face ID, Touch ID or the passcode
    /// (`SecAccessControlCreateFlags.userPresence`); a dismissed prompt throws
    /// ``SessionError/Code/userCancelled``.
    ///
    /// - Important: The Keychain outlives the app: items survive deletion and reinstallation. Call
    ///   ``purgeItemsFromPreviousInstallation(marker:)`` at launch, before restoring a session, so a reinstalled
    ///   app does not sign in with a previous installation's tokens.
    /// - Important: On macOS, `useDataProtectionKeychain` (the default) needs the app to be signed with a
    ///   `keychain-access-groups` entitlement; without one the Keychain answers `errSecMissingEntitlement`, which
    ///   this store reports as ``SessionError/Code/storeUnavailable``. Command-line tools pass `false` (the
    ///   login keychain, without user-presence protection) or use ``FileCredentialStore``.
    /// - Important: Keychain calls block, and may wait for a user-presence prompt. They run one at a time, in
    ///   call order, on a dispatch queue of this store, never on the cooperative thread pool.
    public final class KeychainCredentialStore: CredentialStore {
        /// When the Keychain lets the app read an item (`kSecAttrAccessible…`).
        public enum Accessibility: Sendable, Hashable {
            /// After the first unlock since boot, on this device only. The default.
            case afterFirstUnlockThisDeviceOnly
            /// While the device is unlocked, on this device only.
            case whenUnlockedThisDeviceOnly
            /// While the device is unlocked and has a passcode, on this device only; items are deleted when
            /// the passcode is removed.
            case whenPasscodeSetThisDeviceOnly

            var attribute: CFString {
                switch self {
                case .afterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
                case .whenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
                case .whenPasscodeSetThisDeviceOnly: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly
                }
            }
        }

        /// The `kSecAttrService` of this store's items, such as the app's bundle identifier.
        public let service: String
        /// The keychain access group shared with other apps of the same team, or `nil` for the app's default.
        public let accessGroup: String?
        /// When the items can be read.
        public let accessibility: Accessibility
        /// Whether reading and updating an item requires user presence (biometry or passcode).
        public let requiresUserPresence: Bool
        /// Whether the items live in the data protection keychain (always so on iOS, opt-in on macOS).
        public let usesDataProtectionKeychain: Bool

        private let queue = BlockingWorkQueue(label: "SessionKit.KeychainCredentialStore")

        /// Creates a store for the items of `service`.
        ///
        /// - Parameters:
        ///   - service: The `kSecAttrService` that scopes the items; ``deleteAll()`` deletes this service's only.
        ///   - accessGroup: A keychain access group to share the items in, or `nil`.
        ///   - accessibility: When the items can be read; after first unlock, this device only, by default.
        ///   - requireUserPresence: Whether each read and update asks for Face ID, Touch ID or the passcode.
        ///   - useDataProtectionKeychain: Whether to use the data protection keychain on macOS (needs the
        ///     `keychain-access-groups` entitlement); ignored elsewhere, where it is the only keychain.
        public init(
            service: String,
            accessGroup: String? = nil,
            accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly,
            requireUserPresence: Bool = false,
            useDataProtectionKeychain: Bool = true
        ) {
            self.service = service
            self.accessGroup = accessGroup
            self.accessibility = accessibility
            self.requiresUserPresence = requireUserPresence
            self.usesDataProtectionKeychain = useDataProtectionKeychain
        }

        /// Replaces the record of `record.account` with `record`: updates the item in place, or adds it.
        ///
        /// - Parameter record: The record to store; it must be of ``CredentialRecord/currentVersion``.
        /// - Throws: ``SessionError`` `userCancelled` (the prompt was dismissed), `storeUnavailable` (the device
        ///   is locked, or the app lacks the keychain entitlement), `storageFailure` (another `OSStatus`),
        ///   `invalidInput` (a record of another version).
        public func save(_ record: CredentialRecord) async throws {
            try await queue.run { [self] in
                var secret = try CredentialRecordCoding.encode(record)
                defer { SecureWipe.wipe(&secret) }
                let identity = try Self.encodeAccount(record.account)
                let key = record.account.storageKey
                let update: [String: Any] = [kSecValueData as String: secret, kSecAttrGeneric as String: identity]
                let updated = SecItemUpdate(itemQuery(account: key) as CFDictionary, update as CFDictionary)
                guard updated == errSecItemNotFound else {
                    try Self.check(updated, action: "updating the record \(key)")
                    return
                }
                var attributes = itemQuery(account: key)
                attributes[kSecValueData as String] = secret
                attributes[kSecAttrGeneric as String] = identity
                attributes[kSecAttrLabel as String] = "SessionKit credentials (\(service))"
                if requiresUserPresence {
                    attributes[kSecAttrAccessControl as String] = try accessControl()
                } else {
                    attributes[kSecAttrAccessible as String] = accessibility.attribute
                }
                try Self.check(SecItemAdd(attributes as CFDictionary, nil), action: "adding the record \(key)")
            }
        }

        /// The record stored for `account`, or `nil` when there is none.
        ///
        /// - Parameter account: The account to look up.
        /// - Returns: The record, or `nil`.
        /// - Throws: ``SessionError`` `corruptCredentials` (the item fails its checks; it is left in place, and
        ///   ``delete(for:)`` removes it), `userCancelled`, `storeUnavailable`, `storageFailure`.
        public func load(for account: Account) async throws -> CredentialRecord? {
            try await queue.run { [self] () throws -> CredentialRecord? in
                let key = account.storageKey
                var query = itemQuery(account: key)
                query[kSecReturnData as String] = true
                query[kSecMatchLimit as String] = kSecMatchLimitOne
                var result: CFTypeRef?
                let status = SecItemCopyMatching(query as CFDictionary, &result)
                if status == errSecItemNotFound { return nil }
                try Self.check(status, action: "reading the record \(key)")
                guard var bytes = result as? Data else {
                    throw SessionError(.corruptCredentials, "the Keychain item \(key) holds no data")
                }
                defer { SecureWipe.wipe(&bytes) }
                return try CredentialRecordCoding.decode(bytes, for: account, source: "\(key) of service \(service)")
            }
        }

        /// Deletes the record of `account`; deleting a missing record succeeds.
        ///
        /// - Parameter account: The account whose record to delete.
        /// - Throws: ``SessionError`` `storeUnavailable`, `storageFailure`.
        public func delete(for account: Account) async throws {
            try await queue.run { [self] in
                let key = account.storageKey
                let status = SecItemDelete(itemQuery(account: key) as CFDictionary)
                if status != errSecItemNotFound { try Self.check(status, action: "deleting the record \(key)") }
            }
        }

        /// Deletes every item of this store's ``service``.
        ///
        /// - Throws: ``SessionError`` `storeUnavailable`, `storageFailure`.
        public func deleteAll() async throws {
            try await queue.run { [self] in try deleteAllItems() }
        }

        /// The accounts of this store's ``service`` that have an item, read from the items' attributes only, so
        /// listing never prompts for user presence.
        ///
        /// - Returns: The accounts, in no particular order.
        /// - Throws: ``SessionError`` `storeUnavailable`, `storageFailure`.
        public func accounts() async throws -> [Account] {
            try await queue.run { [self] in
                var query = itemQuery(account: nil)
                query[kSecReturnAttributes as String] = true
                query[kSecMatchLimit as String] = kSecMatchLimitAll
                var result: CFTypeRef?
                let status = SecItemCopyMatching(query as CFDictionary, &result)
                if status == errSecItemNotFound { return [] }
                try Self.check(status, action: "listing the records")
                let items = result as? [[String: Any]] ?? []
                return items.compactMap { item -> Account? in
                    guard let key = item[kSecAttrAccount as String] as? String,
                        let expected = Account(storageKey: key)
                    else { return nil }
                    // The display name comes from the attribute; identity comes from the key.
                    let stored = (item[kSecAttrGeneric as String] as? Data)
                        .flatMap { try? JSONDecoder().decode(Account.self, from: $0) }
                    return stored == expected ? stored : expected
                }
            }
        }

        /// Deletes every item of this store's ``service`` the first time it runs after the app is installed.
        ///
        /// The Keychain keeps items when an app is deleted, but the app's container (where `marker` lives) is
        /// deleted with it. So when `marker` is missing, this is a fresh installation (or the first launch of a
        /// version that adopted this call): the items are deleted, then `marker` is created. A purge that fails
        /// leaves no marker, so the next launch tries again.
        ///
        /// - Parameter marker: A file in the app's container that only this call creates, such as
        ///   `Application Support/SessionKit/keychain-installation-marker`.
        /// - Returns: Whether items were purged (the marker was missing).
        /// - Throws: ``SessionError`` `storeUnavailable` or `storageFailure` when the items cannot be deleted or
        ///   the marker cannot be written.
        /// - Important: Call it at launch before anything restores a session from this store.
        @discardableResult
        public func purgeItemsFromPreviousInstallation(marker: URL) async throws -> Bool {
            try await queue.run { [self] in
                guard !FileManager.default.fileExists(atPath: marker.path) else { return false }
                try deleteAllItems()
                do {
                    try FileManager.default.createDirectory(
                        at: marker.deletingLastPathComponent(),
                        withIntermediateDirectories: true
                    )
                    try Data().write(to: marker, options: .atomic)
                } catch {
                    throw SessionError(
                        .storageFailure,
                        "deleted the previous installation's Keychain items but cannot write the marker "
                            + "\(marker.path); they will be deleted again at next launch"
                    )
                }
                return true
            }
        }

        // MARK: - Keychain calls, on the queue

        /// The attributes that identify this store's items: class, service, access group, keychain.
        private func itemQuery(account: String?) -> [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword,
                kSecAttrService as String: service,
            ]
            if let account { query[kSecAttrAccount as String] = account }
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            if usesDataProtectionKeychain { query[kSecUseDataProtectionKeychain as String] = true }
            return query
        }

        private func deleteAllItems() throws(SessionError) {
            // One call deletes every match in the data protection keychain; the macOS login keychain may delete
            // one match per call, so repeat until nothing is left (bounded, in case an item cannot be deleted).
            for _ in 0..<10_000 {
                let status = SecItemDelete(itemQuery(account: nil) as CFDictionary)
                if status == errSecItemNotFound { return }
                try Self.check(status, action: "deleting the records of service \(service)")
            }
            throw SessionError(
                .storageFailure, "the Keychain kept reporting items of service \(service) after deleting")
        }

        private func accessControl() throws(SessionError) -> SecAccessControl {
            var error: Unmanaged<CFError>?
            guard
                let control = SecAccessControlCreateWithFlags(
                    nil,
                    accessibility.attribute,
                    .userPresence,
                    &error
                )
            else {
                let reason = error.map { CFErrorCopyDescription($0.takeRetainedValue()) as String } ?? "unknown reason"
                throw SessionError(.storageFailure, "cannot create the Keychain access control: \(reason)")
            }
            return control
        }

        private static func encodeAccount(_ account: Account) throws(SessionError) -> Data {
            do {
                return try JSONEncoder().encode(account)
            } catch {
                throw SessionError(.storageFailure, "cannot encode the account \(account.storageKey)")
            }
        }

        /// Maps an `OSStatus` to a ``SessionError``; Keychain messages name the failure, never a secret.
        private static func check(_ status: OSStatus, action: String) throws(SessionError) {
            guard status != errSecSuccess else { return }
            let reason = (SecCopyErrorMessageString(status, nil) as String?) ?? "no description"
            let detail = "\(action): \(reason) (OSStatus \(status))"
            switch status {
            case errSecUserCanceled:
                throw SessionError(.userCancelled, "the user cancelled the Keychain prompt while \(detail)")
            case errSecInteractionNotAllowed:
                throw SessionError(.storeUnavailable, "the Keychain is not available (device locked?) while \(detail)")
            case errSecMissingEntitlement:
                throw SessionError(
                    .storeUnavailable,
                    "the app lacks the keychain-access-groups entitlement the data protection keychain needs while "
                        + detail
                )
            case errSecNotAvailable:
                throw SessionError(.storeUnavailable, "no keychain is available while \(detail)")
            default:
                throw SessionError(.storageFailure, "the Keychain failed while \(detail)")
            }
        }
    }
#endif
