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
        /// The answer says neither (a 5xx, another error): the token is not known to be dead.
        case inconclusive(String)

        var passed: Bool {
            if case .rejected = self { return true }
            return false
        }

        var summary: String {
            switch self {
            case .rejected(let text): "rejected: \(text)"
            case .accepted(let text): "STILL ACCEPTED: \(text)"
            case .inconclusive(let text): "inconclusive: \(text)"
            }
        }
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
                    environment: console.environment, readLine: console.readLine, role: role)
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
    /// - Returns: `.ok` when both old tokens are rejected, `.leak` otherwise, `.usage` when the access token did
    ///   not work to begin with, `.failure` when a server could not be asked.
    static func run(
        _ options: LogoutAuditOptions,
        tokens: (access: String, refresh: String),
        console: Console
    ) async -> ExitCode {
        let client = AuditHTTPClient(timeout: options.timeout)
        let colour = console.usesColour
        func step(_ text: String, _ outcome: String) {
            console.print(TextLayout.paragraph("\(text): \(outcome)", indent: "     ", first: "  "))
        }
        console.print(TextLayout.paragraph("sessionkit audit logout: the OWASP MASTG logout test"))
        console.print(
            TextLayout.paragraph(
                "resource \(CacheAudit.shown(options.resource)), revocation endpoint "
                    + "\(CacheAudit.shown(options.revocationEndpoint)), client \(TextLayout.printable(options.clientID))",
                indent: "  ", first: "  "))
        console.print()
        do {
            var resource = URLRequest(url: options.resource)
            resource.setValue("Bearer \(tokens.access)", forHTTPHeaderField: "Authorization")
            let before = try await client.send(resource)
            guard (200..<300).contains(before.status) else {
                step("1. GET the resource with the access token", "\(before.status)")
                console.error(
                    "the access token was refused before any logout (status \(before.status)): the test needs the "
                        + "tokens of a live session")
                return .usage
            }
            step("1. GET the resource with the access token", "\(before.status), the session is live")

            for (token, hint) in [
                (tokens.refresh, RevocationRequest.TokenTypeHint.refreshToken), (tokens.access, .accessToken),
            ] {
                let request = try RevocationRequest(token: token, tokenTypeHint: hint, clientID: options.clientID)
                    .urlRequest(endpoint: options.revocationEndpoint)
                let answer = try await client.send(request)
                let name = hint == .refreshToken ? "2a. revoke the refresh token" : "2b. revoke the access token"
                step("\(name) (RFC 7009)", "\(answer.status), " + revocation(answer))
            }

            let replay = check(resourceAnswer: try await client.send(resource))
            step("3. GET the resource again with the same access token", replay.summary)

            var refresh: Check?
            if let tokenEndpoint = options.tokenEndpoint {
                let request = try TokenRequest(
                    grant: .refreshToken(tokens.refresh, scope: nil), clientID: options.clientID
                )
                .urlRequest(endpoint: tokenEndpoint)
                let answer = try await client.send(request)
                let (result, issued) = check(tokenAnswer: answer)
                refresh = result
                step("4. refresh_token grant with the revoked refresh token", result.summary)
                if let issued {
                    // The grant handed out live tokens: revoke them, so the audit leaves nothing usable behind.
                    let cleanup = await revoke(issued, options: options, client: client)
                    console.print(TextLayout.paragraph(cleanup, indent: "     ", first: "     "))
                }
            } else {
                step("4. refresh_token grant", "not tried (no --token-endpoint): the refresh token is unchecked")
            }
            console.print()
            let passed = replay.passed && (refresh?.passed ?? true)
            if passed {
                console.print(
                    TextLayout.paragraph(
                        TextLayout.colour("PASS", 32, enabled: colour) + ": "
                            + (refresh == nil
                                ? "the access token is rejected after logout."
                                : "both old tokens are rejected after logout.")))
            } else {
                var failures: [String] = []
                if !replay.passed { failures.append("the access token is not known to be rejected") }
                if refresh?.passed == false { failures.append("the refresh token is not known to be rejected") }
                console.print(
                    TextLayout.paragraph(
                        TextLayout.colour("FAIL", 31, enabled: colour) + ": " + failures.joined(separator: "; ")
                            + ". A logout that leaves a token alive lets whoever copied it keep using the account."))
                if case .accepted = replay {
                    console.print(
                        TextLayout.paragraph(
                            "If access tokens are self-contained (JWTs checked without asking the authorization "
                                + "server), revocation cannot reach them: keep their lifetime to minutes, or have "
                                + "the resource server introspect them (RFC 7662).", indent: "      ", first: "note: "))
                }
            }
            return passed ? .ok : .leak
        } catch let error as AuditFailure {
            console.error(error.message)
            return .failure
        } catch {
            // Only the request builders throw anything else: an endpoint or a client ID they do not accept.
            console.error((error as? SessionError)?.message ?? "could not build a request")
            return .usage
        }
    }

    private static func revocation(_ answer: HTTPExchange) -> String {
        switch RevocationRequest.classify(statusCode: answer.status, body: answer.body, retryAfter: nil) {
        case .revoked: "revoked (or unknown to the server)"
        case .retryable: "the server is unavailable; it did not revoke"
        case .unsupportedTokenType: "unsupported_token_type: this server does not revoke that kind of token"
        case .failed(let error): "refused: \(error.oauthError ?? error.code.description)"
        }
    }

    static func check(resourceAnswer answer: HTTPExchange) -> Check {
        switch answer.status {
        case 200..<300: .accepted("\(answer.status), the revoked access token still works")
        case 401, 403: .rejected("\(answer.status)")
        default: .inconclusive("\(answer.status) is neither a success nor a refusal")
        }
    }

    /// What a token endpoint's answer to the refresh grant means, and the tokens it issued if it succeeded.
    static func check(tokenAnswer answer: HTTPExchange) -> (Check, TokenSet?) {
        do {
            let tokens = try TokenResponse.parse(
                data: answer.body, statusCode: answer.status, receivedAt: .now, receivedAtWall: Date())
            return (.accepted("\(answer.status), the revoked refresh token was exchanged for new tokens"), tokens)
        } catch let error as SessionError where error.code == .refreshRejected {
            return (.rejected("\(answer.status) \(error.oauthError ?? "invalid_grant")"), nil)
        } catch let error as SessionError {
            let said = error.oauthError ?? error.code.description
            return (.inconclusive("\(answer.status) \(said), not invalid_grant"), nil)
        } catch {
            return (.inconclusive("\(answer.status), an answer that could not be read"), nil)
        }
    }

    private static func revoke(_ issued: TokenSet, options: LogoutAuditOptions, client: AuditHTTPClient) async -> String
    {
        var pairs: [(String, RevocationRequest.TokenTypeHint)] = []
        if let refreshToken = issued.refreshToken { pairs.append((refreshToken, .refreshToken)) }
        pairs.append((issued.accessToken, .accessToken))
        var revoked = 0
        for (token, hint) in pairs {
            guard
                let request = try? RevocationRequest(token: token, tokenTypeHint: hint, clientID: options.clientID)
                    .urlRequest(endpoint: options.revocationEndpoint),
                let answer = try? await client.send(request),
                (200..<300).contains(answer.status)
            else { continue }
            revoked += 1
        }
        return "the tokens it issued were revoked again (\(revoked) of \(pairs.count) accepted by the server)"
    }
}
