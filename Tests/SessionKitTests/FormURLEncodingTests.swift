import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct FormURLEncodingTests {
    @Test func encodesEverythingButUnreservedCharacters() {
        #expect(FormURLEncoding.encode("aZ09-._~") == "aZ09-._~")
        #expect(FormURLEncoding.encode("a+b/c=d&e f%g") == "a%2Bb%2Fc%3Dd%26e+f%25g")
        #expect(FormURLEncoding.encode("é☃😀") == "%C3%A9%E2%98%83%F0%9F%98%80")
        #expect(FormURLEncoding.encode("*!'()\n") == "%2A%21%27%28%29%0A")
        #expect(FormURLEncoding.encode([("a b", "c"), ("d", "")]) == "a+b=c&d=")
    }

    @Test func decodesWhatItEncodes() throws {
        let pairs: [(name: String, value: String)] = [("token", "a+b/c=d&e f%g é☃"), ("", "="), ("x", "")]
        let decoded = try #require(FormURLEncoding.decode(FormURLEncoding.encode(pairs)))
        #expect(decoded.map(\.name) == pairs.map(\.name))
        #expect(decoded.map(\.value) == pairs.map(\.value))
    }

    @Test func decodesPlusAsSpaceAndSkipsEmptySegments() throws {
        let decoded = try #require(FormURLEncoding.decode("a=1+2&&b&c=%2B"))
        #expect(decoded.map(\.name) == ["a", "b", "c"])
        #expect(decoded.map(\.value) == ["1 2", "", "+"])
    }

    @Test(arguments: ["a=%", "a=%4", "a=%G1", "a=%C3", "%FF=1"])
    func refusesBrokenEscapesAndInvalidUTF8(text: String) {
        #expect(FormURLEncoding.decode(text) == nil)
    }
}
