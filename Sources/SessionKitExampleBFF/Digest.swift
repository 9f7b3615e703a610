import Foundation
import SessionKitOAuth

/// Names for the shared tables that do not keep what they name: SHA-256 in hex, so a state or a cookie read from a
/// request never becomes a path of its own, and a copy of the tables gives no one a cookie that works.
///
/// A deployment takes swift-crypto's `SHA256`; this package depends on no other package, so the example uses the
/// digest SessionKit's own code uses (`package` API, which a copy outside this package replaces with swift-crypto).
enum Digest {
    /// The SHA-256 of `text`'s UTF-8 bytes, in lower-case hex.
    static func sha256Hex(_ text: String) -> String {
        let digest = PlatformCrypto.digest(.sha256, of: Array(text.utf8))
        return digest.map { String(format: "%02x", $0) }.joined()
    }

    /// A fresh opaque value: 32 bytes of the system's secure generator (`getrandom` on Linux), base64url.
    static func randomOpaqueValue() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
