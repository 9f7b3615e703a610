import SessionKitOAuth

/// The directives of a `Cache-Control` field (RFC 9111 §5.2), parsed tolerantly.
///
/// Parsing never fails. What it does with input that is not what the grammar allows:
///
/// - **Empty list elements** (`max-age=60,,,`) are skipped, as RFC 9110 §5.6.1 asks of recipients.
/// - **An invalid value** for a directive that takes seconds (`max-age=abc`, `max-age=-1`, `max-age=`) becomes
///   the most conservative value: `0` for `max-age`, `s-maxage`, `max-stale`, `stale-while-revalidate` and
///   `stale-if-error`, the maximum for `min-fresh`. RFC 9111 §4.2.1 encourages treating invalid freshness
///   information as stale, and that is what `max-age=0` means.
/// - **A value above 2^31** (`max-age=99999999999999999999`) is clamped to 2^31 (RFC 9111 §1.2.2).
/// - **A directive given more than once** keeps its most conservative value: the smallest `max-age`, `s-maxage`,
///   `max-stale`, `stale-while-revalidate`, `stale-if-error`, and the largest `min-fresh`. RFC 9111 §4.2.1 lets
///   a cache use the first occurrence or consider the response stale; picking the most restrictive value is
///   never less safe than the first and keeps a response that repeats the same value usable.
/// - **Flags** (`no-store`, `no-cache`, `private`, …) are set by any occurrence, with or without a value;
///   an unqualified `no-cache` or `private` wins over a qualified one.
/// - **An element that is not `token [ "=" ( token / quoted-string ) ]`** (binary junk, an unterminated
///   quoted string, a space inside a name) sets ``isMalformed``; a known directive name at its start is still
///   honoured (its value counts as invalid), the rest of the element is skipped. ``ResponseCache`` stores
///   nothing whose `Cache-Control` is malformed, because it cannot tell what a `no-store` hidden in it meant.
/// - **Unknown directives** are kept in ``extensions``, up to ``maximumExtensionCount``.
package struct CacheControl: Sendable, Hashable {
    /// A directive this type does not interpret, as it appeared (name lower-cased, value unquoted).
    package struct Directive: Sendable, Hashable {
        /// The directive's name, lower-cased.
        public var name: String
        /// The directive's argument with quotes and escapes removed, or nil when it had none.
        public var value: String?

        /// Creates a directive.
        ///
        /// - Parameters:
        ///   - name: The lower-cased name.
        ///   - value: The argument, if any.
        public init(name: String, value: String? = nil) {
            self.name = name
            self.value = value
        }
    }

    /// The largest number of seconds any directive holds: 2^31 (RFC 9111 §1.2.2).
    public static let maximumDeltaSeconds = HTTPFieldSyntax.maximumDeltaSeconds
    /// How many unknown directives ``extensions`` keeps; later ones are dropped so hostile input stays small.
    public static let maximumExtensionCount = 32

    /// `max-age`: seconds a response stays fresh, or the largest age a request accepts.
    public var maxAge: Int?
    /// `s-maxage`: freshness for shared caches. Parsed for completeness; a private cache ignores it.
    public var sharedMaxAge: Int?
    /// `no-store`: nothing of the request or response may be stored.
    public var noStore = false
    /// `no-cache`, qualified or not: a stored response must be validated before each use.
    public var noCache = false
    /// The field names of a qualified `no-cache="…"`; empty when `no-cache` was unqualified.
    public var noCacheFieldNames: [String] = []
    /// `private`, qualified or not: only a private cache may store the response.
    public var isPrivate = false
    /// The field names of a qualified `private="…"`; empty when `private` was unqualified.
    public var privateFieldNames: [String] = []
    /// `public`: any cache may store the response.
    public var isPublic = false
    /// `must-revalidate`: once stale, the response must not be used without validation.
    public var mustRevalidate = false
    /// `proxy-revalidate`: `must-revalidate` for shared caches only.
    public var proxyRevalidate = false
    /// `must-understand`: store only if the status code's caching rules are understood.
    public var mustUnderstand = false
    /// `no-transform`: intermediaries must not transform the content.
    public var noTransform = false
    /// `immutable` (RFC 8246): the response will not change while fresh.
    public var immutable = false
    /// `stale-while-revalidate` (RFC 5861): seconds a stale response may be used while revalidating.
    public var staleWhileRevalidate: Int?
    /// `stale-if-error` (RFC 5861): seconds a stale response may be used when revalidation fails.
    public var staleIfError: Int?
    /// `max-stale` (request): how many seconds past expiry the client accepts; 2^31 when given without a value.
    public var maxStale: Int?
    /// `min-fresh` (request): how many seconds of freshness the client wants left.
    public var minFresh: Int?
    /// `only-if-cached` (request): answer from the cache or not at all.
    public var onlyIfCached = false
    /// Directives this type does not interpret, in order of appearance.
    public var extensions: [Directive] = []
    /// Whether some element was not valid directive syntax; see the type's discussion.
    public var isMalformed = false

    /// Creates an empty set of directives, as for a message without `Cache-Control`.
    public init() {}

    /// Parses one `Cache-Control` field value.
    ///
    /// - Parameter fieldValue: The value, such as `private, max-age=60`.
    public init(_ fieldValue: String) {
        self.init(fieldValues: [fieldValue])
    }

    /// Parses every `Cache-Control` field line of one message as one set of directives.
    ///
    /// Each line is parsed on its own, so an unterminated quoted string on one line cannot hide the
    /// directives of the next.
    ///
    /// - Parameter fieldValues: The values of the message's `Cache-Control` lines, in order.
    public init(fieldValues: some Sequence<String>) {
        for value in fieldValues {
            parse(Array(value.utf8))
        }
    }

    // MARK: - Parsing

    private mutating func parse(_ bytes: [UInt8]) {
        var index = 0
        let end = bytes.count
        while index < end {
            let byte = bytes[index]
            if byte == UInt8(ascii: ",") || HTTPFieldSyntax.isWhitespace(byte) {
                index += 1
                continue
            }
            let nameStart = index
            while index < end, HTTPFieldSyntax.isTokenByte(bytes[index]) { index += 1 }
            let name = HTTPFieldSyntax.lowercasedString(bytes[nameStart..<index])
            var value: String?
            var valid = !name.isEmpty
            while index < end, HTTPFieldSyntax.isWhitespace(bytes[index]) { index += 1 }
            if valid, index < end, bytes[index] == UInt8(ascii: "=") {
                index += 1
                while index < end, HTTPFieldSyntax.isWhitespace(bytes[index]) { index += 1 }
                if index < end, bytes[index] == UInt8(ascii: "\"") {
                    let quoted = Self.quotedString(bytes, from: index)
                    index = quoted.end
                    value = quoted.value
                    valid = quoted.value != nil
                } else {
                    let valueStart = index
                    while index < end, HTTPFieldSyntax.isTokenByte(bytes[index]) { index += 1 }
                    value = String(decoding: bytes[valueStart..<index], as: UTF8.self)
                }
                while index < end, HTTPFieldSyntax.isWhitespace(bytes[index]) { index += 1 }
            }
            if index < end, bytes[index] != UInt8(ascii: ",") {
                // Junk inside the element: skip to the next comma outside a quoted string.
                valid = false
                index = Self.endOfElement(bytes, from: index)
            }
            if !valid { isMalformed = true }
            if !name.isEmpty {
                apply(name: name, value: value, valueIsValid: valid)
            }
        }
    }

    /// Parses a quoted-string starting at the opening quote.
    /// - Returns: The unescaped value (nil if unterminated or holding a control character) and the index after it.
    private static func quotedString(_ bytes: [UInt8], from start: Int) -> (value: String?, end: Int) {
        var index = start + 1
        var content: [UInt8] = []
        var valid = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                return (valid ? String(decoding: content, as: UTF8.self) : nil, index + 1)
            }
            if byte == UInt8(ascii: "\\") {
                index += 1
                guard index < bytes.count else { break }
            }
            let escapedOrPlain = bytes[index]
            if escapedOrPlain < 0x20 && escapedOrPlain != UInt8(ascii: "\t") || escapedOrPlain == 0x7F {
                valid = false
            }
            content.append(escapedOrPlain)
            index += 1
        }
        return (nil, bytes.count)
    }

    private static func endOfElement(_ bytes: [UInt8], from start: Int) -> Int {
        var index = start
        var inQuotes = false
        while index < bytes.count {
            let byte = bytes[index]
            if inQuotes {
                if byte == UInt8(ascii: "\\") {
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    inQuotes = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inQuotes = true
            } else if byte == UInt8(ascii: ",") {
                return index
            }
            index += 1
        }
        return bytes.count
    }

    private mutating func apply(name: String, value: String?, valueIsValid: Bool) {
        func seconds(invalid: Int) -> Int {
            guard valueIsValid, let value, let seconds = HTTPFieldSyntax.deltaSeconds(Array(value.utf8)[...])
            else { return invalid }
            return seconds
        }
        func smallest(_ current: Int?, _ new: Int) -> Int { current.map { min($0, new) } ?? new }
        func fieldNames() -> [String] {
            guard valueIsValid, let value else { return [] }
            return HTTPFieldSyntax.tokenList(Array(value.utf8)[...]).tokens
        }

        switch name {
        case "max-age": maxAge = smallest(maxAge, seconds(invalid: 0))
        case "s-maxage": sharedMaxAge = smallest(sharedMaxAge, seconds(invalid: 0))
        case "stale-while-revalidate": staleWhileRevalidate = smallest(staleWhileRevalidate, seconds(invalid: 0))
        case "stale-if-error": staleIfError = smallest(staleIfError, seconds(invalid: 0))
        case "max-stale":
            let allowed = value == nil && valueIsValid ? Self.maximumDeltaSeconds : seconds(invalid: 0)
            maxStale = smallest(maxStale, allowed)
        case "min-fresh":
            let wanted = seconds(invalid: Self.maximumDeltaSeconds)
            minFresh = max(minFresh ?? wanted, wanted)
        case "no-store": noStore = true
        case "no-cache":
            let names = fieldNames()
            // An unqualified no-cache (or one whose list is unusable) is the stricter form and wins.
            if names.isEmpty || (noCache && noCacheFieldNames.isEmpty) {
                noCacheFieldNames = []
            } else {
                noCacheFieldNames += names
            }
            noCache = true
        case "private":
            let names = fieldNames()
            if names.isEmpty || (isPrivate && privateFieldNames.isEmpty) {
                privateFieldNames = []
            } else {
                privateFieldNames += names
            }
            isPrivate = true
        case "public": isPublic = true
        case "must-revalidate": mustRevalidate = true
        case "proxy-revalidate": proxyRevalidate = true
        case "must-understand": mustUnderstand = true
        case "no-transform": noTransform = true
        case "immutable": immutable = true
        case "only-if-cached": onlyIfCached = true
        default:
            if extensions.count < Self.maximumExtensionCount {
                extensions.append(Directive(name: name, value: valueIsValid ? value : nil))
            }
        }
    }
}
