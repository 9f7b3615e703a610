import Foundation
import SessionKitOAuth

/// The Keychain calls ``KeychainCredentialStore`` makes: one call of the Security framework each, no decision.
///
/// Everything the store decides (which items, which attributes, add or not, which protection, what each
/// `OSStatus` means) is portable Swift in the store; only a conformance that forwards these calls to `SecItem…`
/// is Apple-only, so the logic is compiled and tested on Linux against a fake that models the Keychain's
/// documented behaviour.
package protocol KeychainCalls: Sendable {
    /// `SecItemAdd`: adds `item`; `duplicateItem` when an item with its primary key (service, account, access
    /// group) exists.
    func add(_ item: KeychainItem) -> KeychainStatus

    /// `SecItemCopyMatching` with `kSecReturnData` and `kSecMatchLimitOne`: the secret of one matching item.
    /// This is the call that asks for user presence when the item's access control requires it.
    func copyData(matching query: KeychainQuery) -> (status: KeychainStatus, data: Data?)

    /// `SecItemCopyMatching` with `kSecReturnAttributes` and `kSecMatchLimitAll`: the account and generic
    /// attributes of every matching item, without their secrets (so it never asks for user presence).
    func copyAttributes(matching query: KeychainQuery) -> (status: KeychainStatus, items: [KeychainAttributes])

    /// `SecItemDelete`: deletes the matching items (the macOS file-based keychain may delete one per call).
    func delete(matching query: KeychainQuery) -> KeychainStatus

    /// `SecCopyErrorMessageString`: the system's description of `status`, if it has one.
    func message(for status: KeychainStatus) -> String?
}

/// What identifies Keychain items: `kSecClassGenericPassword` with these attributes.
package struct KeychainQuery: Hashable, Sendable {
    /// `kSecAttrService`.
    package var service: String
    /// `kSecAttrAccount`; `nil` matches every account of the service.
    package var account: String?
    /// `kSecAttrAccessGroup`; `nil` adds to the app's default group and matches every group the app may use.
    package var accessGroup: String?
    /// `kSecUseDataProtectionKeychain` (macOS; the only keychain elsewhere).
    package var usesDataProtectionKeychain: Bool

    package init(service: String, account: String?, accessGroup: String?, usesDataProtectionKeychain: Bool) {
        self.service = service
        self.account = account
        self.accessGroup = accessGroup
        self.usesDataProtectionKeychain = usesDataProtectionKeychain
    }
}

/// A generic-password item to add.
package struct KeychainItem: Sendable {
    /// Its primary key; `account` is set.
    package var query: KeychainQuery
    /// `kSecAttrLabel`.
    package var label: String
    /// `kSecAttrGeneric`: the account, not secret, so listing needs no secret.
    package var generic: Data
    /// `kSecValueData`: the secret.
    package var secret: Data
    /// `kSecAttrAccessible`, or `kSecAttrAccessControl` (never both: the Keychain refuses the pair).
    package var protection: KeychainProtection
}

/// How an item is protected.
package enum KeychainProtection: Hashable, Sendable {
    /// `kSecAttrAccessible` with this value: readable without asking the user.
    case accessible(KeychainCredentialStore.Accessibility)
    /// `kSecAttrAccessControl` made by `SecAccessControlCreateWithFlags` with this accessibility and
    /// `.userPresence`: reading the secret asks for Face ID, Touch ID or the passcode.
    case userPresence(KeychainCredentialStore.Accessibility)
}

/// The attributes of one item, as an attributes-only query returns them.
package struct KeychainAttributes: Hashable, Sendable {
    /// `kSecAttrAccount`.
    package var account: String
    /// `kSecAttrGeneric`, if the item has one.
    package var generic: Data?

    package init(account: String, generic: Data?) {
        self.account = account
        self.generic = generic
    }
}

/// An `OSStatus` from the Security framework, with the values of the ones the store handles.
///
/// The values are the Security framework's (SecBase.h, "Security Framework Result Codes"); the tests compare
/// them with the SDK's constants where the Security framework exists.
package struct KeychainStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: Int32

    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// `errSecSuccess`.
    package static let success = KeychainStatus(rawValue: 0)
    /// `errSecParam`: a parameter was not valid (such as an access control that cannot be created).
    package static let param = KeychainStatus(rawValue: -50)
    /// `errSecUserCanceled`: the user dismissed the authentication prompt.
    package static let userCanceled = KeychainStatus(rawValue: -128)
    /// `errSecNotAvailable`: no keychain is available.
    package static let notAvailable = KeychainStatus(rawValue: -25291)
    /// `errSecAuthFailed`: the user did not pass authentication.
    package static let authFailed = KeychainStatus(rawValue: -25293)
    /// `errSecDuplicateItem`: an item with the same primary key exists.
    package static let duplicateItem = KeychainStatus(rawValue: -25299)
    /// `errSecItemNotFound`: no item matched.
    package static let itemNotFound = KeychainStatus(rawValue: -25300)
    /// `errSecInteractionNotAllowed`: the item cannot be reached now (device locked) or the user cannot be asked.
    package static let interactionNotAllowed = KeychainStatus(rawValue: -25308)
    /// `errSecMissingEntitlement`: the app lacks the entitlement (`keychain-access-groups`) the call needs.
    package static let missingEntitlement = KeychainStatus(rawValue: -34018)

    package var description: String { "OSStatus \(rawValue)" }
}

/// Where the Security framework is missing: every call answers `errSecNotAvailable`.
struct UnavailableKeychainCalls: KeychainCalls {
    func add(_ item: KeychainItem) -> KeychainStatus { .notAvailable }
    func copyData(matching query: KeychainQuery) -> (status: KeychainStatus, data: Data?) { (.notAvailable, nil) }
    func copyAttributes(matching query: KeychainQuery) -> (status: KeychainStatus, items: [KeychainAttributes]) {
        (.notAvailable, [])
    }
    func delete(matching query: KeychainQuery) -> KeychainStatus { .notAvailable }
    func message(for status: KeychainStatus) -> String? {
        status == .notAvailable ? "the Keychain exists on Apple platforms only" : nil
    }
}
