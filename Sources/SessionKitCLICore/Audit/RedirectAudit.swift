import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sessionkit audit redirects`: does an API redirect a bearer request to another origin?
///
/// GETs the URL with `Authorization: Bearer` through ``AuditHTTPClient``, which follows no redirect, and walks the
/// chain by hand (``RedirectChain``): the token goes only to hops on the URL's own origin, before the chain leaves
/// it, so the audit never hands it to the origin it warns about. A client that copies a request's headers to every
/// hop would.
enum RedirectAudit {
    /// The variable that holds the token when the command line gives none.
    static let defaultVariable = "SESSIONKIT_TOKEN"

    /// The token, from the command line's source or ``defaultVariable``.
    ///
    /// - Parameters:
    ///   - options: The parsed options.
    ///   - console: Where the environment and standard input come from.
    /// - Returns: The token.
    /// - Throws: ``UsageError`` when it is missing or empty.
    static func token(_ options: RedirectAuditOptions, console: Console) throws(UsageError) -> String {
        let role = "the token"
        do {
            return try (options.token ?? .environment(defaultVariable)).resolve(
                environment: console.environment, readLine: { console.readToken(role: role) }, role: role)
        } catch {
            throw UsageError(error.message, topic: .auditRedirects)
        }
    }

    /// Runs the audit and prints its report.
    ///
    /// - Parameters:
    ///   - options: The parsed options.
    ///   - token: The bearer token.
    ///   - console: Where to print; it should scrub the token.
    /// - Returns: `.leak` when a redirect points to another origin or from https to http; `.ok` when the answer
    ///   comes from the URL's own origin; `.failure` when the chain ended without showing either.
    static func run(_ options: RedirectAuditOptions, token: String, console: Console) async -> ExitCode {
        guard let chain = await walk(options.url, token: token, timeout: options.timeout) else {
            // The parser accepts only http(s) URLs with a host, which always have an origin.
            console.error("--url has no origin")
            return .usage
        }
        let verdict = chain.verdict
        if options.json {
            console.print(json(chain, console: console))
        } else if chain.hops.count > 1 || chain.hops.first?.failure == nil {
            console.print(report(chain, console: console))
        }
        // A leak is the finding even when a later hop failed (the report notes it); otherwise the failure is.
        if case .failed(let message) = chain.end, verdict == .inconclusive { console.error(message) }
        return verdict.exitCode
    }

    /// Walks the chain from `url`: each hop asked with the token only when it is on `url`'s origin.
    ///
    /// - Returns: The chain, ended; `nil` when `url` has no origin.
    static func walk(_ url: URL, token: String, timeout: Duration) async -> RedirectChain? {
        guard var chain = RedirectChain(url: url) else { return nil }
        let client = AuditHTTPClient(timeout: timeout)
        while let next = chain.nextRequest {
            var request = URLRequest(url: next.url)
            request.setValue("*/*", forHTTPHeaderField: "Accept")
            if next.sendsToken { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            do {
                let answer = try await client.send(request)
                chain.answered(status: answer.status, location: answer.header("Location"))
            } catch {
                chain.failed(error.message)
            }
        }
        return chain
    }

    /// The printed report: a row per hop, the verdict, and what to change.
    static func report(_ chain: RedirectChain, console: Console) -> String {
        let colour = console.usesColour
        var lines = [
            TextLayout.paragraph(
                console.scrub(
                    "sessionkit audit redirects: GET \(CacheAudit.shown(chain.url)) with a bearer token, following "
                        + "redirects by hand (the token only to \(RedirectChain.shown(chain.home)))")),
            "",
        ]
        let rows = chain.hops.enumerated().map { index, hop in
            [
                "\(index + 1)", hop.status.map(String.init) ?? "none", console.scrub(RedirectChain.shown(hop.origin)),
                hop.tokenSent ? "yes" : "no", hop.sameOrigin ? "sends the token" : "SENDS IT: a leak",
            ]
        }
        let table = TextLayout.table(
            header: ["hop", "status", "origin", "token sent", "naive client"],
            rows: rows,
            widths: [3, 6, 30, 10, 20]
        ) { _, column, line in
            column == 4 && line.hasPrefix("SENDS IT") ? TextLayout.colour(line, 31, enabled: colour) : line
        }
        lines += table.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }
        lines.append(
            TextLayout.paragraph(
                "\"naive client\": one that copies the request's headers to every hop, as a plain URLSession on "
                    + "Linux does.", indent: "  ", first: "  "))
        lines.append("")
        let label =
            switch chain.verdict {
            case .safe: TextLayout.colour("SAFE", 32, enabled: colour)
            case .crossOrigin, .downgrade: TextLayout.colour("LEAK", 31, enabled: colour)
            case .inconclusive: TextLayout.colour("INCONCLUSIVE", 33, enabled: colour)
            }
        lines.append(TextLayout.paragraph("\(label): " + console.scrub(chain.reason) + "."))
        if !chain.fixes.isEmpty {
            lines.append("Fix:")
            for fix in chain.fixes { lines.append(TextLayout.paragraph(fix, indent: "    ", first: "  - ")) }
        }
        for note in chain.notes {
            lines.append(TextLayout.paragraph(console.scrub(note), indent: "      ", first: "note: "))
        }
        return lines.joined(separator: "\n")
    }

    /// The report as JSON (the schema is in `sessionkit help audit redirects`).
    static func json(_ chain: RedirectChain, console: Console) -> String {
        let verdict = chain.verdict
        let hops: [[String: Any]] = chain.hops.enumerated().map { index, hop in
            [
                "hop": index + 1,
                "url": console.scrub(CacheAudit.shown(hop.url)),
                "origin": console.scrub(RedirectChain.shown(hop.origin)),
                "status": hop.status.map { $0 as Any } ?? NSNull(),
                "location": hop.location.map { console.scrub(CacheAudit.shown($0)) as Any } ?? NSNull(),
                "sameOrigin": hop.sameOrigin,
                "tokenSent": hop.tokenSent,
                "naiveClientSendsToken": true,
                "leak": !hop.sameOrigin,
                "downgrade": hop.downgrades,
                "error": hop.failure.map { console.scrub($0) as Any } ?? NSNull(),
            ]
        }
        let object: [String: Any] = [
            "audit": "redirects",
            "url": console.scrub(CacheAudit.shown(chain.url)),
            "verdict": verdict.rawValue,
            "exitCode": Int(verdict.exitCode.rawValue),
            "reason": console.scrub(chain.reason),
            "redirects": chain.redirects,
            "hops": hops,
            "fixes": chain.fixes,
            "notes": chain.notes.map { console.scrub($0) },
        ]
        return JSONText.encode(object)
    }
}
