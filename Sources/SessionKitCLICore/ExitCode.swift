/// The exit statuses of `sessionkit`, as documented in every `--help`.
enum ExitCode: Int32, Sendable, CaseIterable {
    /// Everything checked out: no SessionKit row leaked, the responses are safe, the old tokens are rejected.
    case ok = 0
    /// A leak: a SessionKit demo row leaked, a cache could reuse one user's response for another, or a token
    /// still works after logout.
    case leak = 1
    /// The command line was wrong: an unknown flag, a missing or invalid value.
    case usage = 2
    /// The check could not be made: the host was unreachable, TLS failed, the answer was not HTTP, a timeout, an
    /// answer that says nothing (a non-2xx in the cache audit, an inconclusive or doubtful logout check), or the
    /// output could not be written.
    case failure = 3

    /// The lines `--help` prints about exit statuses.
    static let helpText = """
        Exit status:
          0  ok: nothing leaked, the responses are safe, the old tokens are rejected
          1  a leak: a SessionKit row leaked, a cache could serve one user's
             response to another, or a token still works after logout
          2  usage error: unknown flag, missing or invalid value
          3  the check could not be made: host unreachable, TLS failure, an
             answer that is not HTTP, a timeout, or standard output could not
             be written
        """

    /// The exit statuses of `sessionkit demo`: its scenarios run on this machine only, so no host, TLS or remote
    /// answer can fail it.
    static let timelineHelpText = """
        Exit status:
          0  the timeline was printed
          1  not used: a timeline finds no leak
          2  usage error: more than one file, or an unknown flag
          3  the file could not be read, it held no event, or standard output
             could not be written
        """

    static let demoHelpText = """
        Exit status:
          0  no SessionKit row leaked (the naive rows are expected to)
          1  a SessionKit row leaked
          2  usage error: unknown flag, missing or invalid value, or an
             --only prefix that no scenario id starts with
          3  a scenario could not run (a loopback server or the mock OAuth
             server failed), or standard output could not be written
        """

    /// The exit statuses of `sessionkit audit cache`.
    static let cacheHelpText = """
        Exit status:
          0  no cache may answer one user with the other's response, or the
             origin gives both users the same answer
          1  a leak: a cache served one user's answer to the other during the
             audit (leaking now), or the headers let one (could leak)
          2  usage error: unknown flag, missing or invalid value
          3  no verdict: a user's answer was not a 2xx (token refused, 404,
             redirect, 5xx), both users got the same answer and the origin
             could not be asked apart, the host was unreachable, TLS failed,
             a timeout, or standard output could not be written
        """

    /// The exit statuses of `sessionkit audit logout`.
    static let logoutHelpText = """
        Exit status:
          0  pass: the old access token (and refresh token) are rejected
          1  a leak: an old token still works after logout, or a cache
             still serves the user's data to it
          2  usage error, or the access token was refused before logout
          3  no verdict, naming the argument most likely wrong: invalid_client
             (--client-id), a revocation endpoint answering 404, 302 or 5xx
             (--revocation-endpoint), a refresh grant answering 5xx
             (--token-endpoint), a resource redirecting to a login page
             (--resource); a 200 with an empty body after logout (doubtful);
             unreachable, TLS, timeout, or standard output not writable
        """

    /// The exit statuses of `sessionkit audit redirects`.
    static let redirectsHelpText = """
        Exit status:
          0  safe: the answer comes from URL's own origin, without a hop to
             another one
          1  a leak: a bearer request is redirected to another origin, or from
             https to http, where a client copying headers sends the token
          2  usage error: unknown flag, missing or invalid value
          3  no verdict: more than 10 redirects (a loop), a Location that is
             not an http(s) URL, the token was refused (401/403), the host
             was unreachable, TLS failed, a timeout, or standard output could
             not be written
        """
}
