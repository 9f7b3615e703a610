/// The `--help` texts. Every line fits 80 columns, and no example shows a token: they read tokens from the
/// environment or standard input.
enum Usage {
    /// The help text of `topic`.
    ///
    /// - Parameter topic: The command.
    /// - Returns: The text, ending with a line break.
    static func text(_ topic: HelpTopic) -> String {
        let body =
            switch topic {
            case .tool: tool
            case .demo: demo
            case .audit: audit
            case .auditCache: auditCache
            case .auditLogout: auditLogout
            case .auditRedirects: auditRedirects
            case .timeline: timeline
            }
        let exits =
            switch topic {
            case .auditCache: ExitCode.cacheHelpText
            case .auditLogout: ExitCode.logoutHelpText
            case .auditRedirects: ExitCode.redirectsHelpText
            case .timeline: ExitCode.timelineHelpText
            case .demo: ExitCode.demoHelpText
            case .tool, .audit: ExitCode.helpText
            }
        return body + "\n\n" + exits + "\n"
    }

    /// The command that prints the help of `topic`.
    static func helpCommand(_ topic: HelpTopic) -> String {
        switch topic {
        case .tool: "sessionkit --help"
        case .demo: "sessionkit demo --help"
        case .audit: "sessionkit audit --help"
        case .auditCache: "sessionkit audit cache --help"
        case .auditLogout: "sessionkit audit logout --help"
        case .auditRedirects: "sessionkit audit redirects --help"
        case .timeline: "sessionkit timeline --help"
        }
    }

    static let tool = """
        sessionkit: what logging out leaves behind, shown and measured

        Usage:
          sessionkit demo [--json] [--only ID-PREFIX] [--seed N]
          sessionkit audit cache --url URL [token options]
          sessionkit audit logout --resource URL --revocation-endpoint URL
                                  --client-id ID [token options]
          sessionkit audit redirects --url URL [token options]
          sessionkit timeline [FILE]
          sessionkit help [demo | audit cache | audit logout | audit redirects |
                           timeline]
          sessionkit --version

        Commands:
          demo          run each privacy bug of logging out twice, the naive way
                        and with SessionKit, against servers on this machine
          audit cache   ask a real API whether a cache could show one user's
                        response to another (RFC 9111)
          audit logout  check that a real API rejects the tokens of a session
                        that logged out (OWASP MASTG logout test)
          audit redirects
                        ask a real API whether it redirects a request that
                        carries a bearer token to another origin
          timeline      print a captured stream of SessionKit's diagnostic
                        events as a timeline

        Options:
          -h, --help    show help; `sessionkit <command> --help` for a command
          --version     print the version
        """

    static let demo = """
        sessionkit demo: the privacy bugs of logging out, naive code vs SessionKit

        Usage: sessionkit demo [--json] [--only ID-PREFIX] [--seed N]

        Starts loopback HTTP servers and a mock OAuth server, runs every
        scenario twice (the naive way and with SessionKit) and prints whether
        each leaked, as observed in server logs, credential stores and app
        state. Takes a few seconds. cache-leak/no-store is the control: the
        naive cache honours no-store, so neither side leaks there, and 11 of
        the 12 naive rows leak.

        Scenarios: late-response, cache-leak/max-age, cache-leak/private,
          cache-leak/no-store, cache-leak/vary-authorization,
          refresh-after-logout, relogin-same-user, logout-in-flight,
          account-switch, writes-in-flight, download-leak,
          redirect-token-leak

        Options:
          --json             print one line of JSON instead of the table:
                             {"seed":N,"totals":{"scenarios":N,
                             "naiveLeaked":N,"sessionkitLeaked":N},
                             "scenarios":[{"id":ID,
                             "naive":{"leaked":BOOL,"detail":TEXT},
                             "sessionkit":{"leaked":BOOL,"detail":TEXT}},
                             ...]}
          --only ID-PREFIX   run only the scenarios whose id starts with it
                             (given once; cache-leak/ runs all four)
          --seed N           seed of logout-in-flight's arrivals and logout
                             moment (default \(DemoOptions.defaultSeed))
          -h, --help         show this help
        """

    static let audit = """
        sessionkit audit: check a real API

        Usage:
          sessionkit audit cache --url URL [token options]
          sessionkit audit logout --resource URL --revocation-endpoint URL
                                  --client-id ID [token options]
          sessionkit audit redirects --url URL [token options]

        See `sessionkit audit cache --help`, `sessionkit audit logout --help`
        and `sessionkit audit redirects --help`.
        """

    static let auditCache = """
        sessionkit audit cache: is a cache showing user A's response to user B?

        Usage: sessionkit audit cache --url URL [--token T | --token-env NAME]...
                                      [--timeout SECONDS] [--json]

        GETs URL as user A, then as user B (`Authorization: Bearer`), then as B
        and as A again with the origin forced (a unique query parameter,
        sessionkit-audit-control, and `Cache-Control: no-cache`). Then:
        - leaking now: B got A's answer byte for byte while the origin answers
          B otherwise: a cache in front of the server served it. Cache hints
          (Age, X-Cache, X-Cache-Status, CF-Cache-Status, Via) are shown.
        - could leak: from the headers, could a private cache (an app's, a
          browser's) or a shared one, as nginx, Varnish and RFC 9111 CDNs
          behave by default, reuse one user's answer for the other?
        Each with the change that fixes it. Only 2xx answers for both users
        count. Redirects are not followed.

        Options:
          --url URL          the resource: https, or http to localhost only
          --token T          a user's token, given twice (A, then B); `-` reads
                             one line from standard input (without echo on a
                             terminal)
          --token-env NAME   read a user's token from environment variable NAME
          --timeout SECONDS  deadline on each whole request (default 10)
          --json             print one JSON object instead of the report:
                             audit, url, verdict (leaking-now, could-leak,
                             safe, same-for-both, unobservable, inconclusive),
                             exitCode, leakingNow, leakEvidence, couldLeak,
                             personal, answers {A,B} and originAnswers {A,B}
                             (status, headers, bodyBytes, cacheHit), caches
                             [{cache, reuse, reason}], fixes, notes; with
                             no verdict: audit, url, verdict, exitCode,
                             reason, and answers when there were some
          -h, --help         show this help
        Without --token/--token-env, the tokens come from SESSIONKIT_TOKEN_A
        and SESSIONKIT_TOKEN_B. A token on the command line is visible to other
        users of this machine; prefer the environment or standard input.
        Tokens, and any run of 8 of their characters, are never printed.

        What it cannot see: a cache that keys on the path alone (the control
        request is then cached too; the audit says it could not observe); a
        field the cache removes (nginx's X-Accel-Expires); a cache that has
        not stored the URL yet, or keys on something the two requests share
        but other users' do not; caches between other users and the server.

        Example:
          sessionkit audit cache --url https://api.example.com/me \\
              --token-env ALICE_TOKEN --token-env BOB_TOKEN
        """

    static let auditLogout = """
        sessionkit audit logout: do a session's tokens still work after logout?

        Usage: sessionkit audit logout --resource URL --revocation-endpoint URL
                 --client-id ID [--access-token T | --access-token-env NAME]
                 [--refresh-token T | --refresh-token-env NAME]
                 [--token-endpoint URL] [--timeout SECONDS]

        The OWASP MASTG logout test: GETs the resource with the access token
        (expects 2xx), revokes both tokens (RFC 7009: the refresh token first,
        then the access token, each with token_type_hint), then replays the
        same GET and, with --token-endpoint, a refresh_token grant. Passes only
        if both are rejected (401/403, invalid_grant). A replay answered from a
        cache (Age, X-Cache-Status: HIT…) is named, and the origin asked apart.
        Tokens a refresh grant issues are revoked and checked refused, or
        listed as still live. The tokens are used up: run it on a test login.

        Options:
          --resource URL              a protected resource (https, or http to
                                      localhost)
          --revocation-endpoint URL   the RFC 7009 revocation endpoint
          --client-id ID              the OAuth client ID
          --access-token T            the access token; `-` reads a line from
                                      standard input
          --access-token-env NAME     read it from environment variable NAME
          --refresh-token T           the refresh token; `-` as above
          --refresh-token-env NAME    read it from environment variable NAME
          --token-endpoint URL        also try a refresh grant after revoking
          --timeout SECONDS           deadline on each whole request
                                      (default 10)
          --json                      print one JSON object: audit, verdict
                                      (pass, fail, inconclusive, doubtful,
                                      usage), exitCode, reason, steps [{id,
                                      action, status, result, detail}],
                                      mintedTokens {issued, revoked,
                                      stillLive} or null
          -h, --help                  show this help
        Without them, the tokens come from SESSIONKIT_ACCESS_TOKEN and
        SESSIONKIT_REFRESH_TOKEN. Tokens are never printed.

        What it cannot see: whether other copies of the tokens (other devices,
        server-side sessions, self-contained JWTs checked offline by other
        resource servers) still work; a 200 with an empty body is "doubtful",
        not proof either way.

        Example:
          sessionkit audit logout --resource https://api.example.com/me \\
              --revocation-endpoint https://id.example.com/oauth/revoke \\
              --token-endpoint https://id.example.com/oauth/token \\
              --client-id my-app
        """

    static let timeline = """
        sessionkit timeline: a captured stream of SessionKit's diagnostic events,
        as a timeline a person can read

        Usage:
          sessionkit timeline [FILE]

        Reads the JSON lines an app wrote with
        Diagnostics.lines(format: .jsonLines) from FILE, or standard input when
        FILE is missing or -, and prints one line per event: the time since the
        first event, the level, the account, and what happened, in words. The
        events carry accounts, codes, durations and counts; never a token.
        Lines that are not events are skipped and counted on standard error.
        """

    static let auditRedirects = """
        sessionkit audit redirects: is a bearer token sent on to another origin?

        Usage: sessionkit audit redirects --url URL
                                          [--token T | --token-env NAME]
                                          [--timeout SECONDS] [--json]

        GETs URL with `Authorization: Bearer`, and follows the redirects (301,
        302, 303, 307, 308) itself, up to 10: the token goes only to hops on
        URL's own origin (scheme, host and port; no port means 80 or 443),
        and never again once the chain has left it. A hop on another origin
        is asked without it, so the audit never hands the token to the origin
        it warns about. For each hop it shows the status, the origin, whether
        it sent the token, and whether a client that copies the request's
        headers to every hop would have: a plain URLSession on Linux
        (FoundationNetworking) does, as does curl with --location-trusted.
        Then:
        - leak: the API redirects the bearer request to another origin (a
          CDN, a storage bucket, a login page), or from https to http;
        - safe: the answer comes from URL's own origin, with or without
          redirects within it.

        Options:
          --url URL          the resource: https, or http to localhost only
          --token T          the bearer token; `-` reads one line from
                             standard input (without echo on a terminal)
          --token-env NAME   read the token from environment variable NAME
          --timeout SECONDS  deadline on each whole request, per hop
                             (default 10)
          --json             print one JSON object instead of the report:
                             audit, url, verdict (safe, cross-origin,
                             downgrade, inconclusive), exitCode, reason,
                             redirects, hops [{hop, url, origin, status,
                             location, sameOrigin, tokenSent,
                             naiveClientSendsToken, leak, downgrade, error}],
                             fixes, notes
          -h, --help         show this help
        Without --token/--token-env, the token comes from SESSIONKIT_TOKEN. A
        token on the command line is visible to other users of this machine;
        prefer the environment or standard input. The token, and any run of 8
        of its characters, is never printed; a URL's query is shown as ?….

        What it cannot see: redirects that depend on something the audit does
        not send (cookies, another method or body, a browser's User-Agent);
        an origin that is another company's but trusted on purpose (a
        cross-origin hop is reported whatever its owner).

        Example:
          sessionkit audit redirects --url https://api.example.com/me \\
              --token-env TOKEN
        """
}
