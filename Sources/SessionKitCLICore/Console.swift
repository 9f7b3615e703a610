import Foundation
import SessionKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where `sessionkit` writes and reads, and what kind of terminal is on the other end; tests capture it.
///
/// A console made with ``scrubbing(_:)`` replaces every known secret, and every run of eight or more of its
/// characters, in everything written with a redaction, as a last line of defence: no code path of the tool prints
/// a token, and if one did, no piece of it would reach the terminal. Reports call ``scrub(_:)`` themselves before
/// cutting a server's value to a column, so a cut can never leave a piece too short to recognise.
struct Console: Sendable {
    /// Writes to standard output.
    var writeOutput: @Sendable (String) -> Void
    /// Writes to standard error.
    var writeError: @Sendable (String) -> Void
    /// Reads one line of standard input without its line break, `nil` at the end.
    var readLine: @Sendable () -> String?
    /// Reads one line from the terminal without echoing it, `nil` when standard input is not a terminal.
    var readSecretLine: @Sendable (_ prompt: String) -> String? = { _ in nil }
    /// Whether standard input is a terminal: a token read from it is then typed, and read without echo.
    var inputIsTerminal = false
    /// Whether standard output is a terminal.
    var outputIsTerminal: Bool
    /// Whether standard error is a terminal.
    var errorIsTerminal: Bool
    /// The process environment.
    var environment: [String: String]
    /// Why standard output could not be written, once a write failed; `nil` while every write succeeded.
    var outputFailure: @Sendable () -> String? = { nil }
    /// The secrets this console scrubs.
    private(set) var secrets: [String] = []

    /// Colour only on a terminal, and never when `NO_COLOR` is set to a non-empty value (https://no-color.org)
    /// or `TERM` is `dumb`.
    var usesColour: Bool {
        outputIsTerminal && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
    }

    /// The process's own standard streams and environment.
    static func system() -> Console {
        system(output: STDOUT_FILENO, error: STDERR_FILENO)
    }

    /// A console writing to the file descriptors given, reading standard input.
    ///
    /// A write that fails (a closed descriptor, a full disk, a pipe nobody reads, with `SIGPIPE` ignored) is
    /// recorded, never fatal: the tool ends with an error message and a non-zero status instead of crashing.
    ///
    /// - Parameters:
    ///   - output: Where standard output goes.
    ///   - error: Where standard error goes.
    /// - Returns: The console.
    static func system(output: Int32, error: Int32) -> Console {
        let outputWriter = DescriptorWriter(output)
        let errorWriter = DescriptorWriter(error)
        for (descriptor, writer) in [(output, outputWriter), (error, errorWriter)] where isClosed(descriptor) {
            writer.fail("it is closed")
        }
        var console = Console(
            writeOutput: { outputWriter.write($0) },
            writeError: { errorWriter.write($0) },
            readLine: { Swift.readLine(strippingNewline: true) },
            outputIsTerminal: isatty(output) == 1,
            errorIsTerminal: isatty(error) == 1,
            environment: ProcessInfo.processInfo.environment
        )
        console.readSecretLine = { prompt in
            TerminalInput.readWithoutEcho(prompt: prompt) { errorWriter.write($0) }
        }
        console.inputIsTerminal = TerminalInput.inputIsTerminal
        console.outputFailure = { outputWriter.failure }
        return console
    }

    /// Whether `descriptor` was closed when the process started.
    ///
    /// Closed now, or — on Linux — reused by the runtime: the concurrency runtime opens an eventfd before
    /// `main.swift` runs, and it takes the lowest free number, which is 1 under `sessionkit >&-`. No standard
    /// stream is ever an anonymous inode, so writing there would only corrupt the runtime's descriptor.
    static func isClosed(_ descriptor: Int32) -> Bool {
        if fcntl(descriptor, F_GETFD) == -1 { return true }
        #if os(Linux)
            var target = [UInt8](repeating: 0, count: 64)
            let length = target.withUnsafeMutableBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    readlink("/proc/self/fd/\(descriptor)", $0, buffer.count - 1)
                }
            }
            if length > 0 && String(decoding: target.prefix(length), as: UTF8.self).hasPrefix("anon_inode:") {
                return true
            }
        #endif
        return false
    }

    /// This console, with every one of `secrets` in the output replaced by its redacted form.
    ///
    /// - Parameter secrets: The tokens the command read.
    /// - Returns: The scrubbing console.
    func scrubbing(_ secrets: [String]) -> Console {
        let secrets = secrets.filter { !$0.isEmpty }
        guard !secrets.isEmpty else { return self }
        var console = self
        console.secrets = self.secrets + secrets
        let scrub: @Sendable (String) -> String = { [all = console.secrets] in TokenScrubber.scrub($0, secrets: all) }
        let output = writeOutput
        let error = writeError
        console.writeOutput = { output(scrub($0)) }
        console.writeError = { error(scrub($0)) }
        return console
    }

    /// `text` with every secret of this console, and every run of eight or more of a secret's characters, redacted.
    func scrub(_ text: String) -> String {
        TokenScrubber.scrub(text, secrets: secrets)
    }

    /// Writes `text` and a line break to standard output.
    func print(_ text: String = "") { writeOutput(text + "\n") }

    /// Reads one line of standard input for a token: without echo after `prompt` on a terminal.
    ///
    /// - Parameter role: What the token is, for the prompt ("user A's token").
    /// - Returns: The line, `nil` at the end of input.
    func readToken(role: String) -> String? {
        inputIsTerminal ? readSecretLine("\(role) (not shown): ") : readLine()
    }

    /// Writes `sessionkit: <message>` and a line break to standard error.
    func error(_ message: String) { writeError("sessionkit: \(message)\n") }
}
