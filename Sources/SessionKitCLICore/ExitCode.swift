/// The exit statuses of `sessionkit`, as documented in every `--help`.
enum ExitCode: Int32, Sendable, CaseIterable {
    /// Everything checked out: no SessionKit row leaked, the responses are safe, the old tokens are rejected.
    case ok = 0
    /// A leak: a SessionKit demo row leaked, a cache could reuse one user's response for another, or a token
    /// still works after logout.
    case leak = 1
    /// The command line was wrong: an unknown flag, a missing or invalid value.
    case usage = 2
    /// The check could not be made: the host was unreachable, TLS failed, the answer was not HTTP, a timeout.
    case failure = 3

    /// The lines `--help` prints about exit statuses.
    static let helpText = """
        Exit status:
          0  ok: nothing leaked, the responses are safe, the old tokens are rejected
          1  a leak: a SessionKit row leaked, a cache could serve one user's
             response to another, or a token still works after logout
          2  usage error: unknown flag, missing or invalid value
          3  the check could not be made: host unreachable, TLS failure, an
             answer that is not HTTP, a timeout
        """
}
