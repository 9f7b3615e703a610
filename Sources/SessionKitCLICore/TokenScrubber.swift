import SessionKit

/// Removes secrets from text before it is printed: each whole secret, and every run of ``minimumRun`` or more
/// consecutive characters of one (a server that echoes part of a token, or a value cut to a column width, must
/// not print a recognisable piece of it).
enum TokenScrubber {
    /// The shortest piece of a secret that is redacted on its own; shorter secrets are redacted only whole.
    static let minimumRun = 8
    /// What replaces a piece of a secret.
    static let pieceRedaction = "<redacted>"

    /// `text` without any secret or run of ``minimumRun`` characters of one.
    ///
    /// - Parameters:
    ///   - text: The text to print.
    ///   - secrets: The secrets.
    /// - Returns: The scrubbed text.
    static func scrub(_ text: String, secrets: [String]) -> String {
        let secrets = secrets.filter { !$0.isEmpty }
        guard !secrets.isEmpty else { return text }
        // Longest first, so a token that contains another is replaced whole.
        var text = secrets.sorted { $0.count > $1.count }.reduce(text) {
            $0.replacingOccurrences(of: $1, with: Redaction.redact($1))
        }
        var windows = Set<[Unicode.Scalar]>()
        for secret in secrets {
            let scalars = Array(secret.unicodeScalars)
            guard scalars.count >= minimumRun else { continue }
            for start in 0...(scalars.count - minimumRun) { windows.insert(Array(scalars[start..<start + minimumRun])) }
        }
        guard !windows.isEmpty else { return text }
        let scalars = Array(text.unicodeScalars)
        var out = String.UnicodeScalarView()
        var index = 0
        var changed = false
        while index < scalars.count {
            guard index + minimumRun <= scalars.count, windows.contains(Array(scalars[index..<index + minimumRun]))
            else {
                out.append(scalars[index])
                index += 1
                continue
            }
            // Extend over every following window that is also a piece of a secret.
            var end = index + minimumRun
            while end < scalars.count, windows.contains(Array(scalars[(end - minimumRun + 1)...end])) { end += 1 }
            out.append(contentsOf: pieceRedaction.unicodeScalars)
            changed = true
            index = end
        }
        if changed { text = String(out) }
        return text
    }
}
