/// A provider's signing keys, as its `jwks_uri` publishes them (RFC 7517 §5), and the choice of the one that
/// verifies a given token.
///
/// Keys SessionKit cannot use (another `kty`, an encryption key, a malformed one) are kept as entries without a
/// key, so that a key set mixing them with good ones still serves the good ones, and a token naming one of them is
/// refused for its key (``IDTokenCheck/key``) rather than sent to fetch the set again.
package struct JSONWebKeySet: Sendable {
    /// One member of `keys`.
    package struct Entry: Sendable {
        /// `kid`, if any.
        package var keyID: String?
        /// `kty`.
        package var keyType: String
        /// `crv`, for EC and OKP keys.
        package var curve: String?
        /// `use`, if any.
        package var use: String?
        /// `alg`, if any.
        package var algorithm: String?
        /// `key_ops`, if any.
        package var operations: [String]?
        /// The public key, or `nil` when it is of a type SessionKit does not verify with, or malformed.
        package var key: VerificationKey?
    }

    /// How a token's key was chosen.
    package enum Selection: Sendable {
        /// The key to verify with.
        case key(VerificationKey)
        /// No key has the token's `kid`: the provider may have rotated its keys since the set was fetched.
        case unknownKeyID
        /// No key fits, for the reason given (without key material).
        case refused(String)
    }

    /// The most keys read from one set; a provider publishes a handful.
    package static let maximumKeys = 64

    /// The members of `keys`, in order.
    package let entries: [Entry]

    /// Reads a key set document.
    ///
    /// - Parameter body: The JSON document.
    /// - Throws: `SessionError(.providerMetadataRejected)` when it is not a JSON object with a `keys` array of
    ///   objects, or has more than ``maximumKeys`` keys.
    package init(json body: [UInt8]) throws(SessionError) {
        guard case .object(let document)? = try? JSONParser.parse(body),
            case .array(let members)? = document["keys"]
        else { throw SessionError(.providerMetadataRejected, "the key set is not a JSON object with a \"keys\" array") }
        guard members.count <= Self.maximumKeys else {
            throw SessionError(
                .providerMetadataRejected, "the key set has \(members.count) keys, over \(Self.maximumKeys)")
        }
        var entries: [Entry] = []
        for member in members {
            guard case .object(let jwk) = member, case .string(let keyType)? = jwk["kty"] else {
                throw SessionError(
                    .providerMetadataRejected, "the key set has a key that is not an object with \"kty\"")
            }
            let operations: [String]? =
                if case .array(let values)? = jwk["key_ops"] { values.compactMap(\.stringValue) } else { nil }
            entries.append(
                Entry(
                    keyID: jwk["kid"]?.stringValue, keyType: keyType, curve: jwk["crv"]?.stringValue,
                    use: jwk["use"]?.stringValue, algorithm: jwk["alg"]?.stringValue, operations: operations,
                    key: try? VerificationKey(jwk: jwk)))
        }
        self.entries = entries
    }

    /// The key that verifies a token whose header names `keyID` and `algorithm`.
    ///
    /// A key fits when its `kty` (and `crv`) is the algorithm's, its `use` is absent or `sig`, its `key_ops` are
    /// absent or include `verify`, and its `alg` is absent or the token's (RFC 7517 §4.2–4.4; RFC 8725 §3.1: a key
    /// is used with one algorithm). With a `kid`, only keys of that `kid` are considered; without one, the set must
    /// hold that one key only (OpenID Connect Core §10.1).
    ///
    /// - Parameters:
    ///   - keyID: The header's `kid`.
    ///   - algorithm: The header's `alg`, already on the allow-list.
    /// - Returns: The choice.
    package func select(keyID: String?, algorithm: SignatureAlgorithm) -> Selection {
        // OpenID Connect Core §10.1: with several keys in the set, the token must say which one by its kid.
        guard keyID != nil || entries.count == 1 else {
            return .refused("names no \"kid\" and the provider's set has \(entries.count) keys")
        }
        let named = keyID.map { id in entries.filter { $0.keyID == id } } ?? entries
        if keyID != nil, named.isEmpty { return .unknownKeyID }
        let fitting = named.filter { Self.fits($0, algorithm) }
        guard let chosen = fitting.first(where: { $0.key != nil }) ?? fitting.first else {
            return .refused(
                keyID == nil
                    ? "no key of the provider's set fits \(algorithm.rawValue)"
                    : "the key its \"kid\" names is not a \(algorithm.rawValue) signing key")
        }
        guard let key = chosen.key else { return .refused("names a key that is malformed or unusable") }
        return .key(key)
    }

    /// Whether `entry` is a signing key of `algorithm`'s type, use and algorithm.
    package static func fits(_ entry: Entry, _ algorithm: SignatureAlgorithm) -> Bool {
        let (keyType, curve) = requiredKeyType(algorithm)
        guard entry.keyType == keyType, curve == nil || entry.curve == curve else { return false }
        guard entry.use == nil || entry.use == "sig" else { return false }
        guard entry.operations?.contains("verify") ?? true else { return false }
        return entry.algorithm == nil || entry.algorithm == algorithm.rawValue
    }

    /// The `kty` (and `crv`) of the keys `algorithm` signs with (RFC 7518 §3.1, RFC 8037 §3.1).
    package static func requiredKeyType(_ algorithm: SignatureAlgorithm) -> (keyType: String, curve: String?) {
        switch algorithm.rawValue {
        case "ES256": ("EC", "P-256")
        case "ES384": ("EC", "P-384")
        case "EdDSA": ("OKP", "Ed25519")
        default: ("RSA", nil)
        }
    }
}
