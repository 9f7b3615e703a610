import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The platform's digests and random bytes, and the DER the Apple backend writes, on known answers; the NIST
/// vectors are in ``CryptoVectorTests``.
@Suite(.timeLimit(.minutes(1))) struct PlatformCryptoTests {
    /// FIPS 180-2 Appendix B.1 and C.1/D.1: the digests of "abc".
    @Test(arguments: [
        (Digest.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            .sha384,
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"
        ),
        (
            .sha512,
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd"
                + "454d4423643ce80e2a9ac94fa54ca49f"
        ),
    ])
    func digestOfABCIsTheFIPSExample(digest: Digest, expected: String) {
        let output = PlatformCrypto.digest(digest, of: Array("abc".utf8))
        #expect(output.count == digest.byteCount)
        #expect(CryptoVectors.hex(output) == expected)
    }

    @Test func sha256OfTheEmptyMessageIsTheKnownDigest() {
        #expect(
            CryptoVectors.hex(PlatformCrypto.sha256([]))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func randomBytesHaveTheRequestedCountAndDiffer() throws {
        #expect(try PlatformCrypto.randomBytes(count: 0) == [])
        let first = try PlatformCrypto.randomBytes(count: 32)
        let second = try PlatformCrypto.randomBytes(count: 32)
        #expect(first.count == 32 && second.count == 32)
        #expect(first != second)
        #expect(try PlatformCrypto.randomBytes(count: 100_000).count == 100_000)
    }

    @Test func aNegativeCountIsATypedError() {
        #expect(throws: CryptoError.self) { _ = try PlatformCrypto.randomBytes(count: -1) }
    }

    /// X.690: minimal two's-complement integers (a zero byte before a set high bit, leading zeros dropped) and
    /// the short and long length forms at their boundaries.
    @Test func derEncodesIntegersAndLengthsMinimally() {
        #expect(DER.integer([0x7F]) == [0x02, 0x01, 0x7F])
        #expect(DER.integer([0x80]) == [0x02, 0x02, 0x00, 0x80])
        #expect(DER.integer([0x00, 0x00, 0x01]) == [0x02, 0x01, 0x01])
        #expect(DER.integer([]) == [0x02, 0x01, 0x00])
        #expect(DER.length(127) == [0x7F])
        #expect(DER.length(128) == [0x81, 0x80])
        #expect(DER.length(255) == [0x81, 0xFF])
        #expect(DER.length(256) == [0x82, 0x01, 0x00])
        #expect(DER.length(65_536) == [0x83, 0x01, 0x00, 0x00])
        #expect(
            DER.rsaPublicKey(modulus: [0x80], exponent: [0x01, 0x00, 0x01])
                == [0x30, 0x09, 0x02, 0x02, 0x00, 0x80, 0x02, 0x03, 0x01, 0x00, 0x01])
    }
}
