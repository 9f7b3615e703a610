import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `URLRequest.setFieldValues(_:)`, which writes a session's `Authorization` and `DPoP` fields without
/// FoundationNetworking's per-character check: a field of the same name in any case is replaced, never doubled,
/// and a value that would split the header (a line break, NUL) is never written.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RequestFieldWritingTests {
    private static func request(_ fields: [String: String]) -> URLRequest {
        var request = URLRequest(url: URL(string: "https://api.example/items")!)
        request.allHTTPHeaderFields = fields
        return request
    }

    @Test func aFieldOfTheSameNameInAnyCaseIsReplaced() {
        var request = Self.request(["authorization": "Bearer old", "dpop": "old-proof", "Accept": "application/json"])
        request.setFieldValues([("Authorization", "DPoP new"), ("DPoP", "a.b.c")])
        let fields = request.allHTTPHeaderFields ?? [:]
        #expect(fields.count == 3, "\(fields.keys.sorted())")
        #expect(fields["Authorization"] == "DPoP new")
        #expect(fields["DPoP"] == "a.b.c")
        #expect(fields["Accept"] == "application/json")
        #expect(request.value(forHTTPHeaderField: "dpop") == "a.b.c")
        request.setFieldValues([("AUTHORIZATION", "DPoP newer")])
        #expect(request.allHTTPHeaderFields?.count == 3)
        #expect(request.value(forHTTPHeaderField: "Authorization") == "DPoP newer")
    }

    @Test func aValueThatWouldSplitTheHeaderIsNeverWritten() {
        let bad = [
            "DPoP t\r\nX-Injected: 1", "DPoP t\nX-Injected: 1", "DPoP t\rX", "DPoP t\u{0}x", "DPoP t\u{0B}x",
            "DPoP t\u{0C}x", "DPoP t\u{85}x", "DPoP t\u{2028}x", "DPoP t\u{2029}x",
        ]
        for bad in bad {
            var request = Self.request(["Authorization": "Bearer old"])
            request.setFieldValues([("Authorization", bad), ("DPoP", "a.b.c")])
            let fields = request.allHTTPHeaderFields ?? [:]
            #expect(fields.values.allSatisfy { HTTPFieldText.isSendable($0, isName: false) })
            #expect(fields.keys.allSatisfy { $0.lowercased() != "x-injected" })
            // The old credential is gone too: a refused value leaves no field rather than a stale one.
            #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
            #expect(request.value(forHTTPHeaderField: "DPoP") == "a.b.c")
        }
    }

    /// The byte rule is the `Character` rule it replaced (no line break, as `Character.isNewline` says) plus NUL,
    /// and in a name no colon: compared over strings made of the bytes that begin or neighbour each line break's
    /// encoding, so that a rule off by one byte in C2 85 or E2 80 A8/A9 disagrees somewhere.
    @Test func theByteRuleIsTheCharacterRule() {
        let pieces = [
            "a", "Z", ":", " ", "\t", "\u{0}", "\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "\u{0E}", "\u{09}", "\u{85}",
            "\u{84}",
            "\u{86}", "\u{C5}", "\u{2027}", "\u{2028}", "\u{2029}", "\u{202A}", "\u{2080}", "\u{20A8}", "\u{E28}", "é",
            "😀", "\u{1028}", "\u{0142}",
        ]
        var generator = SeededGenerator(seed: 0x5E55_10)
        var refused = (names: 0, values: 0)
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                pieces.randomElement(using: &generator)!
            }.joined()
            let breaks = text.contains(where: \.isNewline) || text.unicodeScalars.contains("\u{0}")
            #expect(HTTPFieldText.isSendable(text, isName: false) == !breaks, "\(Array(text.utf8))")
            #expect(
                HTTPFieldText.isSendable(text, isName: true) == !(breaks || text.contains(":")), "\(Array(text.utf8))")
            if breaks { refused.values += 1 }
            if breaks || text.contains(":") { refused.names += 1 }
        }
        // Both answers were met often: the comparison is not of one side only.
        #expect(refused.values > 5_000 && refused.values < 15_000)
        #expect(refused.names > refused.values)
        // A string Foundation stores as other than native UTF-8 is read the same.
        let bridged = NSString(string: "a\u{2028}b") as String
        #expect(!HTTPFieldText.isSendable(bridged, isName: false))
    }

    @Test func foldedAndOrdinaryValuesAreKeptWhole() {
        var request = Self.request([:])
        let values = ["plain", "with spaces and\ttabs", "é and 😀", String(repeating: "x", count: 4096), ""]
        for value in values {
            request.setFieldValues([("X-Value", value)])
            #expect(request.value(forHTTPHeaderField: "X-Value") == value)
        }
    }
}
