import Foundation
import SessionKitOAuth

extension Account {
    /// The account a ``storageKey`` names, or `nil` when `storageKey` is not one SessionKit wrote.
    ///
    /// Stores use it to tell their own entries from anything else in a directory or keyring, and to check that a
    /// record is filed under its own account's name. Only the canonical spelling is accepted, so a key maps
    /// to one account and back.
    ///
    /// - Parameter storageKey: A key as ``storageKey`` produces it.
    package init?(storageKey: String) {
        // Base64URL refuses every character outside its alphabet, and the round trip below any non-canonical
        // spelling (padding, stray bits).
        guard !storageKey.isEmpty, let bytes = Base64URL.decode(storageKey), let separator = bytes.firstIndex(of: 0),
            let issuer = String(bytes: bytes[..<separator], encoding: .utf8),
            let subject = String(bytes: bytes[(separator + 1)...], encoding: .utf8)
        else { return nil }
        self.init(issuer: issuer, subject: subject)
        guard self.storageKey == storageKey else { return nil }
    }
}
