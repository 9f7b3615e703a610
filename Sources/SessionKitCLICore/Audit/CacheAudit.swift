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
                let role = "user \(index == 0 ? "A" : "B")'s token"
                tokens.append(
                    try source.resolve(
                        environment: console.environment, readLine: { console.readToken(role: role) }, role: role))
            } catch {
                throw UsageError(error.message, topic: .auditCache)
            }
        }
        guard tokens[0] != tokens[1] else {
            throw UsageError("the two tokens are the same; the audit needs two different users", topic: .auditCache)
        }
        return (tokens[0], tokens[1])
    }

    /// The query parameter that makes a control request's URL one no cache holds.
    static let controlParameter = "sessionkit-audit-control"

    /// Runs the audit and prints its report.
    ///
    /// Fetches the URL as A, then as B, then as B and as A with the origin forced (a unique query and `no-cache`),
    /// and compares: see ``CacheAssessment``.
    ///
    /// - Parameters:
    ///   - options: The parsed options.
    ///   - tokens: User A's and user B's tokens.
    ///   - console: Where to print; it should scrub both tokens.
    /// - Returns: `.leak` when a cache served one user's answer to the other, or could; `.ok` when none could;
    ///   `.failure` when the server could not be asked, an answer was not a 2xx, or the audit could not tell.
    static func run(_ options: CacheAuditOptions, tokens: (String, String), console: Console) async -> ExitCode {
        let client = AuditHTTPClient(timeout: options.timeout)
        func request(_ token: String, control: Bool, query: Bool) -> URLRequest {
            var url = options.url
            if control && query, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
                components.queryItems =
                    (components.queryItems ?? []) + [URLQueryItem(name: controlParameter, value: UUID().uuidString)]
                url = components.url ?? url
            }
            var request = URLRequest(url: url)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("*/*", forHTTPHeaderField: "Accept")
            if control {
                request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
                request.setValue("no-cache", forHTTPHeaderField: "Pragma")
            }
            return request
        }
        /// The origin's own answer for `token`: a success, or a refusal of the token (which is an answer about
        /// it too); `nil` when every way of asking it was answered otherwise, or from a cache.
        func origin(_ token: String) async throws(AuditFailure) -> HTTPExchange? {
            for query in [true, false] {
                let answer = try await client.send(request(token, control: true, query: query))
                let answersForTheToken = (200..<300).contains(answer.status) || [401, 403].contains(answer.status)
                if answersForTheToken && !answer.looksLikeCacheHit { return answer }
            }
            return nil
        }
        do {
            let first = try await client.send(request(tokens.0, control: false, query: false))
            let second = try await client.send(request(tokens.1, control: false, query: false))
            if let problem = refusal(first, user: "A") ?? refusal(second, user: "B") {
                if options.json {
                    console.print(json(url: options.url, answers: [first, second], problem: problem, console: console))
                } else {
                    console.print(table(url: options.url, answers: [first, second], console: console))
                    console.print()
                    console.print(
                        TextLayout.paragraph(
                            TextLayout.colour("INCONCLUSIVE", 33, enabled: console.usesColour) + ": " + problem))
                }
                return .failure
            }
            let originSecond = try await origin(tokens.1)
            let originFirst = try await origin(tokens.0)
            let assessment = CacheAssessment(
                first: first, second: second, originFirst: originFirst, originSecond: originSecond)
            if options.json {
                console.print(
                    json(
                        url: options.url, answers: [first, second], origin: [originFirst, originSecond],
                        assessment: assessment, console: console))
            } else {
                console.print(
                    report(
                        url: options.url, answers: [first, second], origin: [originFirst, originSecond],
                        assessment: assessment, console: console))
            }
            return assessment.verdict.exitCode
        } catch {
            console.error(error.message)
            if options.json {
                console.print(json(url: options.url, answers: [], problem: error.message, console: console))
            }
            return .failure
        }
    }

    /// Why `answer` cannot count as the user's answer (only a 2xx does), or `nil` when it is one.
    static func refusal(_ answer: HTTPExchange, user: String) -> String? {
        let status = answer.status
        switch status {
        case 200..<300:
            return nil
        case 401, 403:
            return "user \(user)'s token was refused (\(status)): the audit needs two live tokens of two different "
                + "users (check --token / --token-env)"
        case 404, 410:
            return "the resource was not found for user \(user) (\(status)): check --url"
        case 300..<400:
            let location = answer.header("Location").flatMap { URL(string: $0, relativeTo: nil) }.map(shown) ?? "?"
            return "user \(user) was redirected (\(status)) to \(location): a login page? The token may not be "
                + "accepted there, or --url is a web page rather than the API; redirects are not followed"
        case 500..<600:
            return "the server failed for user \(user) (\(status)): nothing can be read from an error"
        default:
            return "user \(user) got \(status), not a success: only 2xx answers for both users count"
        }
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

    /// The table of the two users' answers: status, caching fields, cache hints, body size.
    static func table(url: URL, answers: [HTTPExchange], console: Console) -> String {
        var lines: [String] = []
        lines.append(TextLayout.paragraph("sessionkit audit cache: GET \(shown(url)) as users A and B"))
        lines.append("")
        func row(_ label: String, _ cells: [String]) -> String {
            // Scrubbed before it is cut: a cut token would no longer be recognised.
            let cells = cells.map { TextLayout.printable(console.scrub($0), limit: 29) }
            return "  " + label.padding(toLength: 17, withPad: " ", startingAt: 0)
                + cells[0].padding(toLength: 30, withPad: " ", startingAt: 0) + cells[1]
        }
        func row(_ label: String, _ value: (HTTPExchange) -> String) -> String { row(label, answers.map(value)) }
        lines.append(row("", ["user A", "user B"]))
        lines.append(row("status") { "\($0.status)" })
        lines.append(row("Cache-Control") { $0.header("Cache-Control") ?? "(none)" })
        lines.append(row("Vary") { $0.header("Vary") ?? "(none)" })
        for field in ["Expires", "Set-Cookie", "X-Accel-Expires", "CDN-Cache-Control", "Surrogate-Control"]
            + HTTPExchange.cacheHintFields
        where answers.contains(where: { $0.header(field) != nil }) {
            lines.append(row(field) { $0.header(field) ?? "(none)" })
        }
        lines.append(row("body") { "\($0.body.count) bytes" })
        return lines.joined(separator: "\n")
    }

    /// The printed report.
    static func report(
        url: URL, answers: [HTTPExchange], origin: [HTTPExchange?], assessment: CacheAssessment, console: Console
    ) -> String {
        let colour = console.usesColour
        var lines = [table(url: url, answers: answers, console: console), ""]
        let observed: String
        if let evidence = assessment.leakEvidence {
            observed = TextLayout.colour("LEAKING NOW", 31, enabled: colour) + ": " + evidence + "."
        } else if origin.contains(where: { $0 == nil }) {
            observed =
                "Observed: the origin could not be asked apart from the caches, so a leak happening now "
                + "cannot be ruled out."
        } else {
            observed =
                "Observed: no cache answered one user with the other's response (each user's answer matches what "
                + "the origin gives that user, or the users differ)."
        }
        lines.append(TextLayout.paragraph(observed, indent: "  ", first: "  "))
        let personal =
            switch assessment.personal {
            case true?: "The origin answers the two users differently: this resource is personal."
            case false?: "The origin gives both users the same status and body."
            case nil: "Both users got the same answer; whether the origin would too is unknown."
            }
        lines.append(TextLayout.paragraph(personal, indent: "  ", first: "  "))
        lines.append("")
        lines.append("  Could a cache reuse one user's answer for the other (from the headers)?")
        for (title, reuse) in [("private cache (an app's URL cache, a browser)", assessment.privateCache)]
            + assessment.sharedCaches.map({ ($0.cache, $0.reuse) })
        {
            let verdict =
                switch reuse {
                case .acrossUsers: TextLayout.colour("reusable across users", 33, enabled: colour)
                case .afterValidation: "reused only after asking the server"
                case .never: "not reused for the other user"
                }
            lines.append(TextLayout.paragraph("\(title): \(verdict)", indent: "    ", first: "  - "))
            lines.append(TextLayout.paragraph(console.scrub(reuse.reason), indent: "      "))
        }
        lines.append("")
        switch assessment.verdict {
        case .leakingNow:
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("LEAK", 31, enabled: colour)
                        + ": a cache in front of this server is serving one user's response to another right now."))
        case .couldLeak:
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("LEAK POSSIBLE", 31, enabled: colour)
                        + ": a cache could show user A's response to user B."))
        case .safe:
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("SAFE", 32, enabled: colour)
                        + ": no cache may answer one of these users with the other's response."))
        case .sameForBoth:
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("SAFE", 32, enabled: colour)
                        + " for these two users: the origin gives both the same answer."))
        case .unobservable:
            lines.append(
                TextLayout.paragraph(
                    TextLayout.colour("INCONCLUSIVE", 33, enabled: colour)
                        + ": both users got the same answer and the origin could not be asked apart from the "
                        + "caches, so a cache serving A's answer to B looks the same as a resource that is the "
                        + "same for everyone."))
        }
        if !assessment.fixes.isEmpty {
            lines.append("Fix:")
            for fix in assessment.fixes { lines.append(TextLayout.paragraph(fix, indent: "    ", first: "  - ")) }
        }
        for note in assessment.notes { lines.append(TextLayout.paragraph(note, indent: "      ", first: "note: ")) }
        return lines.joined(separator: "\n")
    }

    /// One answer as JSON.
    private static func answerJSON(_ answer: HTTPExchange, console: Console) -> [String: Any] {
        var headers: [String: String] = [:]
        for field in [
            "Cache-Control", "Vary", "Expires", "Set-Cookie", "X-Accel-Expires", "CDN-Cache-Control",
            "Surrogate-Control",
        ] + HTTPExchange.cacheHintFields {
            if let value = answer.header(field) { headers[field] = TextLayout.printable(console.scrub(value)) }
        }
        return [
            "status": answer.status, "headers": headers, "bodyBytes": answer.body.count,
            "cacheHit": answer.looksLikeCacheHit,
        ]
    }

    /// The report as JSON (the schema is in `sessionkit help audit cache`).
    static func json(
        url: URL, answers: [HTTPExchange], origin: [HTTPExchange?] = [], assessment: CacheAssessment? = nil,
        problem: String? = nil, console: Console
    ) -> String {
        var object: [String: Any] = ["audit": "cache", "url": shown(url)]
        if answers.count == 2 {
            object["answers"] = [
                "A": answerJSON(answers[0], console: console), "B": answerJSON(answers[1], console: console),
            ]
        }
        if let problem {
            object["verdict"] = "inconclusive"
            object["exitCode"] = ExitCode.failure.rawValue
            object["reason"] = problem
        }
        if let assessment {
            object["verdict"] = assessment.verdict.rawValue
            object["exitCode"] = assessment.verdict.exitCode.rawValue
            object["leakingNow"] = assessment.leakingNow
            object["leakEvidence"] = assessment.leakEvidence ?? NSNull()
            object["couldLeak"] = assessment.leakPossible
            object["personal"] = assessment.personal.map { $0 as Any } ?? NSNull()
            object["originAnswers"] = [
                "A": origin.first.flatMap { $0 }.map { answerJSON($0, console: console) as Any } ?? NSNull(),
                "B": origin.last.flatMap { $0 }.map { answerJSON($0, console: console) as Any } ?? NSNull(),
            ]
            object["caches"] =
                [
                    [
                        "cache": "private cache", "reuse": assessment.privateCache.name,
                        "reason": assessment.privateCache.reason,
                    ]
                ]
                + assessment.sharedCaches.map {
                    ["cache": $0.cache, "reuse": $0.reuse.name, "reason": $0.reuse.reason]
                }
            object["fixes"] = assessment.fixes
            object["notes"] = assessment.notes
        }
        return JSONText.encode(object)
    }
}
