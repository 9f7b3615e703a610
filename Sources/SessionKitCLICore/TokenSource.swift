import Foundation
import SessionKit

/// Where a token given to `sessionkit audit` comes from: the command line, standard input or the environment.
///
/// - Important: The description never contains the token.
enum TokenSource: Sendable, Equatable, CustomStringConvertible {
    /// The value was on the command line (visible to other users in `ps`; prefer the other two).
    case literal(String)
    /// `-`: one line read from standard input.
    case standardInput
    /// The value of an environment variable.
    case environment(String)

    /// Which source, with a literal value redacted.
    var description: String {
        switch self {
        case .literal(let value): "command line (\(Redaction.redact(value)))"
        case .standardInput: "standard input"
        case .environment(let name): "environment variable \(name)"
        }
    }

    /// Reads the token.
    ///
    /// - Parameters:
    ///   - environment: The process environment.
    ///   - readLine: Reads one line from standard input, `nil` at end of input.
    ///   - role: What the token is, for the error message ("user A's token").
    /// - Returns: The token, surrounding whitespace removed.
    /// - Throws: ``UsageError`` when the source is empty or missing; the message never contains a token.
    func resolve(environment: [String: String], readLine: () -> String?, role: String) throws(UsageError) -> String {
        let value: String?
        switch self {
        case .literal(let literal): value = literal
        case .standardInput: value = readLine()
        case .environment(let name): value = environment[name]
        }
        let token = value?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard !token.isEmpty else {
            switch self {
            case .literal: throw UsageError("\(role) is empty")
            case .standardInput: throw UsageError("\(role): standard input ended before a line with a token")
            case .environment(let name): throw UsageError("\(role): environment variable \(name) is not set or empty")
            }
        }
        guard !token.contains(where: { $0.isNewline || $0 == " " }) else {
            throw UsageError("\(role) contains a space or a line break; a bearer token has none")
        }
        return token
    }
}
