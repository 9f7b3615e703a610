import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// A seeded fuzz test over what an OpenID provider sends: compact JWS, key sets (RSA, EC and OKP keys), discovery
/// documents, and whole ID tokens through the validator. Each must answer a value or a typed `SessionError` for
/// any input, never trap or hang; and no change to a signed token ever validates.
///
/// `SESSIONKIT_FUZZ_INPUTS` sets the number of inputs (5,000 by default, 100,000 under scripts/test);
/// `SESSIONKIT_SEED` replays a run, whose seed is printed.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(20, by: "SESSIONKIT_FUZZ_INPUTS", reference: 100_000))))
struct OpenIDFuzzTests {
    static let fragments: [[UInt8]] =
        [
            ".", "..", "=", "-", "_", "+", "/", "\"", "{", "}", "[", "]", ":", ",", "null", "1e999", "-1", "\\u0000",
            "\"kty\":\"RSA\",", "\"kty\":\"EC\",", "\"crv\":\"P-384\",", "\"kty\":\"OKP\",", "\"alg\":\"none\",",
            "\"crit\":[\"x\"],", "\"kid\":7,", "AAAA", "é",
        ].map { Array($0.utf8) } + [[0xFF], [0x00], [0xC3]]

    static func mutate(_ input: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<7, using: &random) {
            case 0 where !bytes.isEmpty:
                bytes[min(position, bytes.count - 1)] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1: bytes.removeSubrange(position...)
            case 2, 3:
                bytes.insert(
                    contentsOf: fragments[Int.random(in: 0..<fragments.count, using: &random)], at: position)
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &random))
                bytes.removeSubrange(min(position, end)..<end)
            case 5:
                let count = Int.random(
                    in: 1...(Int.random(in: 0..<50, using: &random) == 0 ? 20_000 : 64), using: &random)
                bytes.insert(contentsOf: [UInt8](repeating: Array("[{a.".utf8)[count % 4], count: count), at: position)
            default:
                bytes.insert(UInt8.random(in: 0...255, using: &random), at: position)
            }
        }
        return bytes
    }

    /// A key set with an RSA, an EC and an OKP key (the EC one is `issuer`'s, with kid `ec-1`).
    static func keySetJSON(_ issuer: TestIssuer) -> String {
        var ec = issuer.key.publicJWK
        ec["kid"] = .string("ec-1")
        let rsa: JSONValue = .object([
            "kty": .string("RSA"), "kid": .string("rsa-1"), "e": .string("AQAB"),
            "n": .string(Base64URL.encode([UInt8](repeating: 0xC5, count: 256))),
        ])
        let okp: JSONValue = .object([
            "kty": .string("OKP"), "crv": .string("Ed25519"), "kid": .string("ed-1"),
            "x": .string(Base64URL.encode([UInt8](repeating: 7, count: 32))),
        ])
        return JSONValue.object(["keys": .array([rsa, .object(ec), okp])]).serialized
    }

    @Test func everyOpenIDParserAnswersAValueOrATypedErrorAndNoChangedTokenValidates() throws {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["SESSIONKIT_FUZZ_INPUTS"].flatMap { Int($0) }.map { max($0, 0) } ?? 5_000
        let seed = environment["SESSIONKIT_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        print("openid fuzz: \(total) inputs, seed: \(seed)")
        var random = SplitMix64(state: seed)

        let issuer = try TestIssuer(keyID: "ec-1")
        let token = try issuer.token(issuer.claims())
        let tokenBytes = Array(token.utf8)
        let keySetBytes = Array(Self.keySetJSON(issuer).utf8)
        let keys = try JSONWebKeySet(json: keySetBytes)
        let discovery = Array(
            JSONValue.object([
                "issuer": .string(TestIssuer.issuer), "token_endpoint": .string("https://id.example/token"),
                "jwks_uri": .string("https://id.example/jwks"),
                "end_session_endpoint": .string("https://id.example/logout"),
                "id_token_signing_alg_values_supported": .array([.string("RS256")]),
            ]).serialized.utf8)
        let validator = IDTokenValidator(
            issuer: TestIssuer.issuer, clientID: TestIssuer.clientID,
            validation: IDTokenValidation(algorithms: [.es256, .rs256, .edDSA]))

        var accepted = [0, 0, 0, 0]
        var refused = [0, 0, 0, 0]
        var failures = 0
        func record(_ target: Int, _ body: () throws -> Bool) {
            do {
                if try body() { accepted[target] += 1 } else { refused[target] += 1 }
            } catch is SessionError {
                refused[target] += 1
            } catch {
                failures += 1
                Issue.record("seed \(seed), target \(target): threw \(type(of: error)), not a SessionError")
            }
        }
        for index in 0..<total where failures < 20 {
            switch index % 4 {
            case 0:
                let input = Self.mutate(tokenBytes, &random)
                record(0) {
                    _ = try CompactJWS(String(decoding: input, as: UTF8.self))
                    return true
                }
            case 1:
                let input = Self.mutate(keySetBytes, &random)
                record(1) {
                    let set = try JSONWebKeySet(json: input)
                    for algorithm in SignatureAlgorithm.allCases {
                        _ = set.select(keyID: "ec-1", algorithm: algorithm)
                        _ = set.select(keyID: nil, algorithm: algorithm)
                    }
                    return true
                }
            case 2:
                let input = Self.mutate(discovery, &random)
                record(2) {
                    _ = try OpenIDProviderMetadata(json: input, expectedIssuer: TestIssuer.issuer)
                    return true
                }
            default:
                let input = Self.mutate(tokenBytes, &random)
                let text = String(decoding: input, as: UTF8.self)
                record(3) {
                    guard
                        case .valid = try validator.validate(
                            text, keys: keys, nonce: "n-0S6_WzA2Mj", accessToken: nil, now: TestIssuer.now)
                    else { return false }
                    // Canonical base64url and a verified signature: only the token itself validates.
                    if input != tokenBytes {
                        failures += 1
                        Issue.record("seed \(seed), input #\(index): a changed token validated")
                    }
                    return true
                }
            }
        }
        if total >= 5_000 {
            for target in 0..<3 {
                #expect(accepted[target] > 0 && refused[target] > 0, "target \(target) did not both accept and refuse")
            }
            #expect(refused[3] > 0)
        }
    }
}
