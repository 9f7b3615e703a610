import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `Content-Range` of a 206 answer to a single byte range (RFC 9110 §14.4): `bytes first-last/length`.
package struct ContentRange: Sendable, Hashable {
    /// The first byte of the part, counted from 0.
    package let first: Int64
    /// The last byte of the part, inclusive.
    package let last: Int64
    /// The length of the whole representation, or `nil` when the server wrote `*`.
    package let completeLength: Int64?

    /// Parses `value`; `nil` for anything but one well-formed byte range (other units, `*/length`, a last byte
    /// before the first or past the end, numbers that overflow).
    package init?(_ value: String) {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "bytes " else { return nil }
        let spec = trimmed.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Self.number(bounds[0]), let last = Self.number(bounds[1]), first <= last
        else { return nil }
        var completeLength: Int64?
        if parts[1] != "*" {
            guard let length = Self.number(parts[1]), last < length else { return nil }
            completeLength = length
        }
        self.first = first
        self.last = last
        self.completeLength = completeLength
    }

    /// The `Content-Range` of `response`, if it has a well-formed one.
    package init?(_ response: HTTPURLResponse) {
        guard let value = response.value(forHTTPHeaderField: "Content-Range") else { return nil }
        self.init(value)
    }

    /// The bytes in the part.
    package var count: Int64 { last - first + 1 }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }
}
