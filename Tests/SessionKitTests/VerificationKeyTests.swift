import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// Verification keys from JWKs and their refusals: the RFC examples, every malformed input the checks name, and
/// a seeded fuzz run. Each bad input ends in a typed ``CryptoError`` or `false`, never a trap.
@Suite(.timeLimit(.minutes(1))) struct VerificationKeyTests {
    /// RFC 7638 §3.1: the example RSA key and its thumbprint.
    private static let rfc7638Key: [String: JSONValue] = [
        "kty": .string("RSA"), "e": .string("AQAB"), "alg": .string("RS256"), "kid": .string("2011-04-29"),
        "n": .string(
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
        ),
    ]

    /// RFC 8037 Appendix A.2: the example Ed25519 public key.
    private static let rfc8037Key: [String: JSONValue] = [
        "kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"),
    ]

    /// RFC 7515 Appendix A.3: the example ES256 key.
    private static let rfc7515Key: [String: JSONValue] = [
        "kty": .string("EC"), "crv": .string("P-256"), "x": .string("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"),
        "y": .string("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"),
    ]

    /// The generator of P-256 and of P-384 (SEC 2 §2.4.2, §2.5.1): points certainly on their curves.
    private static let p256Generator = (
        x: CryptoVectors.hex("6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296") ?? [],
        y: CryptoVectors.hex("4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5") ?? []
    )
    private static let p384Generator = (
        x: CryptoVectors.hex(
            "aa87ca22be8b05378eb1c71ef320ad746e1d3b628ba79b9859f741e082542a385502f25dbf55296c3a545e3872760ab7") ?? [],
        y: CryptoVectors.hex(
            "3617de4a96262c6f5d9e98bf9292dc29f8f41dbd289a147ce9da3113b5f0b8c00a60b1ce1d7e819d7a431d7c90ea0e5f") ?? []
    )

    private func jws(_ compact: String) throws -> (message: [UInt8], signature: [UInt8]) {
        let parts = compact.split(separator: ".")
        try #require(parts.count == 3)
        return (Array("\(parts[0]).\(parts[1])".utf8), try #require(Base64URL.decode(parts[2])))
    }

    /// The reason of the ``CryptoError/malformedKey(reason:)`` `body` throws, or `nil` for anything else.
    private func malformedReason(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as CryptoError {
            if case .malformedKey(let reason) = error { return reason }
            return nil
        } catch {
            return nil
        }
    }

    // MARK: - The RFC examples

    @Test func rfc7638ExampleKeyHasItsThumbprint() throws {
        let key = try VerificationKey(jwk: Self.rfc7638Key)
        #expect(key.thumbprint == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
        #expect(key.description == "VerificationKey(RSA, 2048 bits)")
        #expect(key.jwk == ["kty": .string("RSA"), "e": .string("AQAB"), "n": Self.rfc7638Key["n"] ?? .null])
    }

    @Test func rfc8037ExampleKeyHasItsThumbprintAndVerifiesItsSignature() throws {
        let key = try VerificationKey(jwk: Self.rfc8037Key)
        #expect(key.thumbprint == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k")
        // RFC 8037 Appendix A.4.
        let (message, signature) = try jws(
            "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc.hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
        )
        #expect(key.isValidSignature(signature, for: message, algorithm: .edDSA))
        #expect(!key.isValidSignature(signature, for: message.dropLast() + [0x68], algorithm: .edDSA))
    }

    @Test func rfc7515ExampleES256SignatureVerifies() throws {
        let key = try VerificationKey(jwk: Self.rfc7515Key)
        let (message, signature) = try jws(
            "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
        )
        #expect(key.isValidSignature(signature, for: message, algorithm: .es256))
        // Every algorithm that does not fit a P-256 key is refused, whatever the signature.
        for algorithm in SignatureAlgorithm.allCases where algorithm != .es256 {
            #expect(!key.isValidSignature(signature, for: message, algorithm: algorithm), "\(algorithm)")
        }
        // Truncated, extended, emptied: a wrong length is not valid.
        for bad in [Array(signature.dropLast()), signature + [0], [], signature + signature] {
            #expect(!key.isValidSignature(bad, for: message, algorithm: .es256))
        }
        // r and s swapped, all zero, all 0xFF (above the group order).
        let swapped = Array(signature[32...] + signature[..<32])
        for bad in [swapped, [UInt8](repeating: 0, count: 64), [UInt8](repeating: 0xFF, count: 64)] {
            #expect(!key.isValidSignature(bad, for: message, algorithm: .es256))
        }
    }

    @Test func keysOfOtherTypesRefuseEveryAlgorithmThatIsNotTheirs() throws {
        let rsa = try VerificationKey(jwk: Self.rfc7638Key)
        let ed25519 = try VerificationKey(jwk: Self.rfc8037Key)
        for algorithm in [SignatureAlgorithm.es256, .es384, .edDSA] {
            #expect(!rsa.isValidSignature([UInt8](repeating: 1, count: 256), for: [], algorithm: algorithm))
        }
        for algorithm in SignatureAlgorithm.allCases where algorithm != .edDSA {
            #expect(!ed25519.isValidSignature([UInt8](repeating: 1, count: 64), for: [], algorithm: algorithm))
        }
        // RSA signatures must be exactly as long as the modulus.
        for length in [0, 1, 255, 257, 512] {
            #expect(!rsa.isValidSignature([UInt8](repeating: 1, count: length), for: [1], algorithm: .rs256))
        }
        #expect(!ed25519.isValidSignature([UInt8](repeating: 0, count: 63), for: [], algorithm: .edDSA))
    }

    // MARK: - Refused keys

    @Test func jwksWithoutWhatTheirTypeNeedsAreMalformed() {
        let p256x = Self.rfc7515Key["x"] ?? .null
        let cases: [[String: JSONValue]] = [
            [:],
            ["kty": .number(1)],
            ["kty": .string("RSA"), "e": .string("AQAB")],
            ["kty": .string("RSA"), "n": Self.rfc7638Key["n"] ?? .null],
            ["kty": .string("RSA"), "n": .number(3), "e": .string("AQAB")],
            ["kty": .string("RSA"), "n": .string("not base64url!"), "e": .string("AQAB")],
            ["kty": .string("EC"), "x": p256x, "y": p256x],
            ["kty": .string("EC"), "crv": .string("P-256"), "x": p256x],
            ["kty": .string("EC"), "crv": .string("P-256"), "x": p256x, "y": .string("AA=A")],
            ["kty": .string("OKP"), "x": Self.rfc8037Key["x"] ?? .null],
            ["kty": .string("OKP"), "crv": .string("Ed25519")],
            // A private member in a verification key.
            Self.rfc8037Key.merging(["d": .string("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")]) { $1 },
            Self.rfc7638Key.merging(["p": .string("AQAB")]) { $1 },
        ]
        for (index, jwk) in cases.enumerated() {
            #expect(malformedReason { _ = try VerificationKey(jwk: jwk) } != nil, "case \(index)")
        }
    }

    @Test func otherKeyTypesAndCurvesAreUnsupported() {
        let cases: [[String: JSONValue]] = [
            ["kty": .string("oct"), "k": .string("AQAB")],
            ["kty": .string("rsa"), "n": Self.rfc7638Key["n"] ?? .null, "e": .string("AQAB")],
            ["kty": .string("EC"), "crv": .string("P-521"), "x": .string("AQAB"), "y": .string("AQAB")],
            ["kty": .string("EC"), "crv": .string("secp256k1"), "x": .string("AQAB"), "y": .string("AQAB")],
            ["kty": .string("OKP"), "crv": .string("X25519"), "x": Self.rfc8037Key["x"] ?? .null],
            ["kty": .string("OKP"), "crv": .string("Ed448"), "x": .string("AQAB")],
        ]
        for (index, jwk) in cases.enumerated() {
            #expect(throws: CryptoError.unsupportedAlgorithm, "case \(index)") { _ = try VerificationKey(jwk: jwk) }
        }
    }

    @Test func rsaModuliUnder2048BitsAndBadExponentsAreRefused() throws {
        let modulus = try #require(Base64URL.decode(Self.rfc7638Key["n"]?.stringValue ?? ""))
        #expect(modulus.count == 256)
        // 1024 bits; 2047 bits (the top bit cleared); leading zeros do not count as bits.
        let short = Array(modulus.prefix(127)) + [0x01]
        let bits2047 = [modulus[0] & 0x7F] + modulus.dropFirst()
        for bad in [short, bits2047, [0, 0] + short, []] {
            let reason = malformedReason { _ = try VerificationKey.rsa(modulus: bad, exponent: [1, 0, 1]) }
            #expect(reason?.contains("at least 2048") == true)
        }
        // An even modulus; exponents 1, even, empty, over 8 bytes; a modulus over 16384 bits.
        #expect(
            malformedReason { _ = try VerificationKey.rsa(modulus: modulus.dropLast() + [2], exponent: [3]) } != nil)
        for exponent: [UInt8] in [[1], [0, 1], [2], [], [0], [1] + [UInt8](repeating: 0, count: 8) + [1]] {
            #expect(malformedReason { _ = try VerificationKey.rsa(modulus: modulus, exponent: exponent) } != nil)
        }
        let huge = [UInt8](repeating: 0xFF, count: 2049)
        #expect(malformedReason { _ = try VerificationKey.rsa(modulus: huge, exponent: [3]) } != nil)
        // A leading zero on a good modulus is tolerated and dropped.
        let padded = try VerificationKey.rsa(modulus: [0] + modulus, exponent: [0, 1, 0, 1])
        #expect(padded == (try VerificationKey(jwk: Self.rfc7638Key)))
    }

    @Test func ecPointsOffTheirCurveOrOfTheWrongSizeAreRefused() throws {
        let g256 = Self.p256Generator
        let g384 = Self.p384Generator
        // The generators are valid points of their own curves.
        _ = try VerificationKey.ec(curve: .p256, x: g256.x, y: g256.y)
        _ = try VerificationKey.ec(curve: .p384, x: g384.x, y: g384.y)
        let zeros = [UInt8](repeating: 0, count: 16)
        var offCurve = g256.y
        offCurve[31] ^= 0x01
        let cases: [(VerificationKey.Curve, [UInt8], [UInt8])] = [
            (.p256, g256.x, offCurve),  // off the curve
            (.p256, g384.x, g384.y),  // a P-384 point labelled P-256: wrong size
            (.p384, g256.x, g256.y),  // a P-256 point labelled P-384: wrong size
            (.p384, zeros + g256.x, zeros + g256.y),  // the right size, not on P-384
            (.p256, zeros + zeros, zeros + zeros),  // the point at infinity's usual stand-in
            (.p256, [0] + g256.x, [0] + g256.y),  // a leading zero is not allowed (RFC 7518 §6.2.1.2)
            (.p256, Array(g256.x.dropFirst()), g256.y),
            (.p256, [UInt8](repeating: 0xFF, count: 32), g256.y),  // x above the field prime
        ]
        for (index, (curve, x, y)) in cases.enumerated() {
            #expect(malformedReason { _ = try VerificationKey.ec(curve: curve, x: x, y: y) } != nil, "case \(index)")
        }
        // The same through a JWK: a P-384 point in a P-256 JWK.
        let jwk: [String: JSONValue] = [
            "kty": .string("EC"), "crv": .string("P-256"), "x": .string(Base64URL.encode(g384.x)),
            "y": .string(Base64URL.encode(g384.y)),
        ]
        #expect(malformedReason { _ = try VerificationKey(jwk: jwk) } != nil)
    }

    @Test func ed25519KeysMustBe32Bytes() {
        for length in [0, 31, 33, 64] {
            #expect(
                malformedReason { _ = try VerificationKey.ed25519(x: [UInt8](repeating: 9, count: length)) } != nil)
        }
    }

    @Test func refusalReasonsNeverContainTheKeysBytes() {
        let x = Self.rfc7515Key["x"]?.stringValue ?? ""
        let jwk: [String: JSONValue] = [
            "kty": .string("EC"), "crv": .string("P-256"), "x": .string(x), "y": .string(x),
        ]
        let reason = malformedReason { _ = try VerificationKey(jwk: jwk) }
        #expect(reason != nil)
        #expect(reason?.contains(x.prefix(8)) == false)
    }

    // MARK: - Fuzz

    /// Seeded random JWKs (mostly near-valid: the right members, random base64url of telling lengths) and
    /// random signatures: every input is a key or a typed error, and every verification a Bool.
    @Test func randomJWKsAndSignaturesNeverTrap() throws {
        let seed = ProcessInfo.processInfo.environment["SESSIONKIT_SEED"].flatMap { UInt64($0) } ?? 0x5E55_C0DE
        var generator = SeededGenerator(seed: seed)
        var keys = 0
        var refused = 0
        func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        func member() -> JSONValue {
            switch Int.random(in: 0..<10, using: &generator) {
            case 0: .number(Double(Int.random(in: -5...5, using: &generator)))
            case 1: .string(String(decoding: bytes(Int.random(in: 0..<12, using: &generator)), as: UTF8.self))
            case 2: .null
            default:
                .string(
                    Base64URL.encode(
                        bytes(
                            [0, 1, 3, 31, 32, 33, 48, 64, 128, 255, 256, 257, 512].randomElement(using: &generator) ?? 0
                        )))
            }
        }
        let types: [JSONValue] = [
            .string("RSA"), .string("EC"), .string("OKP"), .string("oct"), .string(""), .number(0),
        ]
        let curves: [JSONValue] = [
            .string("P-256"), .string("P-384"), .string("Ed25519"), .string("X25519"), .string("P-521"), .bool(true),
        ]
        for index in 0..<3000 {
            var jwk: [String: JSONValue] = [:]
            if Int.random(in: 0..<20, using: &generator) > 0 { jwk["kty"] = types.randomElement(using: &generator) }
            if Bool.random(using: &generator) { jwk["crv"] = curves.randomElement(using: &generator) }
            for name in ["n", "e", "x", "y", "d"]
            where Int.random(in: 0..<(name == "d" ? 20 : 3), using: &generator) > 0 {
                jwk[name] = name == "e" && Bool.random(using: &generator) ? .string("AQAB") : member()
            }
            let key: VerificationKey
            do {
                key = try VerificationKey(jwk: jwk)
            } catch {
                refused += 1
                continue
            }
            keys += 1
            for algorithm in SignatureAlgorithm.allCases {
                let signature = bytes([0, 1, 63, 64, 65, 96, 256, 512].randomElement(using: &generator) ?? 0)
                // Random bytes are a valid signature with negligible probability.
                #expect(!key.isValidSignature(signature, for: bytes(16), algorithm: algorithm), "input \(index)")
            }
        }
        // Some inputs got past every check (random 32-byte Ed25519 keys and large odd RSA moduli do).
        #expect(keys > 0)
        #expect(refused > 0)
    }
}
