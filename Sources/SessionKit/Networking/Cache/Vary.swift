import SessionKitOAuth

/// The `Vary` field of a response (RFC 9110 §12.5.5): which request fields selected it.
///
/// Parsing is linear in the input and never fails: names are lower-cased (field names compare
/// case-insensitively) and de-duplicated, keeping first-seen order. Very long lists parse fine;
/// ``ResponseCache`` refuses to store a response that varies on more than
/// ``ResponseCache/maximumVaryFieldCount`` fields, which bounds the work of every later lookup.
package struct Vary: Sendable, Hashable {
    /// The distinct field names, lower-cased, in the order they first appeared; never contains `*`.
    public var fieldNames: [String]
    /// Whether the list contains `*`: the response varies on something outside the request and never matches.
    public var isWildcard: Bool
    /// Whether some list element was neither a field name nor `*`.
    public var isMalformed: Bool

    /// Parses one `Vary` field value, such as `Accept-Encoding, Authorization`.
    ///
    /// - Parameter fieldValue: The value.
    public init(_ fieldValue: String) {
        self.init(fieldValues: [fieldValue])
    }

    /// Parses every `Vary` field line of one response as one list.
    ///
    /// - Parameter fieldValues: The values of the response's `Vary` lines; none means the response does not vary.
    public init(fieldValues: some Sequence<String>) {
        var names: [String] = []
        var seen: Set<String> = []
        var wildcard = false
        var malformed = false
        for value in fieldValues {
            let list = HTTPFieldSyntax.tokenList(Array(value.utf8)[...])
            malformed = malformed || list.malformed
            for name in list.tokens {
                if name == "*" {
                    wildcard = true
                } else if seen.insert(name).inserted {
                    names.append(name)
                }
            }
        }
        self.fieldNames = names
        self.isWildcard = wildcard
        self.isMalformed = malformed
    }
}
