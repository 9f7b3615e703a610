import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The ES256 signing key: its signatures verify (here; an outside verifier checks them in ``CryptoVectorTests``),
/// it survives its stored form, it refuses scalars outside [1, n - 1], and it never shows its private key.
@Suite(.timeLimit(.minutes(1))) struct P256SigningKeyTests {
    /// n - 1 for P-256, the largest valid scalar.
    private static let orderMinusOne =
        CryptoVectors.hex(
            "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632550") ?? []

    @Test func signaturesVerifyWithThePublicKeyAndOnlyForTheirMessage() throws {
        let key = try P256SigningKey()
        let other = try P256SigningKey()
        for message in [[], [0], Array("header.payload".utf8), [UInt8](repeating: 0x42, count: 4096)] {
            let signature = try key.sign(message)
            #expect(signature.count == 64)
            #expect(key.publicKey.isValidSignature(signature, for: message, algorithm: .es256))
            #expect(!key.publicKey.isValidSignature(signature, for: message + [1], algorithm: .es256))
            #expect(!key.publicKey.isValidSignature(signature, for: message, algorithm: .es384))
            #expect(!other.publicKey.isValidSignature(signature, for: message, algorithm: .es256))
        }
        // ECDSA is randomized: two signatures of one message differ, and both verify.
        let first = try key.sign([7])
        let second = try key.sign([7])
        #expect(first != second)
        #expect(key.publicKey.isValidSignature(second, for: [7], algorithm: .es256))
    }

    @Test func theStoredFormRestoresTheSameKey() throws {
        let key = try P256SigningKey()
        let stored = key.storageRepresentation
        #expect(stored.count == 32)
        let restored = try P256SigningKey(storageRepresentation: stored)
        #expect(restored.publicKey == key.publicKey)
        #expect(restored.thumbprint == key.thumbprint)
        let signature = try restored.sign([1, 2, 3])
        #expect(key.publicKey.isValidSignature(signature, for: [1, 2, 3], algorithm: .es256))
        #expect(try P256SigningKey().storageRepresentation != stored)
    }

    @Test func scalarsOutsideOneToNMinusOneAndWrongLengthsAreRefused() throws {
        // n - 1 and 1 are the ends of the valid range.
        _ = try P256SigningKey(storageRepresentation: Self.orderMinusOne)
        _ = try P256SigningKey(storageRepresentation: [UInt8](repeating: 0, count: 31) + [1])
        var order = Self.orderMinusOne
        order[31] += 1
        var orderPlusOne = order
        orderPlusOne[31] += 1
        let bad: [[UInt8]] = [
            [UInt8](repeating: 0, count: 32), order, orderPlusOne, [UInt8](repeating: 0xFF, count: 32),
            [], [1], [UInt8](repeating: 1, count: 31), [UInt8](repeating: 1, count: 33),
        ]
        for (index, scalar) in bad.enumerated() {
            #expect(throws: CryptoError.self, "case \(index)") { _ = try P256SigningKey(storageRepresentation: scalar) }
        }
    }

    @Test func thePublicJWKAndThumbprintFollowRFC7638() throws {
        let key = try P256SigningKey()
        let jwk = key.publicJWK
        #expect(Set(jwk.keys) == ["kty", "crv", "x", "y"])
        #expect(jwk["kty"] == .string("EC"))
        #expect(jwk["crv"] == .string("P-256"))
        let x = try #require(jwk["x"]?.stringValue)
        let y = try #require(jwk["y"]?.stringValue)
        #expect(Base64URL.decode(x)?.count == 32 && Base64URL.decode(y)?.count == 32)
        // RFC 7638 §3.3: members in lexicographic order, no whitespace, then SHA-256 and base64url.
        let canonical = "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"\(x)\",\"y\":\"\(y)\"}"
        #expect(key.thumbprint == Base64URL.encode(PlatformCrypto.sha256(Array(canonical.utf8))))
        #expect(try VerificationKey(jwk: jwk) == key.publicKey)
    }

    @Test func descriptionsAndMirrorsNeverShowThePrivateKey() throws {
        let key = try P256SigningKey(storageRepresentation: Self.orderMinusOne)
        let hex = CryptoVectors.hex(key.storageRepresentation)
        let encoded = Base64URL.encode(key.storageRepresentation)
        var dumped = ""
        dump(key, to: &dumped)
        for text in [key.description, key.debugDescription, String(describing: key), String(reflecting: key), dumped] {
            #expect(!text.contains(hex) && !text.contains(encoded) && !text.contains("255, 255"))
            #expect(!text.contains("scalar"))
        }
        #expect(key.description.contains(key.thumbprint))
    }
}

#if !canImport(CryptoKit)
    /// The nonces a Linux key prepares ahead (`sk_p256_signer` in shim.h): each signature takes one and no other
    /// does, so no two signatures share r; the pool is cleared and refilled; a process that exits while the
    /// background thread prepares one exits cleanly.
    @Suite(.timeLimit(.minutes(2))) struct P256NoncePoolTests {
        @Test func everySignatureTakesItsOwnNonce() throws {
            let key = try P256SigningKey()
            key.prepareNonces()
            let full = key.preparedNonces
            #expect(full == PlatformCrypto.P256KeyObject.poolTarget)
            _ = try key.sign([1])
            // One taken and not put back (the background fill starts only at half).
            #expect(key.preparedNonces == full - 1)
            // r is x(k·G): a nonce used twice gives the same r twice, and reveals the private key.
            var rs = Set<[UInt8]>()
            let signatures = 4 * full
            for index in 0..<signatures {
                let message = Array("message \(index)".utf8)
                let signature = try key.sign(message)
                #expect(key.publicKey.isValidSignature(signature, for: message, algorithm: .es256))
                rs.insert(Array(signature.prefix(32)))
            }
            #expect(rs.count == signatures)
        }

        @Test func signaturesFromManyThreadsAtOnceNeverShareANonce() async throws {
            let key = try P256SigningKey()
            let rs = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
                for task in 0..<8 {
                    group.addTask {
                        try (0..<64).map { index in
                            let message = Array("\(task).\(index)".utf8)
                            let signature = try key.sign(message)
                            guard key.publicKey.isValidSignature(signature, for: message, algorithm: .es256) else {
                                throw CryptoError.platformFailure(reason: "a signature did not verify")
                            }
                            return Array(signature.prefix(32))
                        }
                    }
                }
                return try await group.reduce(into: [[UInt8]]()) { $0 += $1 }
            }
            #expect(Set(rs).count == 8 * 64)
        }

        @Test func identifiersAreSixteenFreshBytesEachTime() throws {
            let key = try P256SigningKey()
            key.prepareNonces()
            var seen = Set<[UInt8]>()
            for _ in 0..<(4 * PlatformCrypto.P256KeyObject.poolTarget) {
                let identifier = try key.identifier()
                #expect(identifier.count == 16)
                seen.insert(identifier)
            }
            #expect(seen.count == 4 * PlatformCrypto.P256KeyObject.poolTarget)
        }

        /// A forked child starts with its parent's pool in memory; it must prepare its own nonces, or the two
        /// processes would sign with the same k (`sk_p256_signer` drains the pool when the process id changes).
        @Test func aForkedChildNeverSignsWithItsParentsNonces() throws {
            let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
            let (output, status) = try ChildProcess(executable, ["fork-signatures"]).finish()
            #expect(status == 0 && output.contains("done"), "\(output)")
            let lines = output.split(separator: "\n").filter { $0.hasPrefix("r ") }.map { $0.split(separator: " ") }
            #expect(lines.count == 14)
            #expect(Set(lines.map { $0[1] }).count == 2, "signatures from the parent and the child")
            #expect(Set(lines.map { $0[2] }).count == lines.count, "a nonce used on both sides of the fork")
        }

        /// OpenSSL frees its tables at exit; without the preparer stopping first, about one run in five crashed.
        @Test func aProcessExitingWhileNoncesArePreparedExitsCleanly() throws {
            let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
            var statuses: [Int32] = []
            for _ in 0..<24 {
                let (output, status) = try ChildProcess(executable, ["proofs-then-exit", "300"]).finish()
                #expect(output.contains("made 300"))
                statuses.append(status)
            }
            #expect(statuses.allSatisfy { $0 == 0 }, "exit statuses: \(statuses)")
        }
    }
#endif
