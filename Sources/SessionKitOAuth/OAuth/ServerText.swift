/// Makes text written by a server safe to place in an error message or a log line.
///
/// An authorization server's `error_description` is not a secret, but it is untrusted: it may carry control
/// characters (a forged log line after a newline), bidirectional overrides (text that reads differently than
/// it is stored) or simply be very long.
package enum ServerText {
    /// The text without control or format characters, cut to `limit` characters with an ellipsis.
    ///
    /// - Parameters:
    ///   - text: What the server sent.
    ///   - limit: The most characters kept.
    /// - Returns: The cleaned text; empty when nothing printable remains.
    package static func sanitized(_ text: String, limit: Int = OAuthLimits.maximumDescriptionLength) -> String {
        var scalars = String.UnicodeScalarView()
        var kept = 0
        var truncated = false
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                continue
            default:
                break
            }
            if kept == limit {
                truncated = true
                break
            }
            scalars.append(scalar)
            kept += 1
        }
        let cleaned = String(scalars).trimmingWhitespace()
        return truncated ? cleaned + "…" : cleaned
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    fileprivate func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}
