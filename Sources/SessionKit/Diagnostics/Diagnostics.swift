import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a manager and its sessions send their ``DiagnosticEvent``s: off unless the app sets one in
/// ``UserSession/Configuration/diagnostics``.
///
/// ```swift
/// var sessions = UserSession.Configuration()
/// sessions.diagnostics = .lines(level: .info, format: .jsonLines)  // standard error, one JSON line per event
/// let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth,
///                                                   sessionConfiguration: sessions))
/// ```
///
/// Events are handed to the handler on a serial queue of the sink's own, in the order they happened: never on the
/// thread that sends a request, and never while SessionKit holds a lock, so a handler may read the manager. With no
/// sink the cost on the request path is one `nil` check.
public final class Diagnostics: Sendable {
    /// The lowest level handed to the handler.
    public let level: DiagnosticEvent.Level
    private let handler: @Sendable (DiagnosticEvent) -> Void
    /// What ``flush()`` does on the queue once every earlier event was handled: a file sink syncs its file.
    private let onFlush: (@Sendable () -> Void)?
    private let queue = DispatchQueue(label: "SessionKit.Diagnostics")

    /// A sink that hands every event at `level` or above to `handler`.
    ///
    /// - Parameters:
    ///   - level: The lowest level kept; `.info` by default.
    ///   - handler: Called once per event, in order, on the sink's queue.
    public init(level: DiagnosticEvent.Level = .info, handler: @escaping @Sendable (DiagnosticEvent) -> Void) {
        self.level = level
        self.handler = handler
        self.onFlush = nil
    }

    init(
        level: DiagnosticEvent.Level, handler: @escaping @Sendable (DiagnosticEvent) -> Void,
        onFlush: @escaping @Sendable () -> Void
    ) {
        self.level = level
        self.handler = handler
        self.onFlush = onFlush
    }

    /// How ``lines(level:format:write:)`` writes an event.
    public enum LineFormat: Sendable {
        /// ``DiagnosticEvent/description``: time, level, kind, account, fields.
        case text
        /// ``DiagnosticEvent/jsonLine``, which `sessionkit timeline` reads back.
        case jsonLines
    }

    /// A sink that writes one line per event, to standard error unless `write` says otherwise.
    ///
    /// - Parameters:
    ///   - level: The lowest level kept.
    ///   - format: Text or JSON lines.
    ///   - write: Takes each line, without its newline; standard error by default.
    /// - Returns: The sink.
    public static func lines(
        level: DiagnosticEvent.Level = .info, format: LineFormat = .text,
        write: (@Sendable (String) -> Void)? = nil
    ) -> Diagnostics {
        let write = write ?? { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        return Diagnostics(level: level) { event in
            write(format == .jsonLines ? event.jsonLine : event.description)
        }
    }

    /// Waits until every event emitted before this call has been handed to the handler (and, for a
    /// ``file(at:level:)`` sink, written and synced). ``SessionManager/finishPendingWork(within:)`` calls it last.
    public func flush() {
        queue.sync { onFlush?() }
    }

    /// Emits an event at `level`, if the sink keeps that level; `fields` is evaluated only then.
    func emit(
        _ level: DiagnosticEvent.Level, _ kind: DiagnosticEvent.Kind, account: Account?, at time: Date,
        _ fields: @autoclosure () -> [String: String] = [:]
    ) {
        guard level >= self.level else { return }
        let event = DiagnosticEvent(time: time, level: level, kind: kind, account: account, fields: fields())
        let handler = handler
        queue.async { handler(event) }
    }
}

extension Duration {
    /// Whole milliseconds, rounded down, for an event's field.
    var diagnosticMilliseconds: String {
        let (seconds, attoseconds) = components
        return String(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}

#if canImport(os)
    import os

    extension Diagnostics {
        /// A sink that logs to the unified logging system (`os.Logger`): subsystem `subsystem`, one category per
        /// area (`state`, `refresh`, `lock`, `restore`, `store`, `storage`, `sign_out`, `cross_process`,
        /// `request`, `redirect`), the level mapped to `OSLogType`. The account is logged `.private`; kinds and
        /// fields are names, codes and counts, logged `.public`.
        ///
        /// - Parameters:
        ///   - subsystem: The subsystem, such as your app's bundle identifier.
        ///   - level: The lowest level kept.
        /// - Returns: The sink.
        public static func logger(subsystem: String, level: DiagnosticEvent.Level = .info) -> Diagnostics {
            Diagnostics(level: level) { event in
                let category = String(event.kind.rawValue.prefix { $0 != "." })
                let logger = Logger(subsystem: subsystem, category: category)
                let account = event.account.map { "\($0.subject)@\($0.issuer)" } ?? "-"
                let fields = event.fields.keys.sorted().map { "\($0)=\(event.fields[$0] ?? "")" }
                    .joined(separator: " ")
                let type: OSLogType =
                    switch event.level {
                    case .debug: .debug
                    case .info: .info
                    case .notice: .default
                    case .warning: .error
                    case .error: .fault
                    }
                logger.log(
                    level: type,
                    "\(event.kind.rawValue, privacy: .public) account=\(account, privacy: .private) \(fields, privacy: .public)"
                )
            }
        }
    }
#endif
