import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct JSONParserTests {
    private func parse(_ text: String) throws(JSONParser.Failure) -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    private func refuses(_ text: String) -> Bool {
        (try? parse(text)) == nil
    }

    @Test func readsEveryKindOfValue() throws {
        let value = try parse(#" {"a": [1, -2.5, 3e2, true, false, null, "x"], "b": {}, "c": []} "#)
        #expect(
            value
                == .object([
                    "a": .array([
                        .number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null, .string("x"),
                    ]),
                    "b": .object([:]), "c": .array([]),
                ]))
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        #expect(try parse(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{8}\u{C}\n\r\t"))
        #expect(try parse(#""\u00e9\u2603\ud83d\ude00""#) == .string("é☃😀"))
        #expect(try parse(#""\u0000""#) == .string("\u{0}"))
    }

    @Test(arguments: [
        #""\ud83d""#, #""\ude00""#, #""\ud83d\u0041""#, #""\ud83dx""#, #""\x""#, #""\u12""#, #""\u12g4""#,
    ])
    func refusesBrokenEscapesAndLoneSurrogates(text: String) {
        #expect(refuses(text))
    }

    @Test func refusesInvalidUTF8AndRawControlCharacters() {
        #expect((try? JSONParser.parse([0x22, 0xC3, 0x28, 0x22])) == nil)
        #expect((try? JSONParser.parse([0x22, 0xED, 0xA0, 0x80, 0x22])) == nil)  // an encoded surrogate
        #expect(refuses("\"a\nb\""))
        #expect(refuses("\"a\u{1}b\""))
    }

    @Test(arguments: ["01", "-", "1.", ".5", "1e", "+1", "1e+", "0x10", "NaN", "Infinity", "--1", "1.2.3"])
    func refusesNumbersOutsideTheGrammar(text: String) {
        #expect(refuses(text))
    }

    @Test func refusesNumbersOutOfRangeOrTooLong() throws {
        #expect(refuses("1e400"))
        #expect(refuses("-1e400"))
        #expect(refuses(String(repeating: "1", count: OAuthLimits.maximumNumberLength + 1)))
        #expect((try? parse("0." + String(repeating: "1", count: OAuthLimits.maximumNumberLength - 2))) != nil)
        #expect(try parse("-0") == .number(0))
        #expect(try parse("1E-2") == .number(0.01))
    }

    @Test func refusesDuplicateMemberNames() {
        #expect(refuses(#"{"a": 1, "a": 1}"#))
        #expect(refuses(#"{"a": 1, "\u0061": 2}"#))
        #expect((try? parse(#"{"a": {"a": 1}}"#)) != nil)
    }

    @Test func boundsNestingDepth() {
        let depth = OAuthLimits.maximumJSONDepth
        #expect((try? parse(String(repeating: "[", count: depth) + String(repeating: "]", count: depth))) != nil)
        #expect(refuses(String(repeating: "[", count: depth + 1) + String(repeating: "]", count: depth + 1)))
        #expect(
            refuses(String(repeating: #"{"a":"#, count: depth + 1) + "1" + String(repeating: "}", count: depth + 1)))
        // Deep garbage fails at the limit instead of recursing through it.
        #expect(refuses(String(repeating: "[", count: 1_000_000)))
    }

    @Test(arguments: ["", " ", "{", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, "[1 2]", "{} {}", "tru", "nul", "{1:2}", "'a'"])
    func refusesMalformedStructure(text: String) {
        #expect(refuses(text))
    }

    @Test func skipsAByteOrderMarkAndReportsOffsetsWithoutContent() throws {
        #expect(try JSONParser.parse([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == .object([:]))
        do {
            _ = try parse(#"{"secret-value": x}"#)
            Issue.record("expected a failure")
        } catch {
            #expect(error.offset == 17)
            #expect(!error.reason.contains("secret"))
        }
    }

    @Test func serializedValuesReadBackEqual() throws {
        let value = try parse(#"{"s": "q\"\\\n\u0001é", "n": [0, -1, 1.5, 1e21, 123456789012], "o": {"t": true}}"#)
        #expect(try parse(OAuthTestSupport.serialize(value)) == value)
    }
}
