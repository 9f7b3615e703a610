import Foundation
import SessionKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where `sessionkit` writes and reads, and what kind of terminal is on the other end; tests capture it.
///
/// A console made with ``scrubbing(_:)`` replaces every known secret in everything written with its redacted
/// form, as a last line of defence: no code path of the tool prints a token, and if one did, the token would
/// still not reach the terminal.
struct Console: Sendable {
    /// Writes to standard output.
    var writeOutput: @Sendable (String) -> Void
    /// Writes to standard error.
    var writeError: @Sendable (String) -> Void
    /// Reads one line of standard input without its line break, `nil` at the end.
    var readLine: @Sendable () -> String?
    /// Whether standard output is a terminal.
    var outputIsTerminal: Bool
    /// Whether standard error is a terminal.
    var errorIsTerminal: Bool
    /// The process environment.
    var environment: [String: String]

    /// Colour only on a terminal, and never when `NO_COLOR` is set (https://no-color.org) or `TERM` is `dumb`.
    var usesColour: Bool {
        outputIsTerminal && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb"
    }

    /// The process's own standard streams and environment.
    static func system() -> Console {
        Console(
            writeOutput: { text in FileHandle.standardOutput.write(Data(text.utf8)) },
            writeError: { text in FileHandle.standardError.write(Data(text.utf8)) },
            readLine: { Swift.readLine(strippingNewline: true) },
            outputIsTerminal: isatty(STDOUT_FILENO) == 1,
            errorIsTerminal: isatty(STDERR_FILENO) == 1,
            environment: ProcessInfo.processInfo.environment
        )
    }

    /// This console, with every one of `secrets` in the output replaced by its redacted form.
    ///
    /// - Parameter secrets: The tokens the command read.
    /// - Returns: The scrubbing console.
    func scrubbing(_ secrets: [String]) -> Console {
        // Longest first, so a token that contains another is replaced whole.
        let secrets = secrets.filter { !$0.isEmpty }.sorted { $0.count > $1.count }
        guard !secrets.isEmpty else { return self }
        let scrub: @Sendable (String) -> String = { text in
            secrets.reduce(text) { $0.replacingOccurrences(of: $1, with: Redaction.redact($1)) }
        }
        var console = self
        let output = writeOutput
        let error = writeError
        console.writeOutput = { output(scrub($0)) }
        console.writeError = { error(scrub($0)) }
        return console
    }

    /// Writes `text` and a line break to standard output.
    func print(_ text: String = "") { writeOutput(text + "\n") }

    /// Writes `sessionkit: <message>` and a line break to standard error.
    func error(_ message: String) { writeError("sessionkit: \(message)\n") }
}
