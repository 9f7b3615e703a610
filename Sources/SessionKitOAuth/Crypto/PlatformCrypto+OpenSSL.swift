#if !canImport(CryptoKit)
    import CSessionKitCrypto
    import Synchronization

    // The Linux backend: OpenSSL 3 through the C functions in Sources/CSessionKitCrypto/shim.h, each of which
    // frees what it creates and clears OpenSSL's error queue, so no OpenSSL object outlives a call here.
    // Callers have checked lengths and ranges already; the C side checks them again.
    extension PlatformCrypto {
        /// The digest of `message`, or `nil` when OpenSSL fails.
        package static func platformDigest(_ digest: Digest, of message: [UInt8]) -> [UInt8]? {
            var output = [UInt8](repeating: 0, count: 64)
            let capacity = output.count
            var length = 0
            guard sk_digest(digest.openSSLDigest, message, message.count, &output, capacity, &length) == 1,
                length == digest.byteCount
            else { return nil }
            return Array(output.prefix(length))
        }

        /// `count` bytes from `RAND_bytes`, or `nil` when it fails.
        package static func platformRandomBytes(count: Int) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            guard sk_random_bytes(&bytes, count) == 1 else { return nil }
            return bytes
        }

        /// Whether `signature` is a valid RSA signature (PKCS #1 v1.5, or PSS with the salt as long as the hash
        /// and MGF1 with the same hash) of `message` under (modulus, exponent).
        package static func verifyRSA(
            modulus: [UInt8], exponent: [UInt8], digest: Digest, pss: Bool, message: [UInt8], signature: [UInt8]
        ) -> Bool {
            let padding = pss ? Int32(SK_RSA_PSS) : Int32(SK_RSA_PKCS1)
            return sk_verify_rsa(
                modulus, modulus.count, exponent, exponent.count, digest.openSSLDigest, padding, message,
                message.count, signature, signature.count) == 1
        }

        /// Whether `signature` (r || s) is a valid ECDSA signature of `message`, hashed with the curve's JOSE
        /// hash (SHA-256 for P-256, SHA-384 for P-384), under the point (x, y).
        package static func verifyECDSA(
            curve: VerificationKey.Curve, x: [UInt8], y: [UInt8], message: [UInt8], signature: [UInt8]
        ) -> Bool {
            sk_verify_ecdsa(
                curve.openSSLCurve, x, y, x.count, curve.digest.openSSLDigest, message, message.count, signature,
                signature.count) == 1
        }

        /// Whether (x, y) is a valid public point of `curve`: on the curve and not the point at infinity.
        package static func isValidPoint(curve: VerificationKey.Curve, x: [UInt8], y: [UInt8]) -> Bool {
            sk_ec_check_public_key(curve.openSSLCurve, x, y, x.count) == 1
        }

        /// Whether `signature` is a valid Ed25519 signature of `message` under the 32-byte `publicKey`.
        package static func verifyEd25519(publicKey: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool {
            sk_verify_ed25519(publicKey, publicKey.count, message, message.count, signature, signature.count) == 1
        }

        /// A new P-256 key pair, or `nil` when OpenSSL fails.
        package static func generateP256() -> (scalar: [UInt8], x: [UInt8], y: [UInt8])? {
            var scalar = [UInt8](repeating: 0, count: 32)
            var x = [UInt8](repeating: 0, count: 32)
            var y = [UInt8](repeating: 0, count: 32)
            guard sk_p256_generate(&scalar, &x, &y) == 1 else { return nil }
            return (scalar, x, y)
        }

        /// The public point of the 32-byte P-256 private scalar, or `nil` when it is not in [1, n - 1].
        package static func p256PublicKey(scalar: [UInt8]) -> (x: [UInt8], y: [UInt8])? {
            var x = [UInt8](repeating: 0, count: 32)
            var y = [UInt8](repeating: 0, count: 32)
            guard sk_p256_public_key(scalar, scalar.count, &x, &y) == 1 else { return nil }
            return (x, y)
        }

    }

    extension PlatformCrypto {
        /// A P-256 private key as an OpenSSL signer, made once so that each signature only signs: importing the
        /// scalar costs more than the signature does, and a DPoP proof goes with every request.
        ///
        /// The signer keeps a few signature nonces prepared ahead (`sk_p256_signer` in shim.h says how, and why each
        /// is used once): a signature takes one and costs a few modular multiplications instead of a scalar
        /// multiplication. When a signature leaves the pool at half or less, the key asks ``IdleWorker`` to fill it
        /// again, on a thread that runs only when a core is idle, so the preparing happens beside the requests
        /// rather than on their path or in their way. A signature with the pool empty is a whole signature.
        ///
        /// Threads may sign with one object at once: the C side takes a nonce under its lock and uses the key
        /// read-only, hence `@unchecked Sendable`. `deinit` clears the prepared nonces, and OpenSSL the scalar.
        package final class P256KeyObject: @unchecked Sendable {
            private let pointer: UnsafeMutableRawPointer
            /// Whether a fill is asked for and not yet done, so a key is queued once.
            private let fillAsked = Atomic<Bool>(false)

            /// How many prepared nonces the pool is filled to.
            package static let poolTarget = Int(SK_P256_POOL_CAPACITY)

            /// The key (scalar, x, y), or `nil` when OpenSSL refuses it or (x, y) is not the scalar's point.
            package init?(scalar: [UInt8], x: [UInt8], y: [UInt8]) {
                guard let pointer = sk_p256_signer_new(scalar, x, y) else { return nil }
                self.pointer = pointer
            }

            deinit { sk_p256_signer_free(pointer) }

            /// The ES256 signature (r || s, 64 bytes) of `message`, or `nil`.
            package func sign(_ message: [UInt8]) -> [UInt8]? {
                var signature = [UInt8](repeating: 0, count: 64)
                var remaining: Int32 = 0
                guard sk_p256_signer_sign(pointer, message, message.count, &signature, &remaining) == 1 else {
                    return nil
                }
                if Int(remaining) <= Self.poolTarget / 2,
                    fillAsked.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
                        .exchanged
                {
                    fillInBackground()
                }
                return signature
            }

            /// 16 random bytes for a one-time identifier (a DPoP proof's `jti`), prepared with the nonces, or `nil`.
            package func identifier() -> [UInt8]? {
                var bytes = [UInt8](repeating: 0, count: 16)
                return sk_p256_signer_identifier(pointer, &bytes) == 1 ? bytes : nil
            }

            /// How many prepared nonces wait; for tests and the benchmark.
            package var preparedCount: Int { Int(sk_p256_signer_prepare(pointer, 0, 0)) }

            /// Fills the pool on ``IdleWorker``, one nonce per run. The job holds the key only weakly between runs,
            /// so a key a session dropped (sign-out) is freed, and its nonces cleared, without waiting for it.
            private func fillInBackground() {
                IdleWorker.shared.submit { [weak self] in
                    guard let self else { return false }
                    let count = sk_p256_signer_prepare(pointer, Int32(Self.poolTarget), 1)
                    guard count >= 0, Int(count) < Self.poolTarget else {
                        fillAsked.store(false, ordering: .releasing)
                        return false
                    }
                    return true
                }
            }

            /// Fills the pool to `target` nonces now, on the caller's thread; returns how many it holds, or `nil` on
            /// failure.
            @discardableResult
            package func prepare(upTo target: Int = poolTarget) -> Int? {
                let count = sk_p256_signer_prepare(pointer, Int32(target), Int32(target))
                return count < 0 ? nil : Int(count)
            }
        }
    }

    extension Digest {
        fileprivate var openSSLDigest: Int32 {
            switch self {
            case .sha256: Int32(SK_DIGEST_SHA256)
            case .sha384: Int32(SK_DIGEST_SHA384)
            case .sha512: Int32(SK_DIGEST_SHA512)
            }
        }
    }

    extension VerificationKey.Curve {
        fileprivate var openSSLCurve: Int32 {
            switch self {
            case .p256: Int32(SK_CURVE_P256)
            case .p384: Int32(SK_CURVE_P384)
            }
        }
    }
#endif
