import Foundation
import SessionKit

/// A DPoP proof a request carried (RFC 9449 §4.3), parsed and put through the checks that need no server state:
/// one header, the JWS format, `typ`, `alg`, the public key, the signature, `htm`, `htu` and `iat`. What needs the
/// server's state (`jti` not seen before, the nonce, `ath` and the key the token is bound to) the mock's state
/// checks under its lock. Pure: given the time, so it reads no clock.
struct MockDPoPProof: Sendable, Equatable {
    /// How far `iat` may be from the server's wall clock, either way.
    static let issuedAtLeeway: TimeInterval = 60

    var jti: String?
    var htm: String?
    var htu: String?
    var issuedAt: Date?
    var nonce: String?
    var ath: String?
    /// The RFC 7638 thumbprint of the header's key, once it is a valid public key.
    var jkt: String?
    /// The first stateless check the proof failed, `nil` when it passed them all.
    var refusal: MockAuthorizationServer.DPoPRefusal?

    /// Checks the `DPoP` header fields of a request of `method` to `targetURI`, at `now` on the server's wall clock.
    ///
    /// - Parameters:
    ///   - values: Every `DPoP` header field the request carried.
    ///   - method: The request's method, which `htm` must name.
    ///   - targetURI: The request's URL without query, which `htu` must name (after normalization).
    ///   - now: The server's wall-clock time.
    /// - Returns: The proof, or `nil` when the request carried none.
    static func check(_ values: [String], method: String, targetURI: String, now: Date) -> MockDPoPProof? {
        guard let first = values.first else { return nil }
        var proof = MockDPoPProof()
        // RFC 9449 §4.3 item 1: not more than one DPoP header field.
        guard values.count == 1 else {
            proof.refusal = .malformed
            return proof
        }
        guard let jws = try? CompactJWS(first) else {
            proof.refusal = .malformed
            return proof
        }
        let claims = jws.claims
        proof.jti = claims["jti"]?.stringValue
        proof.htm = claims["htm"]?.stringValue
        proof.htu = claims["htu"]?.stringValue
        if case .number(let seconds)? = claims["iat"] { proof.issuedAt = Date(timeIntervalSince1970: seconds) }
        proof.nonce = claims["nonce"]?.stringValue
        proof.ath = claims["ath"]?.stringValue
        proof.refusal = proof.firstFailure(of: jws, method: method, targetURI: targetURI, now: now)
        return proof
    }

    /// The checks of RFC 9449 §4.3 items 2 to 11 that need no state, in order; records the key's thumbprint once
    /// the key is read.
    private mutating func firstFailure(
        of jws: CompactJWS, method: String, targetURI: String, now: Date
    ) -> MockAuthorizationServer.DPoPRefusal? {
        guard let jti, !jti.isEmpty, htm != nil, htu != nil, issuedAt != nil else { return .malformed }
        guard jws.header["typ"]?.stringValue == "dpop+jwt" else { return .wrongType }
        // The mock, like SessionKit, signs and accepts ES256 only.
        guard jws.algorithmName == "ES256" else { return .unsupportedAlgorithm }
        guard case .object(let jwk)? = jws.header["jwk"], let key = try? VerificationKey(jwk: jwk) else {
            return .invalidKey
        }
        jkt = key.thumbprint
        guard key.isValidSignature(jws.signature, for: jws.signingInput, algorithm: .es256) else {
            return .invalidSignature
        }
        guard htm == method else { return .wrongMethod }
        guard let htu, let claimed = Self.normalized(htu), claimed == Self.normalized(targetURI) else {
            return .wrongTarget
        }
        guard let issuedAt, abs(issuedAt.timeIntervalSince(now)) <= Self.issuedAtLeeway else { return .staleIssuedAt }
        return nil
    }

    /// `uri` as `htu` is compared (RFC 9449 §4.3 item 9): without query and fragment, scheme and host in lower case,
    /// an empty path as `/`.
    static func normalized(_ uri: String) -> String? {
        guard let url = URL(string: uri), let target = DPoPProof.targetURI(of: url),
            var components = URLComponents(string: target)
        else { return nil }
        components.host = components.host?.lowercased()
        if (components.scheme, components.port) == ("http", 80)
            || (components.scheme, components.port) == ("https", 443)
        {
            components.port = nil
        }
        return components.string
    }

    /// The `ath` of `accessToken`: its SHA-256, base64url (RFC 9449 §4.2).
    static func accessTokenHash(_ accessToken: String) -> String {
        Base64URL.encode(PlatformCrypto.sha256(Array(accessToken.utf8)))
    }
}
