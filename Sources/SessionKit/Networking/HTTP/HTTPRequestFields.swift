import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A request's header fields, read once, with case-insensitive lookup by lower-cased name.
///
/// `URLRequest.value(forHTTPHeaderField:)` searches and bridges the fields on every call on Linux; a cache lookup
/// asks for up to eight fields, so it reads the fields once and compares names itself, without allocating.
struct HTTPRequestFields {
    private let fields: [String: String]

    init(_ request: URLRequest) {
        fields = request.allHTTPHeaderFields ?? [:]
    }

    var isEmpty: Bool { fields.isEmpty }

    /// The value of the field named `lowercasedName` (ASCII lower-case), or nil when the request lacks it.
    func value(_ lowercasedName: String) -> String? {
        for (name, value) in fields where Self.name(name, equals: lowercasedName) {
            return value
        }
        return nil
    }

    private static func name(_ name: String, equals lowercasedName: String) -> Bool {
        guard name.utf8.count == lowercasedName.utf8.count else { return false }
        var other = lowercasedName.utf8.makeIterator()
        for byte in name.utf8 {
            let folded = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            guard other.next() == folded else { return false }
        }
        return other.next() == nil
    }
}
