import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// SessionKit's cryptography against vectors nobody here wrote: NIST CAVP files and the Ed25519 set shipped by
/// `cryptography-vectors`, and pyca/cryptography and jwcrypto as outside signers and verifiers
/// (Tests/CryptoOracle/crypto_oracle.py).
///
/// `scripts/test` provides both (``CryptoVectors``). Without them the suite is skipped, or fails under
/// `SESSIONKIT_REQUIRE_CRYPTO_VECTORS=1`. Each test counts the cases it checked and requires a floor, so a
/// missing or truncated file fails rather than passing with nothing checked.
@Suite(
    .timeLimit(.minutes(1)),
    .enabled(
        if: CryptoVectors.shouldRun,
        "no crypto vectors: scripts/test installs cryptography-vectors and sets SESSIONKIT_CRYPTO_VECTORS"))
struct CryptoVectorTests {
    private typealias Vectors = CryptoVectors

    private static func fileName(_ digest: Digest) -> String {
        switch digest {
        case .sha256: "SHA256"
        case .sha384: "SHA384"
        case .sha512: "SHA512"
        }
    }

    // MARK: - SHA-2 (FIPS 180-4; CAVP SHAVS, byte-oriented)

    @Test(arguments: Digest.allCases)
    func digestsMatchNISTShortAndLongMessages(digest: Digest) throws {
        var checked = 0
        for kind in ["ShortMsg", "LongMsg"] {
            let records = try Vectors.records("hashes/SHA2/\(Self.fileName(digest))\(kind).rsp", terminator: "MD")
            for record in records {
                let bits = try #require(record.fields["Len"].flatMap { Int($0) })
                // A zero-length message is written `Msg = 00`.
                let message = bits == 0 ? [] : try #require(record.bytes("Msg"))
                try #require(message.count * 8 == bits)
                let expected = try #require(record.bytes("MD"))
                #expect(PlatformCrypto.digest(digest, of: message) == expected, "\(kind), Len = \(bits)")
                checked += 1
            }
        }
        // 65 + 64 short and long messages for SHA-256, 129 + 128 for SHA-384 and SHA-512.
        #expect(checked >= 129)
    }

    @Test(arguments: Digest.allCases)
    func digestsMatchNISTMonteCarloChains(digest: Digest) throws {
        let path = "hashes/SHA2/\(Self.fileName(digest))Monte.rsp"
        let seedRecords = try Vectors.records(path, terminator: "Seed")
        var seed = try #require(seedRecords.first?.bytes("Seed"))
        var checked = 0
        // SHAVS §6.4: from each checkpoint, MD_i = H(MD_{i-3} || MD_{i-2} || MD_{i-1}) for 1,000 steps.
        for record in try Vectors.records(path, terminator: "MD") {
            var window = [seed, seed, seed]
            for _ in 0..<1000 {
                let next = PlatformCrypto.digest(digest, of: window[0] + window[1] + window[2])
                window = [window[1], window[2], next]
            }
            seed = window[2]
            #expect(seed == record.bytes("MD"), "checkpoint \(record.fields["COUNT"] ?? "?")")
            checked += 1
        }
        #expect(checked == 100)
    }

    // MARK: - ECDSA (FIPS 186-3 SigVer)

    @Test(arguments: [("P-256,SHA-256", VerificationKey.Curve.p256), ("P-384,SHA-384", .p384)])
    func ecdsaMatchesNISTSignatureVerification(section: String, curve: VerificationKey.Curve) throws {
        let size = curve.coordinateByteCount
        var accepted = 0
        var refused = 0
        for record in try Vectors.records("asymmetric/ECDSA/FIPS_186-3/SigVer.rsp", terminator: "Result")
        where record.section == section {
            let message = try #require(record.bytes("Msg"))
            let x = Vectors.leftPadded(try #require(record.bytes("Qx")), to: size)
            let y = Vectors.leftPadded(try #require(record.bytes("Qy")), to: size)
            let signature =
                Vectors.leftPadded(try #require(record.bytes("R")), to: size)
                + Vectors.leftPadded(try #require(record.bytes("S")), to: size)
            let result = try #require(record.fields["Result"])
            // A changed public key may be off the curve: refusing the key is refusing the signature.
            let key = try? VerificationKey.ec(curve: curve, x: x, y: y)
            let valid = key?.isValidSignature(signature, for: message, algorithm: curve.algorithm) ?? false
            #expect(valid == result.hasPrefix("P"), "\(section): \(result)")
            if result.hasPrefix("P") {
                #expect(key != nil, "\(section): a valid signature's key was refused")
                accepted += 1
            } else {
                refused += 1
            }
        }
        #expect(accepted + refused == 15)
        #expect(accepted >= 1 && refused >= 1)
    }

    // MARK: - RSA (FIPS 186-2 SigVer, PKCS #1 v1.5 and PSS)

    private static let joseRSAHashes = ["SHA256": "256", "SHA384": "384", "SHA512": "512"]

    /// The records of an RSA SigVer file whose hash JOSE uses, with the modulus size of their section.
    private func rsaRecords(_ file: String) throws -> [(bits: Int, hash: String, record: CryptoVectors.Record)] {
        try Vectors.records("asymmetric/RSA/FIPS_186-2/\(file)", terminator: "Result").compactMap { record in
            guard let bits = Int(record.section.replacingOccurrences(of: "mod = ", with: "")),
                let hash = record.fields["SHAAlg"].flatMap({ Self.joseRSAHashes[$0] })
            else { return nil }
            return (bits, hash, record)
        }
    }

    @Test func rsaPKCS1MatchesNISTSignatureVerificationFor2048BitsAndMore() throws {
        var accepted = 0
        var refused = 0
        for (bits, hash, record) in try rsaRecords("SigVer15_186-3.rsp") where bits >= 2048 {
            let modulus = try #require(record.bytes("n"))
            let exponent = try #require(record.bytes("e"))
            let message = try #require(record.bytes("Msg"))
            let signature = Vectors.leftPadded(try #require(record.bytes("S")), to: bits / 8)
            let result = try #require(record.fields["Result"])
            let algorithm = try #require(SignatureAlgorithm(rawValue: "RS\(hash)"))
            let key = try? VerificationKey.rsa(modulus: modulus, exponent: exponent)
            let valid = key?.isValidSignature(signature, for: message, algorithm: algorithm) ?? false
            #expect(valid == result.hasPrefix("P"), "mod \(bits), \(algorithm.rawValue): \(result)")
            if result.hasPrefix("P") {
                // The same valid signature is not a PSS signature.
                let pss = try #require(SignatureAlgorithm(rawValue: "PS\(hash)"))
                #expect(key?.isValidSignature(signature, for: message, algorithm: pss) == false)
                accepted += 1
            } else {
                refused += 1
            }
        }
        // Three moduli (2048, 3072, 4096 bits) by three hashes by 18 records, 27 of them valid.
        #expect(accepted + refused >= 162)
        #expect(accepted >= 27 && refused >= 27)
    }

    @Test func rsaKeysUnder2048BitsFromNISTAreRefused() throws {
        var refused = 0
        for (bits, _, record) in try rsaRecords("SigVer15_186-3.rsp") where bits < 2048 {
            let modulus = try #require(record.bytes("n"))
            let exponent = try #require(record.bytes("e"))
            #expect(throws: CryptoError.self, "mod \(bits)") {
                _ = try VerificationKey.rsa(modulus: modulus, exponent: exponent)
            }
            refused += 1
        }
        // 1024 and 1536 bits, by three hashes by 18 records.
        #expect(refused >= 108)
    }

    /// NIST's PSS vectors all use a 10-byte salt, which JOSE's PS256/384/512 do not allow (RFC 7518 §3.5: the
    /// salt is as long as the hash): each one, valid as PSS or not, must be refused. The oracle test below shows
    /// JOSE-conformant PSS signatures are accepted, so this is not a verifier that refuses everything.
    @Test func rsaPSSWithNISTsTenByteSaltIsNotJOSEPSS() throws {
        var validPSS = 0
        var checked = 0
        for (bits, hash, record) in try rsaRecords("SigVerPSS_186-3.rsp") where bits >= 2048 {
            let signature = Vectors.leftPadded(try #require(record.bytes("S")), to: bits / 8)
            let key = try? VerificationKey.rsa(
                modulus: try #require(record.bytes("n")), exponent: try #require(record.bytes("e")))
            let algorithm = try #require(SignatureAlgorithm(rawValue: "PS\(hash)"))
            let valid = key?.isValidSignature(
                signature, for: try #require(record.bytes("Msg")), algorithm: algorithm)
            #expect(valid != true, "mod \(bits), \(algorithm.rawValue): \(record.fields["Result"] ?? "")")
            if record.fields["Result"]?.hasPrefix("P") == true, key != nil { validPSS += 1 }
            checked += 1
        }
        #expect(checked >= 162)
        #expect(validPSS >= 27)
    }

    // MARK: - Ed25519 (RFC 8032)

    @Test func ed25519MatchesTheSignInputVectors() throws {
        var checked = 0
        for line in try Vectors.text("asymmetric/Ed25519/sign.input").split(separator: "\n") {
            // secret || public : public : message : signature || message
            let fields = line.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            try #require(fields.count >= 4)
            let publicKey = try #require(Vectors.hex(fields[1]))
            let message = try #require(Vectors.hex(fields[2]))
            let signature = Array(try #require(Vectors.hex(fields[3])).prefix(64))
            let key = try VerificationKey.ed25519(x: publicKey)
            #expect(key.isValidSignature(signature, for: message, algorithm: .edDSA), "line \(checked + 1)")
            var flipped = signature
            flipped[checked % 64] ^= 0x01
            #expect(!key.isValidSignature(flipped, for: message, algorithm: .edDSA), "line \(checked + 1)")
            #expect(!key.isValidSignature(signature, for: message + [0], algorithm: .edDSA), "line \(checked + 1)")
            checked += 1
        }
        #expect(checked >= 1024)
    }

    // MARK: - The outside oracle

    @Test(.enabled(if: CryptoVectors.oracleShouldRun, "no SESSIONKIT_CRYPTO_PYTHON: scripts/test sets it"))
    func rsaSignaturesFromAnOutsideSignerAreJudgedAsJOSERequires() throws {
        var accepted = 0
        var refused = 0
        var encodings = Set<String>()
        for (index, signed) in try Vectors.oracle("rsa-signatures").enumerated() {
            let modulus = try #require((signed["n"] as? String).flatMap(Vectors.hex))
            let exponent = try #require((signed["e"] as? String).flatMap(Vectors.hex))
            let algorithm = try #require((signed["alg"] as? String).flatMap(SignatureAlgorithm.init(rawValue:)))
            let message = try #require((signed["message"] as? String).flatMap(Vectors.hex))
            let signature = try #require((signed["signature"] as? String).flatMap(Vectors.hex))
            let expected = try #require(signed["valid"] as? Bool)
            let key = try VerificationKey.rsa(modulus: modulus, exponent: exponent)
            #expect(
                key.isValidSignature(signature, for: message, algorithm: algorithm) == expected,
                "case \(index): \(algorithm.rawValue), \(message.count)-byte message, expected \(expected)")
            if expected { accepted += 1 } else { refused += 1 }
            // The DER the Apple backend hands to SecKeyCreateWithData, against pyca/cryptography's.
            let der = try #require(signed["der"] as? String)
            if encodings.insert(der).inserted {
                #expect(Vectors.hex(DER.rsaPublicKey(modulus: modulus, exponent: exponent)) == der)
            }
        }
        // Two keys by three hashes by four messages: a PKCS #1 and a PSS signature valid, six not.
        #expect(accepted >= 48)
        #expect(refused >= 144)
        #expect(encodings.count == 2)
    }

    @Test(.enabled(if: CryptoVectors.oracleShouldRun, "no SESSIONKIT_CRYPTO_PYTHON: scripts/test sets it"))
    func es256SignaturesAreAcceptedByAnOutsideVerifier() throws {
        let messages: [[UInt8]] =
            [[], [0], Array("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9".utf8)]
            + [Array(repeating: 0xA5, count: 1000)]
        var cases: [[String: Any]] = []
        var expected: [Bool] = []
        for index in 0..<4 {
            let key = try P256SigningKey()
            guard case .ec(_, let x, let y) = key.publicKey.material else {
                Issue.record("a P-256 signing key's public key is not an EC key")
                return
            }
            #if !canImport(CryptoKit)
                // Half the keys sign with nonces prepared ahead (ECDSA_sign_setup, then ECDSA_do_sign_ex), the way a
                // DPoP proof is signed on Linux; the others' first signature is a whole one.
                let prepared = index.isMultiple(of: 2)
                if prepared { key.prepareNonces() }
            #endif
            for message in messages {
                let signature = try key.sign(message)
                #expect(key.publicKey.isValidSignature(signature, for: message, algorithm: .es256))
                var tampered = signature
                tampered[63] ^= 0x01
                for (candidate, valid) in [(signature, true), (tampered, false)] {
                    cases.append([
                        "x": Vectors.hex(x), "y": Vectors.hex(y), "message": Vectors.hex(message),
                        "signature": Vectors.hex(candidate),
                    ])
                    expected.append(valid)
                }
            }
            #if !canImport(CryptoKit)
                if prepared {
                    // Each of the four signatures took a prepared nonce (too few to ask for a refill).
                    #expect(key.preparedNonces == PlatformCrypto.P256KeyObject.poolTarget - messages.count)
                }
            #endif
        }
        let verdicts = try Vectors.oracle("verify-es256", input: cases).map { $0["valid"] as? Bool }
        #expect(verdicts == expected)
        #expect(verdicts.count == 32)
    }

    @Test(.enabled(if: CryptoVectors.oracleShouldRun, "no SESSIONKIT_CRYPTO_PYTHON: scripts/test sets it"))
    func thumbprintsMatchAnOutsideImplementation() throws {
        var keys = try (0..<3).map { _ in try P256SigningKey().publicKey }
        keys.append(try VerificationKey.ed25519(x: Array(repeating: 7, count: 32)))
        keys.append(
            try VerificationKey.rsa(modulus: [0xC5] + Array(repeating: 0x3B, count: 254) + [0x01], exponent: [1, 0, 1]))
        let input: [[String: Any]] = keys.map { key in key.jwk.mapValues { $0.stringValue ?? "" } }
        let thumbprints = try Vectors.oracle("thumbprint", input: input).map { $0["thumbprint"] as? String }
        #expect(thumbprints == keys.map(\.thumbprint))
    }
}
