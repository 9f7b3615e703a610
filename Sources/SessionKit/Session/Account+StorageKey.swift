import Foundation

extension Account {
    /// The account a ``storageKey`` names, or `nil` when `storageKey` is not one SessionKit wrote.
    ///
    /// Stores use it to tell their own entries from anything else in a directory or keyring, and to check that a
    /// record is filed under its own account's name. Only the canonical spelling is accepted, so a key maps
    /// to one account and back.
    ///
    /// - Parameter storageKey: A key as ``storageKey`` produces it.
    init?(storageKey: String) {
        guard !storageKey.isEmpty,
            storageKey.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    return true
                default:
                    return false
                }
            })
        else { return nil }
        var base64 = storageKey.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let bytes = Data(base64Encoded: base64), let separator = bytes.firstIndex(of: 0),
            let issuer = String(bytes: bytes[..<separator], encoding: .utf8),
            let subject = String(bytes: bytes[(separator + 1)...], encoding: .utf8)
        else { return nil }
        self.init(issuer: issuer, subject: subject)
        guard self.storageKey == storageKey else { return nil }
    }
}
