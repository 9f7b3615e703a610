import Foundation
import SessionKitOAuth

/// One thing SessionKit did or decided, for an app's logs: why a user was signed out, refreshed or kept waiting.
///
/// Events carry the account, names, codes, durations and counts, and origins (`https://host:port`): never a
/// token, an authorization code, a cookie, a nonce, a request or response body, or a URL's path or query. The
/// account is the only personal datum; the `os.Logger` adapter marks it private.
public struct DiagnosticEvent: Sendable, Hashable, Codable, CustomStringConvertible {
    /// How much an event matters; a ``Diagnostics`` sink drops those below its level.
    public enum Level: Int, Sendable, Hashable, Codable, Comparable, CaseIterable, CustomStringConvertible {
        /// Details of normal work: lock waits, coalesced refresh callers, cross-process notices.
        case debug
        /// Normal work worth a line: state changes, refreshes, restore's choices, sign-out steps that succeeded.
        case info
        /// Something the user may notice: the store locked, a retry, credentials withheld at a redirect.
        case notice
        /// Something went wrong and SessionKit went on: a failed refresh, a failed purge step, a write refused.
        case warning
        /// An account was lost to it: a rejected grant, a loop-guard trip.
        case error

        /// Whether `lhs` matters less than `rhs`.
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        /// The level's name.
        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .notice: "notice"
            case .warning: "warning"
            case .error: "error"
            }
        }
    }

    /// What happened. The raw values are stable: logs and the `sessionkit timeline` command read them.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// The manager's ``SessionState`` changed: `from`, `to` (state names).
        case stateChanged = "state.changed"
        /// This process asked the token endpoint for new tokens: `cause` (`proactive`, `401`, `forced`). Not told
        /// when the refresh adopts tokens another process stored (``refreshAdopted``).
        case refreshStarted = "refresh.started"
        /// Another process sharing the store had refreshed already; its stored tokens were adopted and nothing was
        /// sent: `cause`, `milliseconds`.
        case refreshAdopted = "refresh.adopted"
        /// A caller joined a refresh already in flight instead of starting one: `cause`.
        case refreshJoined = "refresh.joined"
        /// A refresh succeeded: `cause`, `milliseconds`.
        case refreshSucceeded = "refresh.succeeded"
        /// A refresh failed and the account stays signed in: `cause`, `code`, `milliseconds`.
        case refreshFailed = "refresh.failed"
        /// The provider rejected the grant; the account must sign in again: `cause`, `code`, `oauthError`,
        /// `milliseconds`.
        case refreshRejected = "refresh.rejected"
        /// The loop guard refused another refresh: `refreshes`, `window` (milliseconds).
        case loopGuardTripped = "refresh.loop_guard"
        /// The session ended (``UserSession/end()``, its record kept) while its token request was on its way; the
        /// rotation it brought was written to the record, not to the session, so the account's next session
        /// presents the new refresh token: `outcome` (`stored`, `record_changed` when the record was deleted or
        /// replaced meanwhile and is left as it is, or `failed (code)`).
        case refreshStoredAfterEnd = "refresh.stored_after_end"
        /// A refresh waited for the cross-process lock: `milliseconds`.
        case lockWaited = "lock.waited"
        /// Restore finished: `outcome` (`restored`, `offline`, `nothing`, `rejected`, `store_unavailable`),
        /// `accounts` (how many restored), `reason` for offline (`network`, `launch_budget`).
        case restoreFinished = "restore.finished"
        /// A session was loaded from the store for a request (``SessionManager/session(for:)``): no fields.
        case sessionLoaded = "session.loaded"
        /// The store could not be read; the manager tries again: `attempt`, `code`.
        case storeRetry = "store.retry"
        /// A credential write failed; the session goes on with the tokens in memory: `code`.
        case storageFailed = "storage.failed"
        /// Tokens a locked store refused were written once it opened.
        case storedAfterRetry = "storage.stored_after_retry"
        /// One step of a sign-out: `step`, `outcome` (a ``SignOutReport/StepOutcome``'s description: `succeeded`,
        /// `failed (code)`, `timed out`, `sent, not answered within the bound`, `not sent: the bound passed first`,
        /// `in background`). A server step is told the moment its outcome is known.
        case signOutStep = "sign_out.step"
        /// A change to the shared store was announced: `from` (`this_process` for this process's own announcement,
        /// `another_process`). Either way the live sessions are checked against the store.
        case crossProcessNotice = "cross_process.notice"
        /// A check of every live session against the shared store, made after one or more notices, finished:
        /// `checked` (sessions whose record was read), `ended` (sessions found signed out elsewhere).
        case crossProcessReconciled = "cross_process.reconciled"
        /// The account was signed out in another process; its session here ended.
        case signedOutElsewhere = "cross_process.signed_out"
        /// The provider ended the account (``SessionManager/endAccount(_:because:)``): `reason` (an
        /// ``AccountEnding``'s name), `sessions` (how many live sessions here ended: 0 or 1), `record` (`deleted`,
        /// `not found`, `failed (code)`: the account's record in the store, which the other processes on it follow).
        case accountEnded = "account.ended"
        /// A Sign in with Apple account's credential state was read (``AppleIDCredentialMonitor``): `state`
        /// (`authorized`, `revoked`, `notFound`, `transferred`, or `unknown (code)` when it could not be read).
        case appleIDChecked = "account.apple_id_checked"
        /// A back-channel logout token was received (``SessionManager/receiveBackChannelLogout(_:from:)``):
        /// `outcome` (`accepted`, or `refused` with `check`, the ``IDTokenCheck`` it failed), `by` (`sub`, `sid`,
        /// `sub+sid`), `ended` (how many accounts it ended). The token, its `sub` and its `sid` are never told.
        case backChannelLogout = "account.back_channel_logout"
        /// A request was refused because its session had ended: `kind` (the request's kind).
        case requestRefusedAfterEnd = "request.refused_after_end"
        /// A redirect left the origin and the session's credentials were withheld from it: `from`, `to` (origins),
        /// `status`.
        case credentialsWithheld = "redirect.credentials_withheld"
        /// A redirect was refused (`https` to plain `http`, too many hops): `from`, `to` (origins), `status`, `code`.
        case redirectRefused = "redirect.refused"
        /// A server refused a DPoP proof for its nonce (`use_dpop_nonce`, RFC 9449 §8, §9) and the request was sent
        /// once more with the nonce it gave: `endpoint` (`token`, `resource`), `origin`.
        case dpopNonceRetry = "dpop.nonce_retry"
    }

    /// When, on the wall clock of the session's ``SessionClock``.
    public let time: Date
    /// How much it matters.
    public let level: Level
    /// What happened.
    public let kind: Kind
    /// The account it is about, if any.
    public let account: Account?
    /// Names, codes, durations and counts, by name; see ``Kind`` for which each kind carries.
    public let fields: [String: String]

    /// An event.
    ///
    /// - Parameters:
    ///   - time: When.
    ///   - level: How much it matters.
    ///   - kind: What happened.
    ///   - account: The account it is about.
    ///   - fields: Its details; never a secret.
    public init(time: Date, level: Level, kind: Kind, account: Account?, fields: [String: String] = [:]) {
        self.time = time
        self.level = level
        self.kind = kind
        self.account = account
        self.fields = fields
    }

    /// One line: the time, the level, the kind, the account, then the fields in name order.
    public var description: String {
        var line = "\(Self.timestamp(time)) \(level) \(kind.rawValue)"
        if let account { line += " account=\(account.subject)@\(account.issuer)" }
        for name in fields.keys.sorted() { line += " \(name)=\(fields[name] ?? "")" }
        return line
    }

    /// The event as one line of JSON: `time` (ISO 8601 with milliseconds), `level`, `kind`, `issuer` and
    /// `subject` when there is an account, and `fields`.
    public var jsonLine: String {
        var members: [String: JSONValue] = [
            "time": .string(Self.timestamp(time)), "level": .string(level.description), "kind": .string(kind.rawValue),
            "fields": .object(fields.mapValues { .string($0) }),
        ]
        if let account {
            members["issuer"] = .string(account.issuer)
            members["subject"] = .string(account.subject)
        }
        return JSONValue.object(members).serialized
    }

    /// Reads a line ``jsonLine`` wrote; `nil` for anything else.
    ///
    /// - Parameter line: The line.
    public init?(jsonLine line: String) {
        guard case .object(let members)? = try? JSONParser.parse(Array(line.utf8)),
            case .string(let timeText)? = members["time"], let time = Self.date(timeText),
            case .string(let levelName)? = members["level"],
            let level = Level.allCases.first(where: { $0.description == levelName }),
            case .string(let kindName)? = members["kind"], let kind = Kind(rawValue: kindName)
        else { return nil }
        var account: Account?
        if case .string(let issuer)? = members["issuer"], case .string(let subject)? = members["subject"] {
            account = Account(issuer: issuer, subject: subject)
        }
        var fields: [String: String] = [:]
        if case .object(let values)? = members["fields"] {
            for (name, value) in values { if case .string(let text) = value { fields[name] = text } }
        }
        self.init(time: time, level: level, kind: kind, account: account, fields: fields)
    }

    private static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    private static func date(_ text: String) -> Date? {
        try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)
    }
}
