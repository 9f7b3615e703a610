import Foundation
import SessionKit

@testable import SessionKitCLICore

/// A console whose output, errors and input live in memory, for running the tool inside a test.
final class CapturedConsole: Sendable {
    private let outputText = Lock("")
    private let errorText = Lock("")
    private let inputLines: Lock<[String]>
    let environment: [String: String]
    let isTerminal: Bool

    init(environment: [String: String] = [:], input: [String] = [], isTerminal: Bool = false) {
        self.environment = environment
        self.inputLines = Lock(input)
        self.isTerminal = isTerminal
    }

    var output: String { outputText.withLock { $0 } }
    var errors: String { errorText.withLock { $0 } }
    /// Everything written, output and errors.
    var all: String { output + errors }

    var console: Console {
        Console(
            writeOutput: { text in self.outputText.withLock { $0 += text } },
            writeError: { text in self.errorText.withLock { $0 += text } },
            readLine: {
                self.inputLines.withLock { lines in lines.isEmpty ? nil : lines.removeFirst() }
            },
            outputIsTerminal: isTerminal,
            errorIsTerminal: isTerminal,
            environment: environment
        )
    }

    /// Runs the tool with `arguments` on this console.
    func run(_ arguments: [String]) async -> ExitCode {
        await SessionKitTool.run(arguments, console: console)
    }
}

/// Every line of `text` fits an 80-column terminal (ANSI colour codes do not count).
func fitsEightyColumns(_ text: String) -> Bool {
    let plain = text.replacingOccurrences(of: #"\u{1B}\[[0-9;]*[A-Za-z]"#, with: "", options: .regularExpression)
    return plain.split(separator: "\n", omittingEmptySubsequences: false).allSatisfy { $0.count <= 80 }
}

/// `text` with every run of white space, line breaks included, made one space: wrapped output, as one line.
func flattened(_ text: String) -> String {
    text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
}
