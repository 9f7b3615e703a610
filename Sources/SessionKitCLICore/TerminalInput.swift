#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a secret typed at a terminal without showing it: echo off (termios) while the line is read.
enum TerminalInput {
    /// Whether standard input is a terminal.
    static var inputIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Prints `prompt`, reads one line from `input` with echo off, and restores the terminal.
    ///
    /// - Parameters:
    ///   - prompt: What to ask, written with `writeError`.
    ///   - input: The terminal's file descriptor.
    ///   - writeError: Writes to standard error.
    /// - Returns: The line without its line break, or `nil` at the end of input or when `input` is not a
    ///   terminal.
    static func readWithoutEcho(
        prompt: String, input: Int32 = STDIN_FILENO, writeError: (String) -> Void
    ) -> String? {
        var saved = termios()
        guard isatty(input) == 1, tcgetattr(input, &saved) == 0 else { return nil }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ECHONL)
        writeError(prompt)
        guard tcsetattr(input, TCSAFLUSH, &silent) == 0 else { return nil }
        defer { _ = tcsetattr(input, TCSAFLUSH, &saved) }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(input, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { return line.isEmpty ? nil : String(decoding: line, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }
}
