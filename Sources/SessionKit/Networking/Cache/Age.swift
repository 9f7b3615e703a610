import SessionKitOAuth

/// Parses the `Age` field (RFC 9111 §5.1): seconds since the response was generated or validated at the origin.
package enum Age {
    /// Parses delta-seconds, clamping values above 2^31 to 2^31 (RFC 9111 §1.2.2).
    ///
    /// - Parameter value: The field value; surrounding whitespace is ignored.
    /// - Returns: The age in seconds, or nil when the value is not a non-negative integer (a list of values, as
    ///   when two `Age` lines were combined, counts as invalid): the recipient then ignores the field.
    public static func parse(_ value: String) -> Int? {
        let bytes = Array(value.utf8)
        return HTTPFieldSyntax.deltaSeconds(HTTPFieldSyntax.trimmed(bytes[...]))
    }
}
