import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `URLRequest.setFieldValues(_:)`, which writes a session's `Authorization` and `DPoP` fields without
/// FoundationNetworking's per-character check: a field of the same name in any case is replaced, never doubled,
/// and a value that would split the header (CR, LF, NUL) is never written.
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
        for bad in ["DPoP t\r\nX-Injected: 1", "DPoP t\nX-Injected: 1", "DPoP t\rX", "DPoP t\u{0}x"] {
            var request = Self.request(["Authorization": "Bearer old"])
            request.setFieldValues([("Authorization", bad), ("DPoP", "a.b.c")])
            let fields = request.allHTTPHeaderFields ?? [:]
            #expect(fields.values.allSatisfy { !$0.contains("\r") && !$0.contains("\n") && !$0.contains("\u{0}") })
            #expect(fields.keys.allSatisfy { $0.lowercased() != "x-injected" })
            // The old credential is gone too: a refused value leaves no field rather than a stale one.
            #expect(request.value(forHTTPHeaderField: "Authorization") == nil)
            #expect(request.value(forHTTPHeaderField: "DPoP") == "a.b.c")
        }
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
