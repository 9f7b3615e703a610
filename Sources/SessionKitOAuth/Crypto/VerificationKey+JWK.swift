extension VerificationKey {
    /// Reads a public key from a JSON Web Key's members (RFC 7517 §4, RFC 7518 §6, RFC 8037 §2).
    ///
    /// `kty` `RSA` needs `n` and `e`; `EC` needs `crv` (`P-256` or `P-384`), `x` and `y`; `OKP` needs `crv`
    /// `Ed25519` and `x`. Each value is canonical base64url (``Base64URL``). Members this reader does not use
    /// (`kid`, `use`, `alg`, ...) are ignored, except that a key carrying a private member (`d`, or RSA's `p`,
    /// `q`, `dp`, `dq`, `qi`, `oth`) is refused: a verification key never needs one, and a key set that publishes
    /// one has leaked it.
    ///
    /// - Parameter jwk: The JWK object's members.
    /// - Throws: ``CryptoError/malformedKey(reason:)`` when a member is missing, not a string, not base64url, or
    ///   the key fails the checks of ``rsa(modulus:exponent:)``, ``ec(curve:x:y:)`` or ``ed25519(x:)``;
    ///   ``CryptoError/unsupportedAlgorithm`` for another key type or curve (`oct`, `P-521`, `X25519`, ...).
    package init(jwk: [String: JSONValue]) throws(CryptoError) {
        guard let keyType = jwk["kty"]?.stringValue else {
            throw .malformedKey(reason: "the JWK has no string member \"kty\"")
        }
        let privateMembers = ["d", "p", "q", "dp", "dq", "qi", "oth"]
        if privateMembers.contains(where: { jwk[$0] != nil }) {
            throw .malformedKey(reason: "the JWK carries private key members")
        }
        switch keyType {
        case "RSA":
            self = try .rsa(modulus: Self.bytes("n", of: jwk), exponent: Self.bytes("e", of: jwk))
        case "EC":
            guard let curveName = jwk["crv"]?.stringValue else {
                throw .malformedKey(reason: "the EC JWK has no string member \"crv\"")
            }
            guard let curve = Curve(rawValue: curveName) else { throw .unsupportedAlgorithm }
            self = try .ec(curve: curve, x: Self.bytes("x", of: jwk), y: Self.bytes("y", of: jwk))
        case "OKP":
            guard let curveName = jwk["crv"]?.stringValue else {
                throw .malformedKey(reason: "the OKP JWK has no string member \"crv\"")
            }
            guard curveName == "Ed25519" else { throw .unsupportedAlgorithm }
            self = try .ed25519(x: Self.bytes("x", of: jwk))
        default:
            throw .unsupportedAlgorithm
        }
    }

    /// The key as a public JWK: exactly the members RFC 7638 §3.2 requires for its type.
    package var jwk: [String: JSONValue] {
        var members: [String: JSONValue] = [:]
        for (name, value) in thumbprintMembers { members[name] = .string(value) }
        return members
    }

    /// The JWK thumbprint (RFC 7638): the base64url SHA-256 of the required members, in lexicographic order,
    /// as JSON without whitespace.
    ///
    /// The members' values are base64url or fixed names, so none needs escaping.
    package var thumbprint: String {
        let canonical = "{" + thumbprintMembers.map { "\"\($0.name)\":\"\($0.value)\"" }.joined(separator: ",") + "}"
        return Base64URL.encode(PlatformCrypto.sha256(Array(canonical.utf8)))
    }

    /// The required members of the key's JWK, sorted by name (RFC 7638 §3.2, RFC 8037 §2).
    private var thumbprintMembers: [(name: String, value: String)] {
        switch material {
        case .rsa(let modulus, let exponent):
            [("e", Base64URL.encode(exponent)), ("kty", "RSA"), ("n", Base64URL.encode(modulus))]
        case .ec(let curve, let x, let y):
            [("crv", curve.rawValue), ("kty", "EC"), ("x", Base64URL.encode(x)), ("y", Base64URL.encode(y))]
        case .ed25519(let x):
            [("crv", "Ed25519"), ("kty", "OKP"), ("x", Base64URL.encode(x))]
        }
    }

    /// The bytes of the base64url member `name`.
    private static func bytes(_ name: String, of jwk: [String: JSONValue]) throws(CryptoError) -> [UInt8] {
        guard let text = jwk[name]?.stringValue else {
            throw .malformedKey(reason: "the JWK has no string member \"\(name)\"")
        }
        guard let bytes = Base64URL.decode(text) else {
            throw .malformedKey(reason: "the JWK member \"\(name)\" is not base64url")
        }
        return bytes
    }
}
