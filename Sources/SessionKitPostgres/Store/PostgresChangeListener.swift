import Foundation
import SessionKit

#if canImport(Glibc)
    import Glibc
#endif

/// Listens on `sessionkit_changes` on a connection and a thread of its own, and calls the handler for each batch of
/// notices: the accounts they name, and whether this process sent all of them.
///
/// The thread sleeps in `poll` on the connection's socket and a stop pipe: nothing runs while nothing is announced.
/// Every 30 seconds of silence it asks the server `SELECT 1`, so a connection that died without a word is found. A
/// connection that drops (or never opened) is tried again after 50 ms, doubling to 2 seconds, for as long as the
/// listener runs. Each time it starts listening, the first time included, the handler is told to check every
/// account: notices sent before (while it connected, or while it was away) reached no one.
final class PostgresChangeListener: StoreChangeWatch {
    /// The write end of the pipe whose byte stops the thread; the thread owns and closes the read end.
    private let stopWrite: Int32
    private let stopped = Lock(false)

    /// How long the thread sleeps without a notice before it checks the connection.
    static let heartbeat = Duration.seconds(30)

    /// Starts the thread; `nil` when no pipe can be made (no descriptors left).
    init?(
        connectionString: String, answerTimeout: Duration = PostgresConnection.defaultAnswerTimeout,
        onChange: @escaping @Sendable (StoreChange) -> Void
    ) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        stopWrite = fds[1]
        let stopRead = fds[0]
        let thread = Thread {
            Self.run(
                connectionString: connectionString, answerTimeout: answerTimeout, stop: stopRead, onChange: onChange)
        }
        thread.name = "SessionKit.PostgresChangeListener"
        thread.start()
    }

    deinit { stop() }

    func stop() {
        guard
            stopped.withLock({ stopped in
                defer { stopped = true }
                return !stopped
            })
        else { return }
        var byte: UInt8 = 0
        _ = write(stopWrite, &byte, 1)
        _ = close(stopWrite)
    }

    /// The listener's thread.
    private static func run(
        connectionString: String, answerTimeout: Duration, stop: Int32, onChange: @Sendable (StoreChange) -> Void
    ) {
        defer { _ = close(stop) }
        var connection: PostgresConnection?
        defer { connection?.close() }
        var pause = Duration.milliseconds(50)
        while true {
            guard let listening = connection else {
                do {
                    let opened = try PostgresConnection(
                        connectionString: connectionString, answerTimeout: answerTimeout)
                    _ = try opened.execute("LISTEN \(PostgresCoordination.channel)")
                    connection = opened
                    pause = .milliseconds(50)
                    // Every time it starts listening, the first time included: a notice sent before (while it
                    // connected, or while it was away) reached no one, so every live session is read once.
                    onChange(StoreChange(scope: .everyAccount, fromThisProcess: false))
                } catch {
                    if sleep(pause, orUntil: stop) { return }
                    pause = min(pause * 2, .seconds(2))
                }
                continue
            }
            switch listening.waitForInput(timeout: heartbeat, stopDescriptor: stop) {
            case .stopped:
                return
            case .timedOut:
                if (try? listening.execute("SELECT 1")) == nil { drop(&connection) }
                continue
            case .readable:
                break
            }
            do {
                let notices = try listening.notifications()
                if let change = change(of: notices) { onChange(change) }
            } catch {
                drop(&connection)
            }
        }
    }

    private static func drop(_ connection: inout PostgresConnection?) {
        connection?.close()
        connection = nil
    }

    /// One change for a batch of notices; `nil` for none. A payload that is not `<sender> <tag>` asks for every
    /// account: a notice decides nothing, so reading more is the safe side.
    static func change(of notices: [PostgresNotification]) -> StoreChange? {
        guard !notices.isEmpty else { return nil }
        var scope: StoreChange.Scope?
        var own = true
        for notice in notices where notice.channel == PostgresCoordination.channel {
            let parts = notice.payload.split(separator: " ", omittingEmptySubsequences: false)
            let named: StoreChange.Scope =
                parts.count == 2 && !parts[1].isEmpty ? .accounts([String(parts[1])]) : .everyAccount
            own = own && parts.first.map(String.init) == PostgresCoordination.sender
            scope = scope.map { $0.union(named) } ?? named
        }
        return scope.map { StoreChange(scope: $0, fromThisProcess: own) }
    }

    /// Sleeps `duration` unless the stop pipe is written first; `true` when it was.
    private static func sleep(_ duration: Duration, orUntil stop: Int32) -> Bool {
        var descriptor = pollfd(fd: stop, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(duration / .milliseconds(1))
        while true {
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }
}
