import Testing

@testable import SessionKit

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
