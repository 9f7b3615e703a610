import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// Signs ID tokens for tests with a P-256 key of its own (ES256): the claim checks, one by one, without a network.
/// Tokens signed by an implementation nobody here wrote are the forgery suite's (`IDTokenForgeryTests`).
struct TestIssuer {
    static let issuer = "https://id.example"
    static let clientID = "my-app"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    let key: P256SigningKey
    let keyID: String

    init(keyID: String = "ec-1") throws {
        key = try P256SigningKey()
        self.keyID = keyID
    }

    /// The key set publishing this issuer's key.
    var keySetJSON: String {
        var jwk = key.publicJWK
        jwk["kid"] = .string(keyID)
        jwk["use"] = .string("sig")
        jwk["alg"] = .string("ES256")
        return JSONValue.object(["keys": .array([.object(jwk)])]).serialized
    }

    var keySet: JSONWebKeySet {
        get throws { try JSONWebKeySet(json: Array(keySetJSON.utf8)) }
    }

    /// Claims of a valid token at ``now``.
    func claims(nonce: String = "n-0S6_WzA2Mj") -> [String: JSONValue] {
        let now = Self.now.timeIntervalSince1970
        return [
            "iss": .string(Self.issuer), "sub": .string("alice"), "aud": .string(Self.clientID),
            "exp": .number(now + 300), "iat": .number(now), "nonce": .string(nonce), "name": .string("Alice"),
        ]
    }

    /// A compact JWS of `claims` under `header` (with `alg` ES256 and this issuer's `kid` unless given).
    func token(_ claims: [String: JSONValue], header: [String: JSONValue] = [:]) throws -> String {
        var header = header
        if header["alg"] == nil { header["alg"] = .string("ES256") }
        if header["kid"] == nil { header["kid"] = .string(keyID) }
        return try CompactJWS.signed(header: header, claims: claims, with: key)
    }
}

@Suite(.timeLimit(.minutes(1))) struct IDTokenValidatorTests {
    let validator = IDTokenValidator(
        issuer: TestIssuer.issuer, clientID: TestIssuer.clientID,
        validation: IDTokenValidation(algorithms: [.es256, .rs256]))

    func check(
        _ token: String, issuer: TestIssuer, nonce: String? = "n-0S6_WzA2Mj", accessToken: String? = nil,
        now: Date = TestIssuer.now, validator: IDTokenValidator? = nil
    ) throws -> IDTokenClaims {
        switch try (validator ?? self.validator).validate(
            token, keys: try issuer.keySet, nonce: nonce, accessToken: accessToken, now: now)
        {
        case .valid(let claims): return claims
        case .needsKeys: throw SessionError(.idTokenRejected, "needs keys", idTokenCheck: .key)
        }
    }

    /// The check a token fails, or `nil` when it is valid.
    func failedCheck(
        _ token: String, issuer: TestIssuer, nonce: String? = "n-0S6_WzA2Mj", accessToken: String? = nil,
        now: Date = TestIssuer.now, validator: IDTokenValidator? = nil
    ) -> IDTokenCheck? {
        do {
            _ = try check(token, issuer: issuer, nonce: nonce, accessToken: accessToken, now: now, validator: validator)
            return nil
        } catch let error as SessionError {
            #expect(error.code == .idTokenRejected)
            #expect(!error.message.contains(token), "the message quotes the token")
            return error.idTokenCheck
        } catch {
            Issue.record("not a SessionError: \(error)")
            return nil
        }
    }

    @Test func aValidTokenGivesItsClaimsAndAccount() throws {
        let issuer = try TestIssuer()
        let claims = try check(try issuer.token(issuer.claims()), issuer: issuer)
        #expect(claims.account == Account(issuer: TestIssuer.issuer, subject: "alice", displayName: "Alice"))
        #expect(claims.audiences == [TestIssuer.clientID])
        #expect(claims.expiresAt == TestIssuer.now.addingTimeInterval(300))
    }

    /// A refused algorithm is named in the message, cut to 16 characters and without control characters: a
    /// server's header cannot flood a log or write into it.
    @Test func aRefusedAlgorithmIsNamedCutShortAndClean() throws {
        let issuer = try TestIssuer()
        func message(_ algorithm: String) throws -> String {
            let token = try issuer.token(issuer.claims(), header: ["alg": .string(algorithm)])
            do {
                _ = try check(token, issuer: issuer)
                Issue.record("\(algorithm) was accepted")
                return ""
            } catch let error as SessionError {
                #expect(error.idTokenCheck == .algorithm)
                return error.message
            }
        }
        #expect(try message("HS256").contains(#""HS256""#))
        let long = try message("HS256\u{7}with-a-long-tail-of-text")
        #expect(long.contains(#""HS256with-a-long…""#), "16 characters kept, the bell dropped: \(long)")
        #expect(!long.contains("tail"))
    }

    /// OpenID Connect Core §2: `sub` is at most 255 ASCII characters; one of exactly 255 is an account.
    @Test func aSubjectOfTheLongestLengthAllowedIsAccepted() throws {
        let issuer = try TestIssuer()
        var claims = issuer.claims()
        let longest = String(repeating: "s", count: 255)
        claims["sub"] = .string(longest)
        #expect(try check(try issuer.token(claims), issuer: issuer).account.subject == longest)
        // One longer is refused, and the refusal says the bound, so whoever reads it knows why.
        claims["sub"] = .string(longest + "s")
        let error = #expect(throws: SessionError.self) { try check(try issuer.token(claims), issuer: issuer) }
        #expect(error?.idTokenCheck == .subject)
        #expect(error?.message.contains("1 to 255 bytes") == true, "\(String(describing: error))")
    }

    @Test func eachClaimCheckRefusesWithItsName() throws {
        let issuer = try TestIssuer()
        let now = TestIssuer.now.timeIntervalSince1970
        func with(_ changes: [String: JSONValue?]) -> [String: JSONValue] {
            var claims = issuer.claims()
            for (name, value) in changes { claims[name] = value }
            return claims
        }
        let cases: [(String, [String: JSONValue], IDTokenCheck)] = [
            ("wrong issuer", with(["iss": .string(TestIssuer.issuer + "/")]), .issuer),
            ("no issuer", with(["iss": nil]), .issuer),
            ("no subject", with(["sub": nil]), .subject),
            ("empty subject", with(["sub": .string("")]), .subject),
            ("subject not a string", with(["sub": .number(7)]), .subject),
            ("subject over 255 bytes", with(["sub": .string(String(repeating: "s", count: 256))]), .subject),
            ("other audience", with(["aud": .string("other")]), .audience),
            ("no audience", with(["aud": nil]), .audience),
            ("audience array without client", with(["aud": .array([.string("a"), .string("b")])]), .audience),
            (
                "several audiences, no azp",
                with(["aud": .array([.string(TestIssuer.clientID), .string("other")])]), .authorizedParty
            ),
            (
                "several audiences, other azp",
                with(["aud": .array([.string(TestIssuer.clientID), .string("b")]), "azp": .string("b")]),
                .authorizedParty
            ),
            ("azp another party", with(["azp": .string("other")]), .authorizedParty),
            ("expired", with(["exp": .number(now - 61)]), .expiry),
            ("no expiry", with(["exp": nil]), .expiry),
            ("expiry not a number", with(["exp": .string("\(now + 300)")]), .expiry),
            ("not yet valid", with(["nbf": .number(now + 61)]), .notBefore),
            ("issued in the future", with(["iat": .number(now + 61)]), .issuedAt),
            ("no iat", with(["iat": nil]), .issuedAt),
            ("no nonce", with(["nonce": nil]), .nonce),
            ("other nonce", with(["nonce": .string("n-0S6_WzA2Mk")]), .nonce),
            ("auth_time not a time", with(["auth_time": .string("yesterday")]), .authTime),
        ]
        for (name, claims, expected) in cases {
            #expect(failedCheck(try issuer.token(claims), issuer: issuer) == expected, "\(name)")
        }
    }

    /// The nonce is compared whole, byte for byte (OpenID Connect Core §3.1.3.7 step 11): a token carrying the sent
    /// nonce cut short, extended, empty or otherwise near it was minted for another authorization request (or
    /// forged from a guessable part of it), so it is refused — by the nonce check, not by one that happens to fail
    /// first. A comparison by prefix, containment or "empty means none" would accept some of these.
    @Test func theNonceMustBeExactlyTheOneSentNotAPrefixOrExtensionOfIt() throws {
        let issuer = try TestIssuer()
        let sent = "n-0S6_WzA2Mj"
        let near: [(String, JSONValue)] = [
            ("cut short by one character", .string(String(sent.dropLast()))),
            ("cut to its first character", .string(String(sent.prefix(1)))),
            ("its first character dropped", .string(String(sent.dropFirst()))),
            ("extended by one character", .string(sent + "x")),
            ("extended by itself", .string(sent + sent)),
            ("preceded by a character", .string("x" + sent)),
            ("followed by a space", .string(sent + " ")),
            ("empty", .string("")),
            ("in other case", .string(sent.uppercased())),
            ("not a string", .array([.string(sent)])),
        ]
        for (name, nonce) in near {
            var claims = issuer.claims()
            claims["nonce"] = nonce
            #expect(failedCheck(try issuer.token(claims), issuer: issuer, nonce: sent) == .nonce, "\(name)")
        }
        // The same claims with the nonce exactly as sent pass: the refusals above are the nonce's.
        #expect(failedCheck(try issuer.token(issuer.claims(nonce: sent)), issuer: issuer, nonce: sent) == nil)
    }

    @Test func timesAreCheckedWithTheLeewayOnBothSides() throws {
        let issuer = try TestIssuer()
        let now = TestIssuer.now.timeIntervalSince1970
        var claims = issuer.claims()
        claims["exp"] = .number(now - 59)
        claims["nbf"] = .number(now + 59)
        claims["iat"] = .number(now + 59)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer) == nil, "within the one-minute leeway")
        let strict = IDTokenValidator(
            issuer: TestIssuer.issuer, clientID: TestIssuer.clientID,
            validation: IDTokenValidation(algorithms: [.es256], leeway: .zero))
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, validator: strict) == .expiry)
    }

    @Test func severalAudiencesWithTheClientAsAuthorizedPartyAreAccepted() throws {
        let issuer = try TestIssuer()
        var claims = issuer.claims()
        claims["aud"] = .array([.string("other"), .string(TestIssuer.clientID)])
        claims["azp"] = .string(TestIssuer.clientID)
        let validated = try check(try issuer.token(claims), issuer: issuer)
        #expect(validated.authorizedParty == TestIssuer.clientID)
    }

    @Test func aMaximumAuthenticationAgeNeedsARecentAuthTime() throws {
        let issuer = try TestIssuer()
        let validator = IDTokenValidator(
            issuer: TestIssuer.issuer, clientID: TestIssuer.clientID,
            validation: IDTokenValidation(algorithms: [.es256], maximumAuthenticationAge: .seconds(600)))
        var claims = issuer.claims()
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, validator: validator) == .authTime, "missing")
        claims["auth_time"] = .number(TestIssuer.now.timeIntervalSince1970 - 700)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, validator: validator) == .authTime, "too old")
        claims["auth_time"] = .number(TestIssuer.now.timeIntervalSince1970 - 500)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, validator: validator) == nil)
        // The leeway (a minute by default) is allowed on top of the age, to the second, and not beyond.
        claims["auth_time"] = .number(TestIssuer.now.timeIntervalSince1970 - 660)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, validator: validator) == nil, "at the bound")
        claims["auth_time"] = .number(TestIssuer.now.timeIntervalSince1970 - 661)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, validator: validator) == .authTime, "past it")
    }

    @Test func atHashMustMatchTheAccessTokenWhenPresent() throws {
        let issuer = try TestIssuer()
        var claims = issuer.claims()
        // OpenID Connect Core §3.1.3.6: the left half of SHA-256 of the ASCII token, base64url.
        let expected = Base64URL.encode(PlatformCrypto.sha256(Array("access-1".utf8)).prefix(16))
        #expect(IDTokenValidator.accessTokenHash(of: "access-1", algorithm: .es256) == expected)
        claims["at_hash"] = .string(expected)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, accessToken: "access-1") == nil)
        #expect(failedCheck(try issuer.token(claims), issuer: issuer, accessToken: "access-2") == .accessTokenHash)
        #expect(IDTokenValidator.accessTokenHash(of: "access-1", algorithm: .es384).count == 32, "SHA-384 halves")
        #expect(IDTokenValidator.accessTokenHash(of: "access-1", algorithm: .edDSA).count == 43, "SHA-512 halves")
    }

    @Test func theSignatureAndKeyAreChecked() throws {
        let issuer = try TestIssuer()
        let other = try TestIssuer()  // the same kid, another key
        #expect(failedCheck(try other.token(other.claims()), issuer: issuer) == .signature)
        let valid = try issuer.token(issuer.claims())
        let parts = valid.split(separator: ".").map(String.init)
        var changed = issuer.claims()
        changed["sub"] = .string("mallory")
        let swapped =
            parts[0] + "." + Base64URL.encode(Array(JSONValue.object(changed).serialized.utf8)) + "."
            + parts[2]
        #expect(failedCheck(swapped, issuer: issuer) == .signature, "a valid signature over another payload")
        #expect(failedCheck(parts[0] + "." + parts[1] + ".", issuer: issuer) == .signature, "empty signature")
        #expect(
            failedCheck(try issuer.token(issuer.claims(), header: ["alg": .string("RS256")]), issuer: issuer) == .key)
        #expect(
            failedCheck(try issuer.token(issuer.claims(), header: ["alg": .string("none")]), issuer: issuer)
                == .algorithm)
        #expect(
            failedCheck(try issuer.token(issuer.claims(), header: ["alg": .string("HS256")]), issuer: issuer)
                == .algorithm)
        #expect(
            failedCheck(try issuer.token(issuer.claims(), header: ["alg": .string("ES384")]), issuer: issuer)
                == .algorithm, "not allowed")
        let unknown = try issuer.token(issuer.claims(), header: ["kid": .string("ec-2")])
        #expect(throws: Never.self) {
            guard
                case .needsKeys = try validator.validate(
                    unknown, keys: try issuer.keySet, nonce: "n-0S6_WzA2Mj", accessToken: nil, now: TestIssuer.now)
            else {
                Issue.record("an unknown kid asks for the keys again")
                return
            }
        }
    }

    @Test func theCompactFormIsParsedStrictly() throws {
        let issuer = try TestIssuer()
        let valid = try issuer.token(issuer.claims())
        let parts = valid.split(separator: ".").map(String.init)
        let cases: [(String, String, IDTokenCheck)] = [
            ("two parts", parts[0] + "." + parts[1], .format),
            ("four parts", valid + ".x", .format),
            ("five parts", "a.b.c.d.e", .encrypted),
            ("padded", parts[0] + "=." + parts[1] + "." + parts[2], .format),
            (
                "standard alphabet",
                parts[0].replacingOccurrences(of: "-", with: "+") + "+." + parts[1] + "." + parts[2], .format
            ),
            ("header not JSON", Base64URL.encode(Array("nope".utf8)) + "." + parts[1] + "." + parts[2], .format),
            ("header an array", Base64URL.encode(Array("[]".utf8)) + "." + parts[1] + "." + parts[2], .format),
            ("claims not JSON", parts[0] + "." + Base64URL.encode(Array("nope".utf8)) + "." + parts[2], .format),
            ("empty", "", .format),
            ("dots", "..", .format),
        ]
        for (name, token, expected) in cases {
            #expect(failedCheck(token, issuer: issuer) == expected, "\(name)")
        }
        let critical = try issuer.token(
            issuer.claims(), header: ["crit": .array([.string("exp")]), "exp": .number(1)])
        #expect(failedCheck(critical, issuer: issuer) == .critical)
        let kidNumber = try issuer.token(issuer.claims(), header: ["kid": .number(1)])
        #expect(failedCheck(kidNumber, issuer: issuer) == .format)
    }

    /// A key fits by its type first (RFC 7518 §6: `crv` is an EC or OKP member): an RSA key that carries a
    /// `"crv":"P-256"` is never chosen for ES256, and the refusal says the named key is not an ES256 signing key.
    @Test func aKeyOfAnotherTypeNeverFitsWhateverCurveItNames() throws {
        let rsa: JSONValue = .object([
            "kty": .string("RSA"), "kid": .string("k"), "crv": .string("P-256"), "e": .string("AQAB"),
            "n": .string(Base64URL.encode([UInt8](repeating: 0xC5, count: 256))),
        ])
        let set = try JSONWebKeySet(json: Array(JSONValue.object(["keys": .array([rsa])]).serialized.utf8))
        guard case .refused(let reason) = set.select(keyID: "k", algorithm: .es256) else {
            Issue.record("an RSA key was chosen to verify ES256")
            return
        }
        #expect(reason.contains("not a ES256 signing key"), "\(reason)")
        // The same key is chosen for what it is.
        guard case .key = set.select(keyID: "k", algorithm: .rs256) else {
            Issue.record("the RSA key does not fit RS256")
            return
        }
    }

    @Test func aKeySetWithoutKidsServesATokenWithoutAKidOnlyWhenOneKeyFits() throws {
        let first = try TestIssuer()
        let second = try TestIssuer()
        func set(_ issuers: [TestIssuer]) throws -> JSONWebKeySet {
            let keys = issuers.map { JSONValue.object($0.key.publicJWK) }
            return try JSONWebKeySet(json: Array(JSONValue.object(["keys": .array(keys)]).serialized.utf8))
        }
        guard case .key = try set([first]).select(keyID: nil, algorithm: .es256) else {
            Issue.record("one key fits")
            return
        }
        guard case .refused = try set([first, second]).select(keyID: nil, algorithm: .es256) else {
            Issue.record("two keys fit: ambiguous")
            return
        }
        guard case .refused = try set([first]).select(keyID: nil, algorithm: .rs256) else {
            Issue.record("an EC key does not fit RS256")
            return
        }
    }

    @Test func keysOfAnotherUseOrAlgorithmDoNotFit() throws {
        let issuer = try TestIssuer()
        for (member, value) in [("use", "enc"), ("alg", "ES384"), ("crv", "P-384")] {
            var jwk = issuer.key.publicJWK
            jwk["kid"] = .string("k")
            jwk[member] = .string(value)
            let set = try JSONWebKeySet(
                json: Array(JSONValue.object(["keys": .array([.object(jwk)])]).serialized.utf8))
            guard case .refused = set.select(keyID: "k", algorithm: .es256) else {
                Issue.record("a key with \(member) \(value) was chosen")
                continue
            }
        }
        var verifyOnly = issuer.key.publicJWK
        verifyOnly["key_ops"] = .array([.string("encrypt")])
        let set = try JSONWebKeySet(
            json: Array(JSONValue.object(["keys": .array([.object(verifyOnly)])]).serialized.utf8))
        guard case .refused = set.select(keyID: nil, algorithm: .es256) else {
            Issue.record("a key whose key_ops exclude verify was chosen")
            return
        }
    }

    @Test func malformedKeySetsAreRefusedWithATypedError() {
        for body in ["", "[]", "{}", #"{"keys":{}}"#, #"{"keys":[1]}"#, #"{"keys":[{"kid":"a"}]}"#] {
            #expect(throws: SessionError.self, "\(body)") { _ = try JSONWebKeySet(json: Array(body.utf8)) }
        }
        let many = "{\"keys\":[" + Array(repeating: #"{"kty":"EC"}"#, count: 65).joined(separator: ",") + "]}"
        #expect(throws: SessionError.self) { _ = try JSONWebKeySet(json: Array(many.utf8)) }
        // A key SessionKit cannot use is kept without a key, and the good ones still serve.
        let mixed =
            #"{"keys":[{"kty":"oct","k":"AAAA","kid":"h"},{"kty":"EC","crv":"P-256","x":"AA","y":"AA","kid":"bad"}]}"#
        let set = try? JSONWebKeySet(json: Array(mixed.utf8))
        #expect(set?.entries.count == 2)
        #expect(set?.entries.allSatisfy { $0.key == nil } == true)
    }
}
