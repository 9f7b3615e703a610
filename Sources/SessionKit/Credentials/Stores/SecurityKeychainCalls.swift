import SessionKitOAuth

#if canImport(Security)
    import Foundation
    import Security

    /// ``KeychainCalls`` forwarded to the Security framework, one `SecItem…` call each; every choice is the store's.
    struct SecurityKeychainCalls: KeychainCalls {
        func add(_ item: KeychainItem) -> KeychainStatus {
            var attributes = Self.dictionary(item.query)
            attributes[kSecValueData as String] = item.secret
            attributes[kSecAttrGeneric as String] = item.generic
            attributes[kSecAttrLabel as String] = item.label
            switch item.protection {
            case .accessible(let accessibility):
                attributes[kSecAttrAccessible as String] = Self.constant(accessibility)
            case .userPresence(let accessibility):
                let protection = Self.constant(accessibility)
                guard let control = SecAccessControlCreateWithFlags(nil, protection, .userPresence, nil) else {
                    return .param
                }
                attributes[kSecAttrAccessControl as String] = control
            }
            return KeychainStatus(rawValue: SecItemAdd(attributes as CFDictionary, nil))
        }

        func copyData(matching query: KeychainQuery) -> (status: KeychainStatus, data: Data?) {
            var dictionary = Self.dictionary(query)
            dictionary[kSecReturnData as String] = true
            dictionary[kSecMatchLimit as String] = kSecMatchLimitOne
            var result: CFTypeRef?
            let status = SecItemCopyMatching(dictionary as CFDictionary, &result)
            return (KeychainStatus(rawValue: status), result as? Data)
        }

        func copyAttributes(matching query: KeychainQuery) -> (status: KeychainStatus, items: [KeychainAttributes]) {
            var dictionary = Self.dictionary(query)
            dictionary[kSecReturnAttributes as String] = true
            dictionary[kSecMatchLimit as String] = kSecMatchLimitAll
            var result: CFTypeRef?
            let status = SecItemCopyMatching(dictionary as CFDictionary, &result)
            let items = (result as? [[String: Any]] ?? []).compactMap { item in
                (item[kSecAttrAccount as String] as? String).map {
                    KeychainAttributes(account: $0, generic: item[kSecAttrGeneric as String] as? Data)
                }
            }
            return (KeychainStatus(rawValue: status), items)
        }

        func delete(matching query: KeychainQuery) -> KeychainStatus {
            KeychainStatus(rawValue: SecItemDelete(Self.dictionary(query) as CFDictionary))
        }

        func message(for status: KeychainStatus) -> String? {
            SecCopyErrorMessageString(status.rawValue, nil) as String?
        }

        private static func dictionary(_ query: KeychainQuery) -> [String: Any] {
            var dictionary: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: query.service,
            ]
            if let account = query.account { dictionary[kSecAttrAccount as String] = account }
            if let group = query.accessGroup { dictionary[kSecAttrAccessGroup as String] = group }
            if query.usesDataProtectionKeychain { dictionary[kSecUseDataProtectionKeychain as String] = true }
            return dictionary
        }

        private static func constant(_ accessibility: KeychainCredentialStore.Accessibility) -> CFString {
            switch accessibility {
            case .afterFirstUnlockThisDeviceOnly: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
            case .whenUnlockedThisDeviceOnly: kSecAttrAccessibleWhenUnlockedThisDeviceOnly
            case .whenPasscodeSetThisDeviceOnly: kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly
            }
        }
    }
#endif
