import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// Helpers shared by the OAuth tests.
enum OAuthTestSupport {
    /// A fixed monotonic instant to receive responses at.
    static let instant = ContinuousClock.now
    /// A fixed wall-clock time.
    static let wall = Date(timeIntervalSince1970: 1_700_000_000)

    /// UTF-8 data of `text`.
    static func data(_ text: String) -> Data {
        Data(text.utf8)
    }

    /// The `SessionError` `body` throws, or a recorded failure.
    static func sessionError(
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) -> SessionError? {
        do {
            try body()
            Issue.record("expected a SessionError, nothing was thrown", sourceLocation: sourceLocation)
        } catch let error as SessionError {
            return error
        } catch {
            Issue.record("expected a SessionError, got \(error)", sourceLocation: sourceLocation)
        }
        return nil
    }

    /// Decodes a form body independently of SessionKit's decoder: `+` is a space, then percent-decoding.
    static func decodeForm(_ body: String) -> [(String, String)] {
        body.split(separator: "&").map { segment in
            let parts = segment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "<invalid>"
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// A compact JWS with the given header and payload JSON, encoded with SessionKit's base64url encoder.
    static func jwt(header: String = #"{"alg":"RS256","typ":"JWT"}"#, payload: String, signature: String = "c2ln")
        -> String
    {
        Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + "." + signature
    }

    /// Serializes a JSON value so that the parser reads it back as the same value.
    static func serialize(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number): return "\(number)"
        case .string(let text): return JSONValue.quoted(text)
        case .array(let elements): return "[" + elements.map(serialize).joined(separator: ",") + "]"
        case .object(let members):
            return "{" + members.map { JSONValue.quoted($0.key) + ":" + serialize($0.value) }.joined(separator: ",")
                + "}"
        }
    }
}
