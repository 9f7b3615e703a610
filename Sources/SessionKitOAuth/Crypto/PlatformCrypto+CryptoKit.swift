#if canImport(CryptoKit)
    import CryptoKit
    import Foundation
    import Security

    // The Apple backend: CryptoKit for hashes, ECDSA and Ed25519; Security for randomness and RSA, which CryptoKit
    // does not verify. Callers have checked lengths and ranges already. CryptoKit's P-256/P-384 `isValidSignature`
    // hashes with SHA-256/SHA-384, the hash JOSE pairs with each curve. `SessionKitOAuth.Digest` is spelled out because
    // CryptoKit has a `Digest` protocol.
    extension PlatformCrypto {
        /// The digest of `message`.
        package static func platformDigest(_ digest: SessionKitOAuth.Digest, of message: [UInt8]) -> [UInt8]? {
            switch digest {
            case .sha256: Array(CryptoKit.SHA256.hash(data: message))
            case .sha384: Array(CryptoKit.SHA384.hash(data: message))
            case .sha512: Array(CryptoKit.SHA512.hash(data: message))
            }
        }

        /// `count` bytes from `SecRandomCopyBytes`, or `nil` when it fails.
        package static func platformRandomBytes(count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            guard count > 0 else { return bytes }
            let status = bytes.withUnsafeMutableBytes { buffer -> OSStatus in
                guard let base = buffer.baseAddress else { return errSecParam }
                return SecRandomCopyBytes(kSecRandomDefault, buffer.count, base)
            }
            return status == errSecSuccess ? bytes : nil
        }

        /// Whether `signature` is a valid RSA signature of `message` under (modulus, exponent). Security's PSS
        /// algorithms use a salt as long as the hash and MGF1 with the same hash, as RFC 7518 §3.5 requires.
        package static func verifyRSA(
            modulus: [UInt8], exponent: [UInt8], digest: SessionKitOAuth.Digest, pss: Bool, message: [UInt8],
            signature: [UInt8]
        ) -> Bool {
            let attributes: [String: Any] = [
                kSecAttrKeyType as String: kSecAttrKeyTypeRSA,
                kSecAttrKeyClass as String: kSecAttrKeyClassPublic,
            ]
            let encoded = Data(DER.rsaPublicKey(modulus: modulus, exponent: exponent))
            guard let key = SecKeyCreateWithData(encoded as CFData, attributes as CFDictionary, nil) else {
                return false
            }
            let algorithm: SecKeyAlgorithm =
                switch (digest, pss) {
                case (.sha256, false): .rsaSignatureMessagePKCS1v15SHA256
                case (.sha384, false): .rsaSignatureMessagePKCS1v15SHA384
                case (.sha512, false): .rsaSignatureMessagePKCS1v15SHA512
                case (.sha256, true): .rsaSignatureMessagePSSSHA256
                case (.sha384, true): .rsaSignatureMessagePSSSHA384
                case (.sha512, true): .rsaSignatureMessagePSSSHA512
                }
            guard SecKeyIsAlgorithmSupported(key, .verify, algorithm) else { return false }
            return SecKeyVerifySignature(key, algorithm, Data(message) as CFData, Data(signature) as CFData, nil)
        }

        /// Whether `signature` (r || s) is a valid ECDSA signature of `message` under the point (x, y).
        package static func verifyECDSA(
            curve: VerificationKey.Curve, x: [UInt8], y: [UInt8], message: [UInt8], signature: [UInt8]
        ) -> Bool {
            let point = [0x04] + x + y
            switch curve {
            case .p256:
                guard let key = try? P256.Signing.PublicKey(x963Representation: point),
                    let value = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
                else { return false }
                return key.isValidSignature(value, for: message)
            case .p384:
                guard let key = try? P384.Signing.PublicKey(x963Representation: point),
                    let value = try? P384.Signing.ECDSASignature(rawRepresentation: signature)
                else { return false }
                return key.isValidSignature(value, for: message)
            }
        }

        /// Whether (x, y) is a valid public point of `curve`; CryptoKit refuses a point off the curve.
        package static func isValidPoint(curve: VerificationKey.Curve, x: [UInt8], y: [UInt8]) -> Bool {
            let point = [0x04] + x + y
            switch curve {
            case .p256: return (try? P256.Signing.PublicKey(x963Representation: point)) != nil
            case .p384: return (try? P384.Signing.PublicKey(x963Representation: point)) != nil
            }
        }

        /// Whether `signature` is a valid Ed25519 signature of `message` under the 32-byte `publicKey`.
        package static func verifyEd25519(publicKey: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
            guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
            return key.isValidSignature(signature, for: message)
        }

        /// A new P-256 key pair.
        package static func generateP256() -> (scalar: [UInt8], x: [UInt8], y: [UInt8])? {
            let key = P256.Signing.PrivateKey()
            return split(key)
        }

        /// The public point of the 32-byte P-256 private scalar, or `nil` when CryptoKit refuses it.
        package static func p256PublicKey(scalar: [UInt8]) -> (x: [UInt8], y: [UInt8])? {
            guard let key = try? P256.Signing.PrivateKey(rawRepresentation: scalar), let pair = split(key) else {
                return nil
            }
            return (pair.x, pair.y)
        }

        /// The scalar and the public point's coordinates of `key`.
        private static func split(_ key: P256.Signing.PrivateKey) -> (scalar: [UInt8], x: [UInt8], y: [UInt8])? {
            // rawRepresentation of a public key is x || y.
            let point = Array(key.publicKey.rawRepresentation)
            guard point.count == 64 else { return nil }
            return (Array(key.rawRepresentation), Array(point[..<32]), Array(point[32...]))
        }
    }

    extension PlatformCrypto {
        /// A P-256 private key as a CryptoKit key, made once so that each signature only signs.
        package final class P256KeyObject: @unchecked Sendable {
            // CryptoKit's keys are immutable values; signing with one from several threads is safe.
            private let key: P256.Signing.PrivateKey

            /// The key with private scalar `scalar`, or `nil` when CryptoKit refuses it; (x, y) is checked by
            /// the caller against the scalar's public key.
            package init?(scalar: [UInt8], x: [UInt8], y: [UInt8]) {
                guard let key = try? P256.Signing.PrivateKey(rawRepresentation: scalar),
                    Array(key.publicKey.rawRepresentation) == x + y
                else { return nil }
                self.key = key
            }

            /// 16 random bytes for a one-time identifier (a DPoP proof's `jti`), or `nil`.
            package func identifier() -> [UInt8]? { PlatformCrypto.platformRandomBytes(count: 16) }

            /// The ES256 signature (r || s, 64 bytes) of `message`, or `nil`.
            package func sign(_ message: [UInt8]) -> [UInt8]? {
                guard let signature = try? key.signature(for: message) else { return nil }
                return Array(signature.rawRepresentation)
            }
        }
    }
#endif
