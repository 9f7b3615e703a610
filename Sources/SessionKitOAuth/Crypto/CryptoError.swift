/// Why a cryptographic operation refused its input or could not run.
///
/// No reason ever contains key material, a signature or a message: reasons name the rule that was broken and
/// public sizes only, so an error can be logged.
package enum CryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key (or its JWK) is not a well-formed, acceptable key; the reason says which rule it breaks.
    case malformedKey(reason: String)
    /// The key type, curve or algorithm is one SessionKit does not support.
    case unsupportedAlgorithm
    /// The platform's cryptography failed (an allocation, its random source); the reason names the step.
    case platformFailure(reason: String)

    /// The case and its reason.
    package var description: String {
        switch self {
        case .malformedKey(let reason): "malformed key: \(reason)"
        case .unsupportedAlgorithm: "unsupported key type, curve or algorithm"
        case .platformFailure(let reason): "platform cryptography failed: \(reason)"
        }
    }
}
