import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `sessionkit audit logout`: the OWASP MASTG logout test against a real API.
///
/// Calls the resource with the access token (it must work), revokes both tokens as a logout would (RFC 7009:
/// the refresh token first, then the access token), then replays the call and, given a token endpoint, a
/// `refresh_token` grant. The old tokens must both be rejected.
enum LogoutAudit {
    /// The variables that hold the tokens when the command line does not give them.
    static let accessVariable = "SESSIONKIT_ACCESS_TOKEN"
    static let refreshVariable = "SESSIONKIT_REFRESH_TOKEN"

    /// What a check after the revocation found.
    enum Check: Sendable, Equatable {
        /// The server refused the old token, as it should.
        case rejected(String)
        /// The server accepted the old token.
        case accepted(String)
        /// A 2xx whose body carries nothing of the user's: neither a pass nor a leak.
        case doubtful(String)
        /// The answer says neither (a redirect, a 404, a 5xx, another error): the token is not known to be dead,
        /// and the argument most likely wrong is named.
        case inconclusive(String)

        var passed: Bool {
            if case .rejected = self { return true }
            return false
        }

        var isAccepted: Bool {
            if case .accepted = self { return true }
            return false
        }

        /// A word for JSON.
        var name: String {
            switch self {
            case .rejected: "rejected"
            case .accepted: "accepted"
            case .doubtful: "doubtful"
            case .inconclusive: "inconclusive"
            }
        }

        var detail: String {
            switch self {
            case .rejected(let text), .accepted(let text), .doubtful(let text), .inconclusive(let text): text
            }
        }

        var summary: String {
            switch self {
            case .rejected(let text): "rejected: \(text)"
            case .accepted(let text): "STILL ACCEPTED: \(text)"
            case .doubtful(let text): "doubtful: \(text)"
            case .inconclusive(let text): "inconclusive: \(text)"
            }
        }
    }

    /// One step of the test, as printed and as JSON.
    struct Step: Sendable {
        let id: String
        let action: String
        let status: Int?
        let result: String
        let detail: String
    }

    /// The access and refresh tokens, from the command line or the default variables.
    ///
    /// - Parameters:
    ///   - options: The parsed options.
    ///   - console: Where the environment and standard input come from.
    /// - Returns: Both tokens.
    /// - Throws: ``UsageError`` when one is missing or empty.
    static func tokens(_ options: LogoutAuditOptions, console: Console) throws(UsageError) -> (
        access: String, refresh: String
    ) {
        func resolve(_ source: TokenSource?, _ variable: String, _ role: String) throws(UsageError) -> String {
            do {
                return try (source ?? .environment(variable)).resolve(
                    environment: console.environment, readLine: { console.readToken(role: role) }, role: role)
            } catch {
                throw UsageError(error.message, topic: .auditLogout)
            }
        }
        let access = try resolve(options.accessToken, accessVariable, "the access token")
        let refresh = try resolve(options.refreshToken, refreshVariable, "the refresh token")
        guard access != refresh else {
            throw UsageError("the access token and the refresh token are the same", topic: .auditLogout)
        }
        return (access, refresh)
    }

    /// Runs the test and prints each step.
    ///
    /// - Parameters:
    ///   - options: The parsed options.
    ///   - tokens: The access and refresh tokens.
    ///   - console: Where to print; it should scrub both tokens.
    /// - Returns: `.ok` when both old tokens are rejected; `.leak` when one is still accepted; `.usage` when the
    ///   access token did not work to begin with; `.failure` when a server could not be asked, or an answer was
    ///   inconclusive or doubtful.
    static func run(
        _ options: LogoutAuditOptions,
        tokens: (access: String, refresh: String),
        console: Console
    ) async -> ExitCode {
        var run = Run(options: options, console: console)
        let status = await run.perform(tokens: tokens)
        if options.json { console.print(run.json(status: status)) }
        return status
    }

    /// One run's state: the steps so far and what it printed.
    private struct Run {
        let options: LogoutAuditOptions
        let console: Console
        let client: AuditHTTPClient
        var steps: [Step] = []
        var verdict = "inconclusive"
        var reason: String?
        var minted: (issued: Int, stillLive: [String])?

        init(options: LogoutAuditOptions, console: Console) {
            self.options = options
            self.console = console
            client = AuditHTTPClient(timeout: options.timeout)
        }

        private var text: Bool { !options.json }

        mutating func step(_ id: String, _ action: String, status: Int?, result: String, _ detail: String) {
            steps.append(Step(id: id, action: action, status: status, result: result, detail: detail))
            guard text else { return }
            console.print(
                TextLayout.paragraph(console.scrub("\(id). \(action): \(detail)"), indent: "     ", first: "  "))
        }

        mutating func stop(_ status: ExitCode, verdict: String, _ message: String) -> ExitCode {
            self.verdict = verdict
            reason = message
            if text {
                console.print()
                let label = TextLayout.colour(
                    verdict.uppercased(), status == .ok ? 32 : 33, enabled: console.usesColour)
                console.print(TextLayout.paragraph(console.scrub("\(label): \(message)")))
            }
            return status
        }

        mutating func perform(tokens: (access: String, refresh: String)) async -> ExitCode {
            if text {
                console.print(TextLayout.paragraph("sessionkit audit logout: the OWASP MASTG logout test"))
                console.print(
                    TextLayout.paragraph(
                        "resource \(CacheAudit.shown(options.resource)), revocation endpoint "
                            + "\(CacheAudit.shown(options.revocationEndpoint)), client "
                            + TextLayout.printable(console.scrub(options.clientID)),
                        indent: "  ", first: "  "))
                console.print()
            }
            do {
                return try await checks(tokens: tokens)
            } catch let error as AuditFailure {
                console.error(error.message)
                verdict = "inconclusive"
                reason = error.message
                return .failure
            } catch {
                // Only the request builders throw anything else: an endpoint or a client ID they do not accept.
                let message = (error as? SessionError)?.message ?? "could not build a request"
                console.error(message)
                verdict = "usage"
                reason = message
                return .usage
            }
        }

        private mutating func checks(tokens: (access: String, refresh: String)) async throws -> ExitCode {
            var resource = URLRequest(url: options.resource)
            resource.setValue("Bearer \(tokens.access)", forHTTPHeaderField: "Authorization")
            let before = try await client.send(resource)
            let first = "GET the resource with the access token"
            guard (200..<300).contains(before.status) else {
                if [401, 403].contains(before.status) {
                    step("1", first, status: before.status, result: "refused", "\(before.status)")
                    let message =
                        "the access token was refused before any logout (status \(before.status)): the test needs the "
                        + "tokens of a live session (check --access-token)"
                    console.error(message)
                    verdict = "usage"
                    reason = message
                    return .usage
                }
                let why = LogoutAudit.resourceProblem(before, when: "before any logout")
                step("1", first, status: before.status, result: "inconclusive", why)
                return stop(.failure, verdict: "inconclusive", why)
            }
            step("1", first, status: before.status, result: "live", "\(before.status), the session is live")

            for (token, hint) in [
                (tokens.refresh, RevocationRequest.TokenTypeHint.refreshToken), (tokens.access, .accessToken),
            ] {
                let request = try RevocationRequest(token: token, tokenTypeHint: hint, clientID: options.clientID)
                    .urlRequest(endpoint: options.revocationEndpoint)
                let answer = try await client.send(request)
                let (id, action) =
                    hint == .refreshToken
                    ? ("2a", "revoke the refresh token (RFC 7009)") : ("2b", "revoke the access token (RFC 7009)")
                switch LogoutAudit.revocation(answer) {
                case .success(let detail):
                    step(id, action, status: answer.status, result: "revoked", "\(answer.status), \(detail)")
                case .failure(let problem):
                    step(id, action, status: answer.status, result: "inconclusive", problem.message)
                    return stop(
                        .failure, verdict: "inconclusive",
                        "the tokens were not revoked, so nothing can be concluded: " + problem.message)
                }
            }

            let replayAnswer = try await client.send(resource)
            var replay = LogoutAudit.check(resourceAnswer: replayAnswer, before: before)
            if case .accepted = replay, replayAnswer.looksLikeCacheHit {
                let hit = replayAnswer.cacheHints.map { "\($0.name): \($0.value)" }.joined(separator: ", ")
                // A cache answered: ask the origin apart from it, and name what happened.
                var origin = resource
                if var components = URLComponents(url: options.resource, resolvingAgainstBaseURL: false) {
                    components.queryItems =
                        (components.queryItems ?? [])
                        + [URLQueryItem(name: CacheAudit.controlParameter, value: UUID().uuidString)]
                    origin.url = components.url
                }
                origin.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
                let fromOrigin = try await client.send(origin)
                let originSays =
                    [401, 403].contains(fromOrigin.status)
                    ? "the server itself rejects the token (\(fromOrigin.status)), but the cache keeps serving the "
                        + "user's data to it until its copy expires: make the response private or no-store"
                    : "the server itself answered \(fromOrigin.status) too"
                replay = .accepted(
                    "\(replayAnswer.status) (\(hit)): answered from a cache hit, not by the server; \(originSays)")
            }
            step(
                "3", "GET the resource again with the same access token", status: replayAnswer.status,
                result: replay.name, replay.summary)

            var refresh: Check?
            if let tokenEndpoint = options.tokenEndpoint {
                let request = try TokenRequest(
                    grant: .refreshToken(tokens.refresh, scope: nil), clientID: options.clientID
                )
                .urlRequest(endpoint: tokenEndpoint)
                let answer = try await client.send(request)
                let (result, issued) = LogoutAudit.check(tokenAnswer: answer)
                refresh = result
                step(
                    "4", "refresh_token grant with the revoked refresh token", status: answer.status,
                    result: result.name, result.summary)
                if let issued { await revokeMinted(issued) }
            } else {
                step(
                    "4", "refresh_token grant", status: nil, result: "not-tried",
                    "not tried (no --token-endpoint): the refresh token is unchecked")
            }

            let checks = [replay] + (refresh.map { [$0] } ?? [])
            if checks.contains(where: \.isAccepted) {
                var failures: [String] = []
                if replay.isAccepted { failures.append("the access token still works") }
                if refresh?.isAccepted == true { failures.append("the refresh token still works") }
                let status = stop(
                    .leak, verdict: "fail",
                    failures.joined(separator: "; ")
                        + ". A logout that leaves a token alive lets whoever copied it keep using the account.")
                if text, case .accepted(let detail) = replay, !detail.contains("cache hit") {
                    console.print(
                        TextLayout.paragraph(
                            "If access tokens are self-contained (JWTs checked without asking the authorization "
                                + "server), revocation cannot reach them: keep their lifetime to minutes, or have "
                                + "the resource server introspect them (RFC 7662).", indent: "      ", first: "note: "))
                }
                return status
            }
            if let unclear = checks.first(where: { if case .inconclusive = $0 { true } else { false } }) {
                return stop(.failure, verdict: "inconclusive", unclear.detail)
            }
            if let doubt = checks.first(where: { if case .doubtful = $0 { true } else { false } }) {
                return stop(.failure, verdict: "doubtful", doubt.detail)
            }
            return stop(
                .ok, verdict: "pass",
                refresh == nil
                    ? "the access token is rejected after logout." : "both old tokens are rejected after logout.")
        }

        /// Revokes the tokens the refresh grant handed out, then checks the access token is refused; says plainly
        /// which are still live.
        private mutating func revokeMinted(_ issued: TokenSet) async {
            var pairs: [(String, RevocationRequest.TokenTypeHint, String)] = []
            if let refreshToken = issued.refreshToken { pairs.append((refreshToken, .refreshToken, "refresh token")) }
            pairs.append((issued.accessToken, .accessToken, "access token"))
            var stillLive: [String] = []
            for (token, hint, name) in pairs {
                guard
                    let request = try? RevocationRequest(
                        token: token, tokenTypeHint: hint, clientID: options.clientID
                    ).urlRequest(endpoint: options.revocationEndpoint),
                    let answer = try? await client.send(request),
                    (200..<300).contains(answer.status)
                else {
                    stillLive.append("the new \(name) (its revocation failed)")
                    continue
                }
                if hint == .accessToken {
                    var check = URLRequest(url: options.resource)
                    check.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                    check.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
                    if let answer = try? await client.send(check), (200..<300).contains(answer.status) {
                        stillLive.append("the new access token (the resource still accepts it after revocation)")
                    }
                }
            }
            minted = (pairs.count, stillLive)
            guard text else { return }
            let line =
                stillLive.isEmpty
                ? "the \(pairs.count) tokens the grant issued were revoked, and the resource now rejects the new "
                    + "access token"
                : "STILL LIVE after the audit: " + stillLive.joined(separator: "; ")
                    + ". Revoke them on the server (end the user's sessions there)."
            console.print(TextLayout.paragraph(line, indent: "     ", first: "     "))
        }

        func json(status: ExitCode) -> String {
            var object: [String: Any] = [
                "audit": "logout", "verdict": verdict, "exitCode": Int(status.rawValue),
                "reason": reason.map { console.scrub($0) as Any } ?? NSNull(),
                "steps": steps.map { step in
                    [
                        "id": step.id, "action": step.action, "status": step.status.map { $0 as Any } ?? NSNull(),
                        "result": step.result, "detail": console.scrub(step.detail),
                    ] as [String: Any]
                },
            ]
            if let minted {
                object["mintedTokens"] = [
                    "issued": minted.issued, "stillLive": minted.stillLive,
                    "revoked": minted.issued - minted.stillLive.count,
                ]
            } else {
                object["mintedTokens"] = NSNull()
            }
            return JSONText.encode(object)
        }
    }

    /// A revocation that did not happen: why, naming the argument most likely wrong.
    struct RevocationProblem: Error {
        let message: String
    }

    /// What a revocation endpoint's answer means.
    static func revocation(_ answer: HTTPExchange) -> Result<String, RevocationProblem> {
        switch answer.status {
        case 300..<400:
            return .failure(
                RevocationProblem(
                    message: "\(answer.status), a redirect\(location(answer)): not a revocation endpoint (a login "
                        + "page?); check --revocation-endpoint"))
        case 404, 405, 410:
            return .failure(
                RevocationProblem(
                    message: "\(answer.status): nothing revokes tokens there; check --revocation-endpoint"))
        case 500..<600:
            return .failure(
                RevocationProblem(
                    message: "\(answer.status): the revocation endpoint failed and did not revoke; try again later, "
                        + "or check --revocation-endpoint"))
        default:
            break
        }
        switch RevocationRequest.classify(statusCode: answer.status, body: answer.body, retryAfter: nil) {
        case .revoked:
            return .success("revoked (or unknown to the server)")
        case .retryable:
            return .failure(
                RevocationProblem(
                    message: "\(answer.status): the revocation endpoint failed and did not revoke; try again later, "
                        + "or check --revocation-endpoint"))
        case .unsupportedTokenType:
            return .success("unsupported_token_type: this server does not revoke that kind of token")
        case .failed(let error):
            let said = error.oauthError ?? "an error"
            if said == "invalid_client" {
                return .failure(
                    RevocationProblem(
                        message: "\(answer.status) invalid_client: the server does not accept this client; check "
                            + "--client-id"))
            }
            return .failure(
                RevocationProblem(
                    message: "\(answer.status) \(TextLayout.printable(said, limit: 60)): refused; check --client-id "
                        + "and --revocation-endpoint"))
        }
    }

    private static func location(_ answer: HTTPExchange) -> String {
        guard let location = answer.header("Location"), let url = URL(string: location) else { return "" }
        return url.host == nil ? " to \(TextLayout.printable(url.path, limit: 60))" : " to \(CacheAudit.shown(url))"
    }

    /// Why a resource's answer that is neither a success nor a refusal says nothing, naming `--resource`.
    static func resourceProblem(_ answer: HTTPExchange, when: String) -> String {
        switch answer.status {
        case 300..<400:
            "the resource redirects \(when) (\(answer.status)\(location(answer))), likely to a login page: it is "
                + "not an API that answers a bad bearer token with 401; check --resource"
        case 404, 410:
            "the resource answers \(answer.status) \(when): check --resource"
        case 500..<600:
            "the resource failed \(when) (\(answer.status)): nothing can be read from an error; check --resource "
                + "or try again"
        default:
            "the resource answers \(answer.status) \(when), neither a success nor a refusal; check --resource"
        }
    }

    /// Whether `body` carries nothing: empty, or an empty JSON object, array, or `null`.
    static func isEmptyOfData(_ body: Data) -> Bool {
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return ["", "{}", "[]", "null", "\"\""].contains(text)
    }

    static func check(resourceAnswer answer: HTTPExchange, before: HTTPExchange? = nil) -> Check {
        switch answer.status {
        case 200..<300:
            if isEmptyOfData(answer.body) && !(before.map { isEmptyOfData($0.body) } ?? false) {
                return .doubtful(
                    "\(answer.status) with an empty body after logout: the server answers a success that carries "
                        + "none of the user's data; check by hand whether the token is refused")
            }
            if answer.looksLikeCacheHit {
                let hints = answer.cacheHints.map { "\($0.name): \($0.value)" }.joined(separator: ", ")
                return .accepted("\(answer.status) (\(hints))")
            }
            return .accepted("\(answer.status), the revoked access token still works")
        case 401, 403:
            return .rejected("\(answer.status)")
        default:
            return .inconclusive(resourceProblem(answer, when: "after logout"))
        }
    }

    /// What a token endpoint's answer to the refresh grant means, and the tokens it issued if it succeeded.
    static func check(tokenAnswer answer: HTTPExchange) -> (Check, TokenSet?) {
        if (300..<400).contains(answer.status) {
            return (
                .inconclusive(
                    "\(answer.status), a redirect\(location(answer)): not a token endpoint; check --token-endpoint"),
                nil
            )
        }
        if [404, 405, 410].contains(answer.status) {
            return (.inconclusive("\(answer.status): no token endpoint there; check --token-endpoint"), nil)
        }
        if (500..<600).contains(answer.status) {
            return (
                .inconclusive(
                    "\(answer.status): the token endpoint failed, so the refresh token is not known to be dead; "
                        + "try again later, or check --token-endpoint"), nil
            )
        }
        do {
            let tokens = try TokenResponse.parse(
                data: answer.body, statusCode: answer.status, receivedAt: .now, receivedAtWall: Date())
            return (.accepted("\(answer.status), the revoked refresh token was exchanged for new tokens"), tokens)
        } catch let error as SessionError where error.code == .refreshRejected {
            return (.rejected("\(answer.status) \(error.oauthError ?? "invalid_grant")"), nil)
        } catch let error as SessionError {
            let said = error.oauthError ?? error.code.description
            if said == "invalid_client" || said == "unauthorized_client" {
                return (
                    .inconclusive(
                        "\(answer.status) \(said): the server does not accept this client for the grant; check "
                            + "--client-id"), nil
                )
            }
            return (
                .inconclusive(
                    "\(answer.status) \(TextLayout.printable(said, limit: 60)), not invalid_grant; check "
                        + "--token-endpoint and --client-id"), nil
            )
        } catch {
            return (.inconclusive("\(answer.status), an answer that could not be read; check --token-endpoint"), nil)
        }
    }
}
