import Foundation

#if canImport(CryptoKit)
    import CryptoKit
#else
    import CSessionKitCrypto
#endif

/// Names for the shared tables that do not keep what they name: SHA-256 in hex, so a state or a cookie read from a
/// request never becomes a path of its own, and a copy of the tables gives no one a cookie that works.
///
/// A deployment takes swift-crypto's `SHA256`; this package depends on no other package, so on Linux the example
/// calls the libcrypto SessionKit already links.
enum Digest {
    /// The SHA-256 of `text`'s UTF-8 bytes, in lower-case hex.
    static func sha256Hex(_ text: String) -> String {
        let message = Array(text.utf8)
        #if canImport(CryptoKit)
            let digest = Array(SHA256.hash(data: message))
        #else
            var digest = [UInt8](repeating: 0, count: 32)
            var length = 0
            let status = message.withUnsafeBufferPointer { input in
                digest.withUnsafeMutableBufferPointer { output in
                    sk_digest(
                        Int32(SK_DIGEST_SHA256), input.baseAddress, input.count, output.baseAddress,
                        output.count, &length)
                }
            }
            precondition(status == 1 && length == 32, "libcrypto's SHA-256 failed")
        #endif
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
