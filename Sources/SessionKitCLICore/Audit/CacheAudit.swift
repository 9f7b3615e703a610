import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sessionkit audit cache`: GETs a URL as two users and says whether a cache could mix their answers.
enum CacheAudit {
    /// The variables that hold the tokens when the command line gives fewer than two.
    static let defaultVariables = ["SESSIONKIT_TOKEN_A", "SESSIONKIT_TOKEN_B"]

    /// The two tokens: the command line's sources in order, then the default variables for the rest.
    ///
    /// - Parameters:
    ///   - sources: The sources given on the command line.
    ///   - console: Where the environment and standard input come from.
    /// - Returns: User A's and user B's tokens.
    /// - Throws: ``UsageError`` when a token is missing or empty, or both are the same.
    static func tokens(_ sources: [TokenSource], console: Console) throws(UsageError) -> (String, String) {
        var all = sources
        for variable in defaultVariables.dropFirst(sources.count) { all.append(.environment(variable)) }
        var tokens: [String] = []
        for (index, source) in all.prefix(2).enumerated() {
            do {
                tokens.append(
                    try source.resolve(
                        environment: console.environment, readLine: console.readLine,
                        role: "user \(index == 0 ? "A" : "B")'s token"))
            } catch {
                throw UsageError(error.message, topic: .auditCache)
            }
        }
        guard tokens[0] != tokens[1] else {
            throw UsageError("the two tokens are the same; the audit needs two different users", topic: .auditCache)
        }
        return (tokens[0], tokens[1])
    }

    /// Runs the audit and prints its report.
    ///
    /// - Parameters:
    ///   - options: The parsed options.
    ///   - tokens: User A's and user B's tokens.
    ///   - console: Where to print; it should scrub both tokens.
    /// - Returns: `.ok` when no cache could mix the users' answers, `.leak` when one could, `.failure` when the
    ///   server could not be asked.
    static func run(_ options: CacheAuditOptions, tokens: (String, String), console: Console) async -> ExitCode {
        let client = AuditHTTPClient(timeout: options.timeout)
        var answers: [HTTPExchange] = []
        for token in [tokens.0, tokens.1] {
            var request = URLRequest(url: options.url)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("*/*", forHTTPHeaderField: "Accept")
            do {
                answers.append(try await client.send(request))
            } catch {
                console.error(error.message)
                return .failure
            }
        }
        let assessment = CacheAssessment(first: answers[0], second: answers[1])
        console.print(report(url: options.url, answers: answers, assessment: assessment, colour: console.usesColour))
        return assessment.leakPossible ? .leak : .ok
    }

    /// The URL as printed: scheme, host, port and path; a query is shown as `?…` (it may carry something
    /// private).
    static func shown(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "the URL" }
        let hadQuery = components.query != nil
        components.query = nil
        components.fragment = nil
        components.user = nil
        components.password = nil
        return TextLayout.printable((components.string ?? "the URL") + (hadQuery ? "?…" : ""))
    }

    /// The printed report.
    static func report(url: URL, answers: [HTTPExchange], assessment: CacheAssessment, colour: Bool) -> String {
        var lines: [String] = []
        lines.append(TextLayout.paragraph("sessionkit audit cache: GET \(shown(url)) as users A and B"))
        lines.append("")
        func row(_ label: String, _ value: (HTTPExchange) -> String) -> String {
            row(label, answers.map(value))
        }
        func row(_ label: String, _ cells: [String]) -> String {
            let cells = cells.map { TextLayout.printable($0, limit: 29) }
            return "  " + label.padding(toLength: 17, withPad: " ", startingAt: 0)
                + cells[0].padding(toLength: 30, withPad: " ", startingAt: 0) + cells[1]
        }
        lines.append(row("", ["user A", "user B"]))
        lines.append(row("status") { "\($0.status)" })
        lines.append(row("Cache-Control") { $0.header("Cache-Control") ?? "(none)" })
        lines.append(row("Vary") { $0.header("Vary") ?? "(none)" })
        if answers.contains(where: { $0.header("Expires") != nil }) {
            lines.append(row("Expires") { $0.header("Expires") ?? "(none)" })
        }
        if answers.contains(where: { $0.header("Age") != nil }) {
            lines.append(row("Age") { $0.header("Age") ?? "(none)" })
        }
        lines.append(row("body") { "\($0.body.count) bytes" })
        lines.append("")
        lines.append(
            TextLayout.paragraph(
                assessment.bodiesDiffer
                    ? "The answers differ: this resource depends on who asks (personal data)."
                    : "Both users got the same status and body.", indent: "  "))
        lines.append("")
        for (title, reuse) in [
            ("private cache (an app's URL cache, a browser)", assessment.privateCache),
            ("shared cache (a CDN, a reverse proxy)", assessment.sharedCache),
        ] {
            let verdict =
                switch reuse {
                case .acrossUsers: TextLayout.colour("reusable across users", 33, enabled: colour)
                case .afterValidation: "reused only after asking the server"
                case .never: "not reused for the other user"
                }
            lines.append(TextLayout.paragraph("\(title): \(verdict)", indent: "  ", first: ""))
            lines.append(TextLayout.paragraph(reuse.reason, indent: "    "))
        }
        lines.append("")
        if assessment.leakPossible {
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("LEAK POSSIBLE", 31, enabled: colour)
                        + ": a cache could show user A's response to user B."))
            lines.append("Fix:")
            for fix in assessment.fixes { lines.append(TextLayout.paragraph(fix, indent: "    ", first: "  - ")) }
        } else if assessment.privateCache.isAcrossUsers || assessment.sharedCache.isAcrossUsers {
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("SAFE", 32, enabled: colour)
                        + " for these two users: a cache may reuse the answer, but they got the same one."))
        } else {
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("SAFE", 32, enabled: colour)
                        + ": no cache may answer one of these users with the other's response."))
        }
        for note in assessment.notes { lines.append(TextLayout.paragraph(note, indent: "    ", first: "note: ")) }
        return lines.joined(separator: "\n")
    }
}
