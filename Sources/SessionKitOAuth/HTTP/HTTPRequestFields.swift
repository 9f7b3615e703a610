import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A request's header fields, read once, with case-insensitive lookup by lower-cased name.
///
/// `URLRequest.value(forHTTPHeaderField:)` searches and bridges the fields on every call on Linux; a cache lookup
/// asks for up to eight fields, so it reads the fields once and compares names itself, without allocating.
package struct HTTPRequestFields {
    private let fields: [String: String]

    package init(_ request: URLRequest) {
        fields = request.allHTTPHeaderFields ?? [:]
    }

    package var isEmpty: Bool { fields.isEmpty }

    /// The value of the field named `lowercasedName` (ASCII lower-case), or nil when the request lacks it.
    package func value(_ lowercasedName: String) -> String? {
        for (name, value) in fields where Self.name(name, equals: lowercasedName) {
            return value
        }
        return nil
    }

    package static func name(_ name: String, equals lowercasedName: String) -> Bool {
        guard name.utf8.count == lowercasedName.utf8.count else { return false }
        var other = lowercasedName.utf8.makeIterator()
        for byte in name.utf8 {
            let folded = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            guard other.next() == folded else { return false }
        }
        return other.next() == nil
    }
}

/// The one rule for what text may go into a request's head as a field's name or value.
package enum HTTPFieldText {
    /// Whether `text` can be sent as a field's name or value as it is: no line break (what `Character` calls one:
    /// U+000A to U+000D, U+0085, U+2028, U+2029), which would end the field and begin one the caller never wrote; no
    /// NUL (libcurl takes C strings, so the field would end there, a value nobody wrote); and in a name no colon.
    ///
    /// Read as UTF-8 bytes in place, never as `Character`s nor through the `utf8` view's iterator: a DPoP proof is
    /// hundreds of bytes on every request, and walking it by `Character` cost more than the whole rest of preparing
    /// its request (BENCHMARKS.md, "DPoP at 1 ms"). In valid UTF-8 (every `String`) U+0085 is always C2 85, and
    /// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
    package static func isSendable(_ text: String, isName: Bool) -> Bool {
        var native = text
        return native.withUTF8 { bytes in
            var index = 0
            while index < bytes.count {
                switch bytes[index] {
                case 0x00, 0x0A...0x0D: return false
                case UInt8(ascii: ":") where isName: return false
                case 0xC2 where index + 1 < bytes.count && bytes[index + 1] == 0x85: return false
                case 0xE2
                where index + 2 < bytes.count && bytes[index + 1] == 0x80
                    && (bytes[index + 2] == 0xA8 || bytes[index + 2] == 0xA9):
                    return false
                default: index += 1
                }
            }
            return true
        }
    }
}

extension URLRequest {
    /// Sets each field `name` to `value`, replacing any field of that name whatever its case, as
    /// `setValue(_:forHTTPHeaderField:)` does for one: the one way SessionKit writes a credential field
    /// (`Authorization`, `DPoP`) into a request.
    ///
    /// On Linux, `setValue` first checks the value one `Character` at a time for CR, LF and NUL, a string
    /// comparison each, which costs a DPoP proof (on every request) more than the rest of the request's fields
    /// together (BENCHMARKS.md, "Figures behind the code's rules"). This checks the same
    /// bytes directly (``HTTPFieldText/isSendable(_:isName:)``) and writes the fields as a whole, once. A value with
    /// a line break or NUL is not written, as `setValue` would refuse one with CR, LF or NUL, so no field can be
    /// split in two; the field it was to replace is removed all the same, so a refused credential never leaves the
    /// previous one in place.
    ///
    /// - Parameter fields: Names and values; a name is written as given (`DPoP`, not Foundation's `Dpop`; names
    ///   are case-insensitive).
    package mutating func setFieldValues(_ fields: [(name: String, value: String)]) {
        #if canImport(FoundationNetworking)
            var all = allHTTPHeaderFields ?? [:]
            for (name, value) in fields {
                let lowercasedName = name.lowercased()
                for existing in all.keys where HTTPRequestFields.name(existing, equals: lowercasedName) {
                    all.removeValue(forKey: existing)
                }
                if HTTPFieldText.isSendable(value, isName: false) { all[name] = value }
            }
            allHTTPHeaderFields = all
        #else
            for (name, value) in fields { setValue(value, forHTTPHeaderField: name) }
        #endif
    }
}
