import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// `private_key_jwt` (RFC 7523 §2.2): every request to the authorization server carries a fresh ES256 client
/// assertion that jwcrypto (PyPI) verifies with the client's public key, for the endpoint it goes to, and nothing
/// of the key is ever printed.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct PrivateKeyJWTTests {
    typealias Support = ClientAuthenticationTests

    @Test func everyRequestCarriesAnAssertionJwcryptoVerifiesForItsEndpoint() async throws {
        guard PythonTools.available("PrivateKeyJWTTests") else { return }
        let key = try P256SigningKey()
        let authentication = try ClientAuthentication.privateKeyJWT(
            p256PrivateKey: key.storageRepresentation, keyID: "client-key-1")
        try await Support.withServer { server in
            let client = Support.client(server, authentication)
            for operation in Support.Operation.allCases {
                try await Support.perform(operation, on: client)
            }
            let requests = server.requests
            #expect(requests.count == Support.Operation.allCases.count)
            let assertions = requests.map { Support.values("client_assertion", in: $0) }
            #expect(assertions.allSatisfy { $0.count == 1 }, "one assertion per request")
            let verified = try PythonTools.verify(assertions.compactMap(\.first).map { ($0, key.publicJWK) })
            #expect(verified.count == requests.count)
            var identifiers = Set<String>()
            for (request, result) in zip(requests, verified) {
                #expect(result.valid, "jwcrypto refused the assertion sent to \(request.path)")
                #expect(result.header["alg"]?.stringValue == "ES256")
                #expect(result.header["kid"]?.stringValue == "client-key-1")
                #expect(result.claims["iss"]?.stringValue == "backend")
                #expect(result.claims["sub"]?.stringValue == "backend")
                #expect(result.claims["aud"]?.stringValue == server.url(request.path).absoluteString)
                let issuedAt = try #require(result.claims["iat"]?.numberValue)
                #expect(result.claims["exp"]?.numberValue == issuedAt + 60)
                #expect(abs(issuedAt - Date().timeIntervalSince1970) < 120)
                if let jti = result.claims["jti"]?.stringValue { identifiers.insert(jti) }
                #expect(
                    Support.values("client_assertion_type", in: request)
                        == ["urn:ietf:params:oauth:client-assertion-type:jwt-bearer"])
                #expect(Support.values("client_id", in: request) == ["backend"])
                #expect(Support.values("client_secret", in: request).isEmpty)
                #expect(request.header("Authorization") == nil)
            }
            #expect(identifiers.count == requests.count, "every assertion has its own jti")
        }
    }

    /// The assertion's times are the client's clock's (its injected clock), on every request kind: a test clock set
    /// far from the machine's is what the server reads.
    @Test func everyAssertionIsDatedByTheClientsClock() async throws {
        let key = try P256SigningKey()
        let authentication = try ClientAuthentication.privateKeyJWT(
            p256PrivateKey: key.storageRepresentation, keyID: "client-key-1")
        let clock = ManualClock(wallClock: Date(timeIntervalSince1970: 1_000_000_000))
        try await Support.withServer { server in
            let client = Support.client(server, authentication, clock: clock)
            for operation in Support.Operation.allCases {
                try await Support.perform(operation, on: client)
            }
            let assertions = server.requests.compactMap { Support.values("client_assertion", in: $0).first }
            #expect(assertions.count == Support.Operation.allCases.count)
            for assertion in assertions {
                let parts = assertion.split(separator: ".")
                let payload = try #require(parts.count == 3 ? Base64URL.decode(String(parts[1])) : nil)
                let claims = try #require(JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
                #expect(claims["iat"] as? Int == 1_000_000_000)
                #expect(claims["exp"] as? Int == 1_000_000_060)
            }
        }
    }

    @Test func anAssertionSignedByAnotherKeyIsRefusedByTheVerifier() async throws {
        // The control: the check above can fail.
        guard PythonTools.available("PrivateKeyJWTTests") else { return }
        let key = try P256SigningKey()
        let other = try P256SigningKey()
        let authentication = try ClientAuthentication.privateKeyJWT(p256PrivateKey: key.storageRepresentation)
        try await Support.withServer { server in
            try await Support.perform(.refresh, on: Support.client(server, authentication))
            let assertion = try #require(
                server.requests.first.flatMap { Support.values("client_assertion", in: $0).first })
            let verified = try PythonTools.verify([(assertion, other.publicJWK)])
            #expect(verified.first?.valid == false)
        }
    }

    @Test func badKeysAreInvalidInputAndTheKeyIsNeverPrinted() throws {
        for bytes in [[], [UInt8](repeating: 0, count: 32), [UInt8](repeating: 0xFF, count: 32), [1, 2, 3]] {
            #expect(throws: SessionError.self) { _ = try ClientAuthentication.privateKeyJWT(p256PrivateKey: bytes) }
        }
        let key = try P256SigningKey()
        let authentication = try ClientAuthentication.privateKeyJWT(p256PrivateKey: key.storageRepresentation)
        #expect(authentication.methodName == "private_key_jwt")
        let scalar = Base64URL.encode(key.storageRepresentation)
        var dumped = ""
        dump(authentication, to: &dumped)
        for text in [authentication.description, authentication.debugDescription, dumped, "\(authentication)"] {
            #expect(!text.contains(scalar))
            #expect(!text.contains(key.storageRepresentation.map { String(format: "%02x", $0) }.joined()))
        }
    }
}
