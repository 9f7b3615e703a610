/// Text for an 80-column terminal: wrapping, tables, colour, and cleaning what a server sent before printing it.
enum TextLayout {
    /// The width every line of output fits in.
    static let width = 80

    /// Splits `text` into lines of at most `width` characters, breaking at spaces; a longer word is cut.
    ///
    /// - Parameters:
    ///   - text: The text; line breaks in it are kept.
    ///   - width: The width.
    /// - Returns: The lines, at least one.
    static func wrap(_ text: String, width: Int) -> [String] {
        precondition(width > 0, "a width is positive")
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            for word in paragraph.split(separator: " ") {
                var word = Substring(word)
                while word.count > width {
                    if !line.isEmpty {
                        lines.append(line)
                        line = ""
                    }
                    lines.append(String(word.prefix(width)))
                    word = word.dropFirst(width)
                }
                if line.isEmpty {
                    line = String(word)
                } else if line.count + 1 + word.count <= width {
                    line += " " + word
                } else {
                    lines.append(line)
                    line = String(word)
                }
            }
            lines.append(line)
        }
        return lines
    }

    /// `text` wrapped to the terminal width with `indent` before every line after the first.
    ///
    /// - Parameters:
    ///   - text: The text.
    ///   - indent: The indentation of continuation lines (and the first line, if `first` is `nil`).
    ///   - first: The prefix of the first line, which counts towards its width.
    /// - Returns: The lines joined by line breaks.
    static func paragraph(_ text: String, indent: String = "", first: String? = nil) -> String {
        let lead = first ?? indent
        let lines = wrap(text, width: width - max(lead.count, indent.count))
        return lines.enumerated().map { ($0.offset == 0 ? lead : indent) + $0.element }.joined(separator: "\n")
    }

    /// A table whose cells wrap within their column.
    ///
    /// - Parameters:
    ///   - header: The column titles.
    ///   - rows: The cells, row by row.
    ///   - widths: Each column's width; the total plus two spaces between columns should be at most ``width``.
    ///   - style: Colours a cell's wrapped line (given the row, the column and the line); `nil` for none.
    /// - Returns: The table, one line per text line, ending without a line break.
    static func table(
        header: [String],
        rows: [[String]],
        widths: [Int],
        style: ((Int, Int, String) -> String)? = nil
    ) -> String {
        var out: [String] = []
        func emit(_ cells: [[String]], row: Int?) {
            let height = cells.map(\.count).max() ?? 0
            for lineIndex in 0..<height {
                var line = ""
                for (column, lines) in cells.enumerated() {
                    let text = lineIndex < lines.count ? lines[lineIndex] : ""
                    // Padding is measured on the plain text: colour codes take no columns.
                    let padding = String(repeating: " ", count: max(0, widths[column] - text.count) + 2)
                    let shown = row.flatMap { row in style.map { $0(row, column, text) } } ?? text
                    line += shown + (column < cells.count - 1 ? padding : "")
                }
                out.append(trimmingTrailingSpaces(line))
            }
        }
        emit(zip(header, widths).map { [$0.0] }, row: nil)
        out.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        for (index, row) in rows.enumerated() {
            emit(zip(row, widths).map { wrap($0.0, width: $0.1) }, row: index)
        }
        return out.joined(separator: "\n")
    }

    /// `text` in an ANSI colour when `enabled`.
    ///
    /// - Parameters:
    ///   - text: The text.
    ///   - colour: The SGR colour code: 31 red, 32 green, 33 yellow, 1 bold.
    ///   - enabled: Whether to colour at all.
    /// - Returns: The text, coloured or not.
    static func colour(_ text: String, _ colour: Int, enabled: Bool) -> String {
        enabled ? "\u{1B}[\(colour)m\(text)\u{1B}[0m" : text
    }

    /// What a server sent, safe to print: control characters (a terminal escape sequence could rewrite the
    /// screen) become `?`, and a value longer than `limit` is cut with an ellipsis.
    ///
    /// - Parameters:
    ///   - text: Untrusted text.
    ///   - limit: The longest result.
    /// - Returns: The printable text.
    static func printable(_ text: String, limit: Int = 200) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format
                        ? "?" : scalar
                }))
        return cleaned.count > limit ? String(cleaned.prefix(limit - 1)) + "…" : cleaned
    }

    private static func trimmingTrailingSpaces(_ line: String) -> String {
        var line = line
        while line.last == " " { line.removeLast() }
        return line
    }
}
