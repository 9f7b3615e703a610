import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct PKCETests {
    /// RFC 7636 Appendix B: the verifier's 32 octets, its text and its S256 challenge.
    private static let rfcOctets: [UInt8] = [
        116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37, 77, 105, 214, 191,
        240, 91, 88, 5, 88, 83, 132, 141, 121,
    ]
    private static let rfcVerifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    private static let rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

    /// Yields fixed bytes as little-endian words, in the order `init(randomBytesFrom:)` consumes them.
    private struct FixedBytes: RandomNumberGenerator {
        var bytes: [UInt8]
        mutating func next() -> UInt64 {
            let word = bytes.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * $1.offset) }
            bytes.removeFirst(8)
            return word
        }
    }

    @Test func rfc7636AppendixBVerifierGivesItsChallenge() throws {
        let pkce = try PKCE(verifier: Self.rfcVerifier)
        #expect(pkce.challenge == Self.rfcChallenge)
        #expect(pkce.method == "S256")
    }

    @Test func randomBytesAreEncodedAsTheRFCDoes() {
        var generator = FixedBytes(bytes: Self.rfcOctets)
        let pkce = PKCE(randomBytesFrom: &generator)
        #expect(pkce.verifier == Self.rfcVerifier)
        #expect(pkce.challenge == Self.rfcChallenge)
    }

    @Test func generatedVerifiersAre43UnreservedCharactersAndDiffer() throws {
        let first = PKCE()
        let second = PKCE()
        #expect(first.verifier.count == 43)
        #expect(first.verifier != second.verifier)
        // A generated verifier passes the same validation a supplied one does, and gives the same challenge.
        #expect(try PKCE(verifier: first.verifier) == first)
    }

    @Test(arguments: [43, 44, 100, 128])
    func acceptsVerifierLengthsFrom43To128(length: Int) throws {
        let verifier = String(repeating: "aZ9-._~", count: 20).prefix(length)
        #expect(try PKCE(verifier: String(verifier)).verifier.count == length)
    }

    @Test(arguments: [0, 1, 42, 129, 500])
    func refusesVerifierLengthsOutside43To128(length: Int) {
        let error = OAuthTestSupport.sessionError { _ = try PKCE(verifier: String(repeating: "a", count: length)) }
        #expect(error?.code == .invalidInput)
    }

    @Test(arguments: ["+", "/", "=", " ", "é", "%", "\u{0}"])
    func refusesReservedCharactersWithoutEchoingTheVerifier(character: String) {
        let verifier = String(repeating: "S", count: 50) + character
        let error = OAuthTestSupport.sessionError { _ = try PKCE(verifier: verifier) }
        #expect(error?.code == .invalidInput)
        #expect(error?.message.contains("SSSS") == false)
    }

    @Test func descriptionRedactsTheVerifier() throws {
        let pkce = try PKCE(verifier: Self.rfcVerifier)
        #expect(!pkce.description.contains(Self.rfcVerifier))
        #expect(pkce.description.contains(Self.rfcChallenge))
    }
}
