import Foundation
import SessionKitOAuth

/// A credential store in the Keychain (Apple platforms): one generic-password item per account.
///
/// Items have `kSecAttrService` = ``service``, a `kSecAttrAccount` made of the account's ``Account/storageKey``
/// and a generation number, the record as JSON in `kSecValueData`, and the ``Account`` (not secret) as JSON in
/// `kSecAttrGeneric`, so ``accounts()`` lists accounts without reading, or prompting for, any secret.
///
/// By default items are readable after the device's first unlock and never leave this device
/// (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`): a background refresh can read them while the
/// screen is locked, and backups restored to another device do not carry them.
///
/// With `requireUserPresence`, reading a record asks for Face ID, Touch ID or the passcode
/// (`SecAccessControlCreateFlags.userPresence`); a dismissed or failed prompt throws
/// ``SessionError/Code/userCancelled``. Writing never asks: the Keychain asks for user presence to update a
/// protected item, so ``save(_:)`` never updates one. It adds the new record as an item of the next
/// generation, then deletes the older ones; a reader takes the newest generation, so it sees the old record or
/// the new one, never a mix. A rotated refresh token is therefore stored in the background, while the device
/// is locked and no prompt can be shown, and the next launch never presents the token it replaced.
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
///
/// The type exists on every platform so its documentation renders everywhere; where the Security framework is
/// missing (Linux), every call throws ``SessionError/Code/storeUnavailable``.
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
    }

    /// The `kSecAttrService` of this store's items, such as the app's bundle identifier.
    public let service: String
    /// The keychain access group the items live in, shared with the app's extensions and the other apps of the
    /// same team that list it in their `keychain-access-groups` entitlement; `nil` for the app's default group.
    public let accessGroup: String?
    /// When the items can be read.
    public let accessibility: Accessibility
    /// Whether reading a record requires user presence (biometry or passcode).
    public let requiresUserPresence: Bool
    /// Whether the items live in the data protection keychain (always so on iOS, opt-in on macOS).
    public let usesDataProtectionKeychain: Bool
    /// The lock that makes a refresh single-flight across the processes sharing these items (an app and its
    /// extensions in one ``accessGroup``), or `nil` when one process uses them.
    ///
    /// Every process names the same file, in the app group container they share
    /// (`FileManager.containerURL(forSecurityApplicationGroupIdentifier:)`). With a lock, records hold the access
    /// token and its expiry too, so a process that waited uses the tokens another stored instead of presenting a
    /// refresh token that was already rotated (see ``CredentialStore/refreshLock``).
    public let refreshLock: CrossProcessLock?

    private let calls: any KeychainCalls
    private let queue = BlockingWorkQueue(label: "SessionKit.KeychainCredentialStore")

    /// How many times a save or a load starts over when another process changed the same account meanwhile.
    private static let attempts = 8

    /// Creates a store for the items of `service`.
    ///
    /// - Parameters:
    ///   - service: The `kSecAttrService` that scopes the items; ``deleteAll()`` deletes this service's only.
    ///   - accessGroup: A keychain access group to share the items in (an app and its extensions pass the same
    ///     one), or `nil`.
    ///   - accessibility: When the items can be read; after first unlock, this device only, by default.
    ///   - requireUserPresence: Whether reading a record asks for Face ID, Touch ID or the passcode.
    ///   - useDataProtectionKeychain: Whether to use the data protection keychain on macOS (needs the
    ///     `keychain-access-groups` entitlement); ignored elsewhere, where it is the only keychain.
    ///   - refreshLock: A lock file in the app group container, when an app and its extensions share the items;
    ///     `nil` for one process.
    public convenience init(
        service: String,
        accessGroup: String? = nil,
        accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly,
        requireUserPresence: Bool = false,
        useDataProtectionKeychain: Bool = true,
        refreshLock: CrossProcessLock? = nil
    ) {
        self.init(
            service: service, accessGroup: accessGroup, accessibility: accessibility,
            requireUserPresence: requireUserPresence, useDataProtectionKeychain: useDataProtectionKeychain,
            refreshLock: refreshLock, calls: Self.platformCalls
        )
    }

    /// Creates a store over `calls` (a fake of the Keychain in tests).
    package init(
        service: String,
        accessGroup: String? = nil,
        accessibility: Accessibility = .afterFirstUnlockThisDeviceOnly,
        requireUserPresence: Bool = false,
        useDataProtectionKeychain: Bool = true,
        refreshLock: CrossProcessLock? = nil,
        calls: any KeychainCalls
    ) {
        self.refreshLock = refreshLock
        self.service = service
        self.accessGroup = accessGroup
        self.accessibility = accessibility
        self.requiresUserPresence = requireUserPresence
        self.usesDataProtectionKeychain = useDataProtectionKeychain
        self.calls = calls
    }

    private static var platformCalls: any KeychainCalls {
        #if canImport(Security)
            SecurityKeychainCalls()
        #else
            UnavailableKeychainCalls()
        #endif
    }

    /// Replaces the record of `record.account` with `record`, without asking for user presence.
    ///
    /// The record is added as the account's newest item, then the older items are deleted; an older item whose
    /// deletion fails is shadowed by the new one and deleted by the next save or ``delete(for:)``.
    ///
    /// - Parameter record: The record to store; it must be of the version this build writes.
    /// - Throws: ``SessionError`` `storeUnavailable` (the device is locked, or the app lacks the keychain
    ///   entitlement), `storageFailure` (another `OSStatus`), `invalidInput` (a record of another version).
    public func save(_ record: CredentialRecord) async throws {
        try await queue.run { [self] in
            var secret = try CredentialRecordCoding.encode(record)
            defer { SecureWipe.wipe(&secret) }
            let identity = try Self.encodeAccount(record.account)
            let key = record.account.storageKey
            for _ in 0..<Self.attempts {
                let older = try items(of: key, confirmingEmpty: false)
                let name = ItemName(key: key, generation: (older.map(\.name.generation).max() ?? 0) + 1)
                let item = KeychainItem(
                    query: query(account: name.attribute),
                    label: "SessionKit credentials (\(service))",
                    generic: identity,
                    secret: secret,
                    protection: requiresUserPresence ? .userPresence(accessibility) : .accessible(accessibility)
                )
                let status = calls.add(item)
                // Another process saved this account meanwhile and took the generation: go above it.
                if status == .duplicateItem { continue }
                try check(status, action: "adding the record \(key)")
                for stale in older { _ = calls.delete(matching: query(account: stale.name.attribute)) }
                return
            }
            throw SessionError(.storageFailure, "the record \(key) kept changing while it was being saved")
        }
    }

    /// The record stored for `account`, or `nil` when there is none.
    ///
    /// With `requireUserPresence`, this is the call that asks the user.
    ///
    /// - Parameter account: The account to look up.
    /// - Returns: The record, or `nil`.
    /// - Throws: ``SessionError`` `corruptCredentials` (the item fails its checks; it is left in place, and
    ///   ``delete(for:)`` removes it), `userCancelled` (the prompt was dismissed or failed), `storeUnavailable`,
    ///   `storageFailure`.
    public func load(for account: Account) async throws -> CredentialRecord? {
        try await queue.run { [self] () throws -> CredentialRecord? in
            let key = account.storageKey
            for _ in 0..<Self.attempts {
                guard let newest = try items(of: key).max(by: { $0.name.generation < $1.name.generation }) else {
                    return nil
                }
                let (status, data) = calls.copyData(matching: query(account: newest.name.attribute))
                // A save in another process replaced the item between the listing and the read: list again. (A
                // device that locked meanwhile answers the listing with "not found", which is then confirmed.)
                if status == .itemNotFound { continue }
                try check(status, action: "reading the record \(key)")
                guard var bytes = data else {
                    throw SessionError(.corruptCredentials, "the Keychain item \(key) holds no data")
                }
                defer { SecureWipe.wipe(&bytes) }
                return try CredentialRecordCoding.decode(bytes, for: account, source: "\(key) of service \(service)")
            }
            throw SessionError(.storageFailure, "the record \(key) kept changing while it was being read")
        }
    }

    /// Deletes the record of `account`; deleting a missing record succeeds.
    ///
    /// - Parameter account: The account whose record to delete.
    /// - Throws: ``SessionError`` `storeUnavailable`, `storageFailure`.
    public func delete(for account: Account) async throws {
        try await queue.run { [self] in
            let key = account.storageKey
            for item in try items(of: key) {
                let status = calls.delete(matching: query(account: item.name.attribute))
                if status != .itemNotFound { try check(status, action: "deleting the record \(key)") }
            }
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
            var newest: [String: StoredItem] = [:]
            for item in try allItems() where item.name.generation >= (newest[item.name.key]?.name.generation ?? 0) {
                newest[item.name.key] = item
            }
            return newest.values.compactMap { item -> Account? in
                guard let expected = Account(storageKey: item.name.key) else { return nil }
                // The display name comes from the attribute; identity comes from the key.
                let stored = item.generic.flatMap { try? JSONDecoder().decode(Account.self, from: $0) }
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

    /// An item's `kSecAttrAccount`: the account's storage key, then `.` and the generation. A key alone
    /// (generation 0) is an item written before generations.
    struct ItemName: Hashable {
        var key: String
        var generation: UInt64

        init(key: String, generation: UInt64) {
            self.key = key
            self.generation = generation
        }

        /// The largest generation read as one of ours, far below overflow: an item named with a larger one
        /// (planted, or damaged) is not this store's, so the next generation always fits.
        static let maximumGeneration: UInt64 = 1 << 62

        /// Parses an attribute in its one canonical spelling; storage keys are base64url, so they have no `.`.
        init?(attribute: String) {
            guard let dot = attribute.lastIndex(of: ".") else {
                self.init(key: attribute, generation: 0)
                return
            }
            let digits = attribute[attribute.index(after: dot)...]
            guard let generation = UInt64(digits), generation > 0, generation <= Self.maximumGeneration,
                String(generation) == digits
            else { return nil }
            self.init(key: String(attribute[..<dot]), generation: generation)
        }

        var attribute: String { generation == 0 ? key : "\(key).\(generation)" }
    }

    private struct StoredItem {
        var name: ItemName
        var generic: Data?
    }

    /// The query for this store's items: its service and access group, in the keychain it uses.
    private func query(account: String?) -> KeychainQuery {
        KeychainQuery(
            service: service, account: account, accessGroup: accessGroup,
            usesDataProtectionKeychain: usesDataProtectionKeychain
        )
    }

    /// Every item of the service, from an attributes-only query, which never asks for user presence.
    ///
    /// - Parameter confirmingEmpty: Whether "no items" is confirmed by a probe (``confirmNotFound(action:)``): for
    ///   reads and deletions, which would otherwise conclude from a locked device that nothing is stored; not for
    ///   a save, whose add fails on a locked device anyway.
    /// - Returns: The items, without their secrets.
    /// - Throws: ``SessionError`` as ``check(_:action:)`` maps the status; `storeUnavailable` when the probe finds
    ///   the Keychain locked.
    private func allItems(confirmingEmpty: Bool = true) throws(SessionError) -> [StoredItem] {
        var (status, items) = calls.copyAttributes(matching: query(account: nil))
        if status == .itemNotFound {
            guard confirmingEmpty else { return [] }
            try confirmNotFound(action: "listing the records")
            // Readable now, as the probe showed; the device may have unlocked since the listing, so list again.
            (status, items) = calls.copyAttributes(matching: query(account: nil))
            if status == .itemNotFound { return [] }
        }
        try check(status, action: "listing the records")
        return items.compactMap { item in
            ItemName(attribute: item.account).map { StoredItem(name: $0, generic: item.generic) }
        }
    }

    /// The `kSecAttrAccount` of the probe item: a dot and no generation, so no listing takes it for a record.
    static let probeAttribute = "sessionkit.probe"

    /// Checks that an `errSecItemNotFound` does not come from a locked device.
    ///
    /// Before the first unlock after a restart, and on some iOS versions while the device is locked, the Keychain
    /// answers `errSecItemNotFound` for items that exist (Firebase iOS SDK #8695, #16505; okta-oidc-ios #320):
    /// believed, a launch in the background would find nobody signed in. So the answer is checked by adding, and
    /// deleting, an empty probe item with the records' accessibility: a Keychain that refuses it with
    /// `errSecInteractionNotAllowed` is locked, and the "not found" proves nothing.
    ///
    /// - Throws: ``SessionError`` `storeUnavailable` when the probe says the Keychain is locked; what the probe's
    ///   other failures mean.
    private func confirmNotFound(action: String) throws(SessionError) {
        let probe = KeychainItem(
            query: query(account: Self.probeAttribute), label: "SessionKit probe (\(service))", generic: Data(),
            secret: Data(), protection: .accessible(accessibility))
        let status = calls.add(probe)
        switch status {
        case .success, .duplicateItem:
            _ = calls.delete(matching: query(account: Self.probeAttribute))
        case .interactionNotAllowed:
            throw SessionError(
                .storeUnavailable,
                "the Keychain answered that nothing is stored while \(action), but it is locked (a probe item "
                    + "was refused), so the answer proves nothing")
        default:
            try check(status, action: "probing the Keychain after \(action)")
        }
    }

    /// The items of the account whose storage key is `key`, every generation.
    private func items(of key: String, confirmingEmpty: Bool = true) throws(SessionError) -> [StoredItem] {
        try allItems(confirmingEmpty: confirmingEmpty).filter { $0.name.key == key }
    }

    private func deleteAllItems() throws(SessionError) {
        // One call deletes every match in the data protection keychain; the macOS login keychain may delete
        // one match per call, so repeat until nothing is left (bounded, in case an item cannot be deleted).
        for _ in 0..<10_000 {
            let status = calls.delete(matching: query(account: nil))
            if status == .itemNotFound { return }
            try check(status, action: "deleting the records of service \(service)")
        }
        throw SessionError(
            .storageFailure, "the Keychain kept reporting items of service \(service) after deleting")
    }

    private static func encodeAccount(_ account: Account) throws(SessionError) -> Data {
        do {
            return try JSONEncoder().encode(account)
        } catch {
            throw SessionError(.storageFailure, "cannot encode the account \(account.storageKey)")
        }
    }

    /// Throws the ``SessionError`` that `status` means; Keychain messages name the failure, never a secret.
    private func check(_ status: KeychainStatus, action: String) throws(SessionError) {
        if let error = Self.error(for: status, action: action, reason: calls.message(for: status)) { throw error }
    }

    /// The ``SessionError`` an `OSStatus` means, or `nil` for `errSecSuccess`.
    ///
    /// - Parameters:
    ///   - status: What the Keychain answered.
    ///   - action: What the store was doing, for the message.
    ///   - reason: The system's description of `status`, if any.
    /// - Returns: The error, whose message names the action and the status and never a secret.
    package static func error(for status: KeychainStatus, action: String, reason: String?) -> SessionError? {
        let detail = "\(action): \(reason ?? "no description") (\(status))"
        switch status {
        case .success:
            return nil
        case .userCanceled:
            return SessionError(.userCancelled, "the user cancelled the Keychain prompt while \(detail)")
        case .authFailed:
            // The user did not pass Face ID, Touch ID or the passcode: asking again may succeed.
            return SessionError(
                .userCancelled, "the user did not pass the Keychain's user-presence check while \(detail)")
        case .interactionNotAllowed:
            return SessionError(
                .storeUnavailable,
                "the Keychain cannot be used now (device locked, or no prompt can be shown) while \(detail)"
            )
        case .missingEntitlement:
            return SessionError(
                .storeUnavailable,
                "the app lacks the keychain-access-groups entitlement for the data protection keychain or the "
                    + "access group while \(detail)"
            )
        case .notAvailable:
            return SessionError(.storeUnavailable, "no keychain is available while \(detail)")
        case .itemNotFound:
            return SessionError(.storageFailure, "the Keychain item is missing while \(detail)")
        case .duplicateItem:
            return SessionError(.storageFailure, "the Keychain item already exists while \(detail)")
        default:
            return SessionError(.storageFailure, "the Keychain failed while \(detail)")
        }
    }
}
