import Foundation

/// Progress lines on standard error, so standard output stays the table or the JSON document.
enum BenchLog {
    /// Writes `line` and a line break to standard error.
    static func note(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// `value` rounded to `decimals` places, for progress lines.
    static func rounded(_ value: Double, _ decimals: Int = 2) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        return "\((value * scale).rounded() / scale)"
    }
}
