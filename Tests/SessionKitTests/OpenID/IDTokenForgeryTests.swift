import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// ID tokens made by an implementation nobody here wrote (jwcrypto, from PyPI, through
/// `Tests/AuthorizationServer/forge_id_tokens.py`): every valid one is accepted, with RS256, PS256, ES256, ES384
/// and EdDSA signatures, and every forged or broken one is refused for the check its maker names.
@Suite(.timeLimit(.minutes(2))) struct IDTokenForgeryTests {
    struct Made {
        var keys: JSONWebKeySet
        var valid: [(name: String, token: String)]
        var forged: [(name: String, check: String, token: String)]
    }

    static func make(issuer: String, clientID: String, nonce: String, now: Int, accessToken: String) throws -> Made {
        let data = try PythonTools.run(
            "forge_id_tokens.py",
            [
                "--issuer", issuer, "--client-id", clientID, "--nonce", nonce, "--now", String(now), "--access-token",
                accessToken,
            ])
        guard case .object(let document) = try JSONParser.parse(Array(data)),
            case .object(let jwks)? = document["jwks"],
            case .array(let valid)? = document["valid"], case .array(let forged)? = document["forged"]
        else { throw SessionError(.malformedResponse, "the script printed something else") }
        return Made(
            keys: try JSONWebKeySet(json: Array(JSONValue.object(jwks).serialized.utf8)),
            valid: valid.compactMap { entry in
                guard let name = entry["name"]?.stringValue, let token = entry["token"]?.stringValue else { return nil }
                return (name, token)
            },
            forged: forged.compactMap { entry in
                guard let name = entry["name"]?.stringValue, let check = entry["check"]?.stringValue,
                    let token = entry["token"]?.stringValue
                else { return nil }
                return (name, check, token)
            })
    }

    @Test func tokensSignedByJwcryptoAreAcceptedAndEveryForgeryIsRefusedForItsCheck() throws {
        guard PythonTools.available("IDTokenForgeryTests") else { return }
        let now = 1_800_000_000
        let made = try Self.make(
            issuer: "https://id.example/o", clientID: "my-app", nonce: "n-0S6_WzA2Mj", now: now,
            accessToken: "an-access-token")
        let validator = IDTokenValidator(
            issuer: "https://id.example/o", clientID: "my-app",
            validation: IDTokenValidation(algorithms: [.rs256, .ps256, .es256, .es384, .edDSA]))
        let clock = Date(timeIntervalSince1970: TimeInterval(now))

        func outcome(_ token: String) -> String {
            do {
                switch try validator.validate(
                    token, keys: made.keys, nonce: "n-0S6_WzA2Mj", accessToken: "an-access-token", now: clock)
                {
                case .valid: return "valid"
                // The key set was just fetched: an unknown kid is refused for its key.
                case .needsKeys: return IDTokenCheck.key.description
                }
            } catch {
                #expect(!error.message.contains(token))
                return error.idTokenCheck?.description ?? "untyped \(error.code)"
            }
        }

        #expect(made.valid.count >= 5 && made.forged.count >= 15, "the script made too few tokens")
        for (name, token) in made.valid {
            #expect(outcome(token) == "valid", "valid token \(name)")
        }
        var refused = 0
        for (name, check, token) in made.forged {
            let got = outcome(token)
            #expect(got == check, "forged token \(name)")
            if got == check { refused += 1 }
        }
        print(
            "id tokens: checked: \(made.valid.count + made.forged.count), forged refused: \(refused) of "
                + "\(made.forged.count)")
    }
}
