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

extension URLRequest {
    /// Sets each field `name` to `value`, replacing any field of that name whatever its case, as
    /// `setValue(_:forHTTPHeaderField:)` does for one: the one way SessionKit writes a credential field
    /// (`Authorization`, `DPoP`) into a request.
    ///
    /// On Linux, `setValue` first checks the value one `Character` at a time for CR, LF and NUL, a string
    /// comparison each, which costs a DPoP proof (on every request) more than the rest of the request's fields
    /// together (BENCHMARKS.md, "Figures behind the code's rules"). This checks the same
    /// bytes directly and writes the fields as a whole, once. A value with CR, LF or NUL is not written, as
    /// `setValue` would refuse it, so no field can be split in two; the field it was to replace is removed all the
    /// same, so a refused credential never leaves the previous one in place.
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
                if !value.utf8.contains(where: { $0 == 0 || $0 == 0x0A || $0 == 0x0D }) { all[name] = value }
            }
            allHTTPHeaderFields = all
        #else
            for (name, value) in fields { setValue(value, forHTTPHeaderField: name) }
        #endif
    }
}
