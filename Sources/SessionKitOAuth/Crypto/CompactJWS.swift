/// A JSON Web Signature in compact serialization (RFC 7515 §7.1), split and decoded but not yet verified.
///
/// Parsing is strict, so that each token has one reading: exactly three parts, each unpadded base64url in its one
/// canonical spelling; a header that is a JSON object with a string `alg`; a payload that is a JSON object. Five
/// parts is a JWE, refused as ``IDTokenCheck/encrypted``. A header with `crit` is refused (``IDTokenCheck/critical``):
/// SessionKit implements no JWS extension, and RFC 7515 §4.1.11 requires refusing what is not understood. Every
/// refusal is a ``SessionError`` of code ``SessionError/Code/idTokenRejected`` whose message never quotes the token.
package struct CompactJWS: Sendable {
    /// The protected header's members.
    package let header: [String: JSONValue]
    /// The header's `alg`, as written.
    package let algorithmName: String
    /// The header's `kid`, if any.
    package let keyID: String?
    /// The payload's members: the claims.
    package let claims: [String: JSONValue]
    /// The bytes the signature covers: the first two parts and the dot between them, as ASCII.
    package let signingInput: [UInt8]
    /// The decoded signature.
    package let signature: [UInt8]

    /// Splits and decodes `token`.
    ///
    /// - Parameter token: A compact JWS, at most `OAuthLimits/maximumBodyBytes` bytes.
    /// - Throws: `SessionError(.idTokenRejected)` with check ``IDTokenCheck/format``, ``IDTokenCheck/encrypted``
    ///   or ``IDTokenCheck/critical``.
    package init(_ token: String) throws(SessionError) {
        let bytes = Array(token.utf8)
        guard bytes.count <= OAuthLimits.maximumBodyBytes else {
            throw Self.refusal(.format, "is over the \(OAuthLimits.maximumBodyBytes)-byte limit")
        }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count != 5 else {
            throw Self.refusal(.encrypted, "is encrypted (a JWE), which SessionKit does not read")
        }
        guard parts.count == 3 else { throw Self.refusal(.format, "does not have three dot-separated parts") }
        guard let headerBytes = Self.decode(parts[0]), let payloadBytes = Self.decode(parts[1]),
            let signature = Self.decode(parts[2])
        else { throw Self.refusal(.format, "has a part that is not unpadded base64url") }
        guard case .object(let header)? = try? JSONParser.parse(headerBytes) else {
            throw Self.refusal(.format, "has a header that is not a JSON object")
        }
        guard case .string(let algorithm)? = header["alg"], !algorithm.isEmpty else {
            throw Self.refusal(.format, "has no \"alg\" in its header")
        }
        if header["crit"] != nil {
            throw Self.refusal(.critical, "names critical header extensions (\"crit\") SessionKit does not implement")
        }
        let keyID: String?
        switch header["kid"] {
        case nil: keyID = nil
        case .string(let value)?: keyID = value
        case _?: throw Self.refusal(.format, "has a \"kid\" that is not a string")
        }
        guard case .object(let claims)? = try? JSONParser.parse(payloadBytes) else {
            throw Self.refusal(.format, "has claims that are not a JSON object")
        }
        self.header = header
        self.algorithmName = algorithm
        self.keyID = keyID
        self.claims = claims
        self.signingInput = Array(bytes[..<(parts[0].count + 1 + parts[1].count)])
        self.signature = signature
    }

    /// The bytes of one part, or `nil` when it is not unpadded base64url (RFC 7515 §2: padding is omitted).
    private static func decode(_ part: ArraySlice<UInt8>) -> [UInt8]? {
        guard !part.contains(UInt8(ascii: "=")) else { return nil }
        return Base64URL.decode(String(decoding: part, as: UTF8.self))
    }

    /// `claims` under `header` as a compact JWS signed ES256 with `key` (RFC 7515 §7.1, RFC 7518 §3.4), members in
    /// name order: the one way SessionKit writes a JWS (DPoP proofs, client assertions) and its test issuers do.
    ///
    /// - Parameters:
    ///   - header: The protected header; its `alg` should say ES256.
    ///   - claims: The claims.
    ///   - key: The signing key.
    /// - Returns: The compact JWS.
    /// - Throws: What signing throws.
    package static func signed(
        header: [String: JSONValue], claims: [String: JSONValue], with key: P256SigningKey
    ) throws(CryptoError) -> String {
        try signed(
            encodedHeader: Base64URL.encode(JSONValue.object(header).serializedBytes),
            serializedClaims: JSONValue.object(claims).serializedBytes, with: key)
    }

    /// The same with the header already encoded, base64url (a signer whose header never changes), and the claims
    /// already serialized as JSON (a caller that writes them directly, as a DPoP proof does).
    package static func signed(
        encodedHeader: String, serializedClaims: [UInt8], with key: P256SigningKey
    ) throws(CryptoError) -> String {
        var input = Array(encodedHeader.utf8)
        input.reserveCapacity(input.count + (serializedClaims.count * 4 + 2) / 3 + 90)
        input.append(UInt8(ascii: "."))
        Base64URL.encode(serializedClaims, appendingTo: &input)
        let signature = try key.sign(input)
        input.append(UInt8(ascii: "."))
        Base64URL.encode(signature, appendingTo: &input)
        return String(decoding: input, as: UTF8.self)
    }

    /// A refusal naming `check`; `reason` completes "the ID token …" and never contains the token.
    package static func refusal(_ check: IDTokenCheck, _ reason: String) -> SessionError {
        SessionError(.idTokenRejected, "the ID token \(reason)", idTokenCheck: check)
    }
}
