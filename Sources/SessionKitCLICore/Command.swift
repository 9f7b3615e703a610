import Foundation

/// What the command line asked for, parsed and checked, with tokens still unread (see ``TokenSource``).
enum Command: Sendable, Equatable {
    /// Print the help of a command.
    case help(HelpTopic)
    /// Print the version.
    case version
    /// `sessionkit demo`.
    case demo(DemoOptions)
    /// `sessionkit audit cache`.
    case auditCache(CacheAuditOptions)
    /// `sessionkit audit logout`.
    case auditLogout(LogoutAuditOptions)
    /// `sessionkit audit redirects`.
    case auditRedirects(RedirectAuditOptions)
    /// `sessionkit timeline`.
    case timeline(TimelineOptions)
}

/// The options of `sessionkit timeline`.
struct TimelineOptions: Sendable, Equatable {
    /// The captured stream; `nil` reads standard input.
    var file: String?
}

/// Which help text to print.
enum HelpTopic: Sendable, Equatable, CaseIterable {
    /// The tool as a whole.
    case tool
    /// `sessionkit demo`.
    case demo
    /// `sessionkit audit`.
    case audit
    /// `sessionkit audit cache`.
    case auditCache
    /// `sessionkit audit logout`.
    case auditLogout
    /// `sessionkit audit redirects`.
    case auditRedirects
    /// `sessionkit timeline`.
    case timeline
}

/// The options of `sessionkit demo`.
struct DemoOptions: Sendable, Equatable {
    /// The seed used when none is given: with it, something is in flight at the `logout-in-flight` logout.
    static let defaultSeed: UInt64 = 5

    /// Print JSON instead of the table.
    var json = false
    /// Run only the scenarios whose id starts with this.
    var only: String?
    /// The seed of the randomized scenario.
    var seed = DemoOptions.defaultSeed
}

/// The options of `sessionkit audit cache`.
struct CacheAuditOptions: Sendable, Equatable {
    /// The resource to GET as two users.
    var url: URL
    /// The sources of the two users' tokens given on the command line, in order (0 to 2; the environment fills
    /// the rest).
    var tokens: [TokenSource]
    /// The deadline on each HTTP exchange, from connection to last byte.
    var timeout: Duration
    /// Print JSON instead of the report.
    var json = false
}

/// The options of `sessionkit audit logout`.
struct LogoutAuditOptions: Sendable, Equatable {
    /// The protected resource to call with the access token.
    var resource: URL
    /// The RFC 7009 revocation endpoint.
    var revocationEndpoint: URL
    /// The OAuth client ID sent with the revocation and the refresh grant.
    var clientID: String
    /// The access token's source; the environment when `nil`.
    var accessToken: TokenSource?
    /// The refresh token's source; the environment when `nil`.
    var refreshToken: TokenSource?
    /// The token endpoint, to try a refresh grant with the revoked refresh token.
    var tokenEndpoint: URL?
    /// The deadline on each HTTP exchange, from connection to last byte.
    var timeout: Duration
    /// Print JSON instead of the report.
    var json = false
}

/// The options of `sessionkit audit redirects`.
struct RedirectAuditOptions: Sendable, Equatable {
    /// The resource to GET with the bearer token.
    var url: URL
    /// The token's source; the environment (``RedirectAudit/defaultVariable``) when `nil`.
    var token: TokenSource?
    /// The deadline on each HTTP exchange (each hop), from connection to last byte.
    var timeout: Duration
    /// Print JSON instead of the report.
    var json = false
}

/// A command line that cannot be run; the message is safe to print (it never repeats a value).
struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong.
    var message: String
    /// The help to print after the message.
    var topic: HelpTopic

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - message: What is wrong, without any value the user typed.
    ///   - topic: The help to print after it.
    init(_ message: String, topic: HelpTopic = .tool) {
        self.message = message
        self.topic = topic
    }

    /// The message.
    var description: String { message }
}
