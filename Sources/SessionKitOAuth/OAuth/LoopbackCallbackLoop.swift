import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The blocking `poll` loop behind ``LoopbackRedirectListener``: it runs on a thread of its own, serves every
/// connection side by side (a silent one never delays another), and ends with the first callback answered, the
/// deadline, the wake pipe (cancellation) or a system failure. Whatever ends it, every descriptor it owns is
/// closed when ``run()`` returns.
package struct LoopbackCallbackLoop {
    /// How the wait ended.
    package enum Outcome {
        /// The one callback arrived and was answered; the code, or why it was refused.
        case delivered(Result<String, SessionError>)
        /// The deadline passed first.
        case timedOut
        /// The wake pipe was signalled: the waiting task was cancelled.
        case cancelled
        /// A system call failed.
        case failed(SessionError)
    }

    /// Connections served at once; more wait in the kernel's backlog until one of these ends.
    package static let maximumConnections = 16
    /// How long the loop stops accepting after `accept` failed (out of descriptors): a failing `accept` on a
    /// readable listener would otherwise spin.
    package static let acceptBackoff = Duration.milliseconds(100)

    private struct Connection {
        enum Phase { case reading, writing, draining }

        let descriptor: Int32
        let deadline: ContinuousClock.Instant
        var phase = Phase.reading
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        /// Whether this connection carries the one callback: the loop ends once its answer is sent.
        var isCallback = false
    }

    /// The listening socket; `nil` once closed (the callback arrived: a second one finds nothing listening).
    package var listener: Int32?
    /// The reading end of the wake pipe (owned by the listener's storage, not closed here).
    package let wake: Int32
    /// The callback path, such as `/callback`.
    package let path: String
    /// `127.0.0.1:PORT`.
    package let authority: String
    /// The listener's own deadline.
    package let deadline: ContinuousClock.Instant
    /// How long one connection may take from its acceptance to the end of its answer.
    package let connectionTimeout: Duration
    /// The pages for a delivered code and for a refused callback.
    package let successPage: [UInt8]
    package let failurePage: [UInt8]
    /// Reads the callback URL: the code, or the typed reason it is refused.
    package let readCallback: @Sendable (URL) -> Result<String, SessionError>
    /// Whether the waiting task was cancelled.
    package let isCancelled: @Sendable () -> Bool

    private var connections: [Connection] = []
    private var delivered: Result<String, SessionError>?
    private var acceptPausedUntil: ContinuousClock.Instant?

    package init(
        listener: Int32, wake: Int32, path: String, authority: String, deadline: ContinuousClock.Instant,
        connectionTimeout: Duration, successPage: [UInt8], failurePage: [UInt8],
        readCallback: @escaping @Sendable (URL) -> Result<String, SessionError>,
        isCancelled: @escaping @Sendable () -> Bool
    ) {
        self.listener = listener
        self.wake = wake
        self.path = path
        self.authority = authority
        self.deadline = deadline
        self.connectionTimeout = connectionTimeout
        self.successPage = successPage
        self.failurePage = failurePage
        self.readCallback = readCallback
        self.isCancelled = isCancelled
    }

    /// Serves connections until the wait ends; closes the listener and every connection before it returns.
    package mutating func run() -> Outcome {
        defer {
            for connection in connections { LoopbackSocket.close(connection.descriptor) }
            connections.removeAll()
            closeListener()
        }
        while true {
            if isCancelled() { return .cancelled }
            let now = ContinuousClock.now
            connections.removeAll { connection in
                guard connection.deadline <= now else { return false }
                LoopbackSocket.close(connection.descriptor)  // silent, slow, or not reading its answer
                return true
            }
            if let delivered, !connections.contains(where: \.isCallback) { return .delivered(delivered) }
            if delivered == nil, now >= deadline { return .timedOut }

            var descriptors = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            let accepting =
                listener != nil && connections.count < Self.maximumConnections
                && acceptPausedUntil.map { $0 <= now } ?? true
            if accepting, let listener { descriptors.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
            for connection in connections {
                let events = connection.phase == .writing ? POLLOUT : POLLIN
                descriptors.append(pollfd(fd: connection.descriptor, events: Int16(events), revents: 0))
            }
            var wakeAt = connections.map(\.deadline).min() ?? deadline
            if delivered == nil { wakeAt = min(wakeAt, deadline) }
            if let paused = acceptPausedUntil, paused > now { wakeAt = min(wakeAt, paused) }
            if LoopbackSocket.poll(&descriptors, milliseconds: Self.milliseconds(until: wakeAt, from: now)) < 0 {
                let code = errno
                if code == EINTR { continue }
                return .failed(LoopbackSocket.Failure(operation: "poll", code: code).sessionError("loopback listener"))
            }
            if descriptors[0].revents != 0 { continue }  // cancelled: the next turn sees it
            if accepting, descriptors[1].revents != 0 { acceptWaiting() }
            let ready = Set(descriptors.dropFirst(accepting ? 2 : 1).filter { $0.revents != 0 }.map(\.fd))
            var index = 0
            while index < connections.count {
                guard ready.contains(connections[index].descriptor) else {
                    index += 1
                    continue
                }
                var connection = connections[index]
                if serve(&connection) {
                    connections[index] = connection
                    index += 1
                } else {
                    LoopbackSocket.close(connection.descriptor)
                    connections.remove(at: index)
                }
            }
        }
    }

    /// Accepts every waiting connection there is room for.
    private mutating func acceptWaiting() {
        guard let listener else { return }
        while connections.count < Self.maximumConnections {
            switch LoopbackSocket.accept(listener) {
            case .done(let descriptor):
                let accepted = Connection(
                    descriptor: Int32(descriptor), deadline: ContinuousClock.now.advanced(by: connectionTimeout))
                connections.append(accepted)
            case .wouldBlock, .endOfStream:
                return
            case .failed:
                acceptPausedUntil = ContinuousClock.now.advanced(by: Self.acceptBackoff)
                return
            }
        }
    }

    /// Moves one ready connection on.
    ///
    /// - Returns: Whether the connection stays open.
    private mutating func serve(_ connection: inout Connection) -> Bool {
        switch connection.phase {
        case .reading:
            let searchFrom = connection.input.count
            guard readAvailable(&connection, keeping: true) else { return false }
            if let length = LoopbackHTTP.headLength(in: connection.input, searchFrom: searchFrom),
                length <= LoopbackHTTP.maximumHeadSize
            {
                answer(
                    &connection,
                    LoopbackHTTP.verdict(head: connection.input[..<length], path: path, authority: authority))
            } else if !LoopbackHTTP.canBeRequest(connection.input) {
                respond(&connection, status: 400, page: nil)
            } else if connection.input.count >= LoopbackHTTP.maximumHeadSize {
                respond(&connection, status: 431, page: nil)
            } else {
                return true
            }
            return write(&connection)
        case .writing:
            return write(&connection)
        case .draining:
            return readAvailable(&connection, keeping: false)
        }
    }

    /// Reads what is there; `false` when the peer closed or the read failed.
    private func readAvailable(_ connection: inout Connection, keeping: Bool) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let result = chunk.withUnsafeMutableBytes { LoopbackSocket.read(connection.descriptor, into: $0) }
            switch result {
            case .done(let count):
                if keeping { connection.input += chunk[..<count] }
                // A head that cannot fit is answered at once; nothing past the limit is buffered.
                if keeping, connection.input.count >= LoopbackHTTP.maximumHeadSize { return true }
            case .wouldBlock:
                return true
            case .endOfStream, .failed:
                return false
            }
        }
    }

    private mutating func answer(_ connection: inout Connection, _ verdict: LoopbackHTTP.Verdict) {
        switch verdict {
        case .callback(let target):
            guard let url = URL(string: "http://\(authority)\(target)") else {
                respond(&connection, status: 400, page: nil)
                return
            }
            guard delivered == nil else {
                respond(&connection, status: 409, page: failurePage)  // a second callback raced in: not delivered
                return
            }
            // One callback only: from here on, a connection attempt is refused.
            closeListener()
            let result = readCallback(url)
            delivered = result
            connection.isCallback = true
            if case .success = result {
                respond(&connection, status: 200, page: successPage)
            } else {
                respond(&connection, status: 400, page: failurePage)
            }
        case .notFound: respond(&connection, status: 404, page: nil)
        case .methodNotAllowed: respond(&connection, status: 405, page: nil)
        case .misdirected: respond(&connection, status: 421, page: nil)
        case .badRequest: respond(&connection, status: 400, page: nil)
        }
    }

    private func respond(_ connection: inout Connection, status: Int, page: [UInt8]?) {
        connection.output = LoopbackHTTP.response(
            status: status, body: page ?? LoopbackHTTP.plainBody(status: status), isPage: page != nil)
        connection.input = []
        connection.phase = .writing
    }

    /// Sends what the socket takes; once all is sent, half-closes and drains what the peer still sends (so
    /// closing does not reset the connection before the peer read the answer), or ends a callback connection.
    ///
    /// - Returns: Whether the connection stays open.
    private func write(_ connection: inout Connection) -> Bool {
        while connection.written < connection.output.count {
            let result = connection.output.withUnsafeBytes {
                LoopbackSocket.write(connection.descriptor, UnsafeRawBufferPointer(rebasing: $0[connection.written...]))
            }
            switch result {
            case .done(let count): connection.written += count
            case .wouldBlock: return true
            case .endOfStream, .failed: return false
            }
        }
        LoopbackSocket.shutdownWriting(connection.descriptor)
        if connection.isCallback { return false }
        connection.phase = .draining
        return readAvailable(&connection, keeping: false)
    }

    private mutating func closeListener() {
        if let listener { LoopbackSocket.close(listener) }
        listener = nil
    }

    /// `poll`'s timeout: rounded up, so the loop never wakes just before a deadline and turns without waiting.
    package static func milliseconds(until instant: ContinuousClock.Instant, from now: ContinuousClock.Instant) -> Int32
    {
        let remaining = now.duration(to: instant)
        guard remaining > .zero else { return 0 }
        let (seconds, attoseconds) = remaining.components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(1, milliseconds))
    }
}
