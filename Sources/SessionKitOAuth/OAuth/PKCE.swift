/// A Proof Key for Code Exchange pair (RFC 7636): a secret verifier and the `S256` challenge derived from it.
///
/// Send ``challenge`` and ``method`` with the authorization request, keep ``verifier`` in memory, and send it with
/// the code exchange: a stolen authorization code is then useless without the verifier.
///
/// - Important: ``verifier`` is a secret for the length of one sign-in. The description redacts it.
package struct PKCE: Sendable, Equatable, CustomStringConvertible {
    /// The code verifier: 43 to 128 unreserved characters (RFC 7636 §4.1).
    public let verifier: String
    /// `BASE64URL(SHA256(ASCII(verifier)))`, without padding (RFC 7636 §4.2).
    public let challenge: String
    /// The challenge method, always `S256`; SessionKit never sends `plain`.
    public let method: String

    /// Creates a pair from 32 bytes of the platform's secure random generator, a 43-character verifier with 256
    /// bits of entropy (the size RFC 7636 §7.1 recommends).
    ///
    /// Traps if the platform's generator fails, as `SystemRandomNumberGenerator` does: a guessable verifier
    /// would defeat PKCE.
    public init() {
        self.init(verifierBytes: PlatformCrypto.requiredRandomBytes(count: 32))
    }

    /// Creates a pair whose verifier is 32 bytes drawn from `generator`, base64url-encoded.
    ///
    /// Internal so that tests can be deterministic; production code uses the system generator only.
    ///
    /// - Parameter generator: The source of the verifier's bytes.
    package init(randomBytesFrom generator: inout some RandomNumberGenerator) {
        var bytes = [UInt8]()
        bytes.reserveCapacity(32)
        for _ in 0..<4 {
            let word = generator.next()
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> shift)) }
        }
        self.init(verifierBytes: bytes)
    }

    /// Creates a pair whose verifier is `verifierBytes`, base64url-encoded.
    ///
    /// - Parameter verifierBytes: 32 secret random bytes.
    private init(verifierBytes: [UInt8]) {
        let verifier = Base64URL.encode(verifierBytes)
        self.verifier = verifier
        self.challenge = PKCE.challenge(for: verifier)
        self.method = "S256"
    }

    /// Creates a pair from an existing verifier, such as one restored during an interrupted sign-in.
    ///
    /// - Parameter verifier: 43 to 128 characters of `A–Z a–z 0–9 - . _ ~`.
    /// - Throws: `SessionError(.invalidInput)` when the verifier is too short, too long or has another
    ///   character; the message never contains the verifier.
    public init(verifier: String) throws {
        let count = verifier.utf8.count
        guard (43...128).contains(count) else {
            throw SessionError(.invalidInput, "a PKCE code verifier must be 43 to 128 characters long, not \(count)")
        }
        guard verifier.utf8.allSatisfy(PKCE.isUnreserved) else {
            throw SessionError(
                .invalidInput, "a PKCE code verifier may contain only A-Z a-z 0-9 - . _ ~ (RFC 7636 §4.1)")
        }
        self.verifier = verifier
        self.challenge = PKCE.challenge(for: verifier)
        self.method = "S256"
    }

    /// The challenge and method, with the verifier redacted.
    public var description: String {
        "PKCE(verifier: \(Redaction.redact(verifier)), challenge: \(challenge), method: \(method))"
    }

    private static func challenge(for verifier: String) -> String {
        Base64URL.encode(PlatformCrypto.sha256(Array(verifier.utf8)))
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}
