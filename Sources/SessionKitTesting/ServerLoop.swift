import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The I/O thread of a ``LocalServer``: one `poll` loop over the listener, the wake pipe and every connection.
///
/// It accepts, reads, parses, enforces limits and timeouts, starts one task per complete request, and closes.
/// Handlers run as tasks on the cooperative pool and usually write their own response (see
/// ``ConnectionChannel``); this thread never waits on anything but `poll`, and no task ever waits on a socket.
/// One request per connection is answered at a time, so pipelined requests are answered in order.
final class ServerLoop {
    private static let readBufferSize = 64 * 1024
    /// Input buffered while a handler runs, beyond which the thread stops reading that connection.
    private static let maximumBufferedWhileResponding = 1 << 20
    private static let maximumAcceptsPerWake = 256
    /// The longest a closing connection waits for its peer to close.
    private static let maximumLinger = Duration.seconds(2)

    private let core: ServerCore
    private let listener: Int32
    private let wakeDescriptor: Int32
    private let limits: HTTPParser.Limits
    private let configuration: LocalServer.Configuration
    private var connections: [Int: Connection] = [:]
    private var nextConnectionID = 1
    private var acceptPausedUntil: ContinuousClock.Instant?
    private var descriptors: [pollfd] = []
    private var polled: [Connection] = []
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBufferSize, alignment: 16)
    private var now = ContinuousClock.now

    init(core: ServerCore, listener: Int32, wakeDescriptor: Int32) {
        self.core = core
        self.listener = listener
        self.wakeDescriptor = wakeDescriptor
        configuration = core.configuration
        limits = HTTPParser.Limits(
            maximumHeaderBytes: configuration.maximumHeaderBytes, maximumBodyBytes: configuration.maximumBodyBytes)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Serves until asked to stop, then closes every socket.
    func run() {
        while true {
            let mail = core.takeMail()
            if mail.stop { break }
            now = .now
            for id in mail.ready {
                if let connection = connections[id] { advance(connection) }
            }
            descriptors.removeAll(keepingCapacity: true)
            polled.removeAll(keepingCapacity: true)
            descriptors.append(pollfd(fd: wakeDescriptor, events: Int16(POLLIN), revents: 0))
            var nearest: ContinuousClock.Instant?
            if let paused = acceptPausedUntil, paused > now {
                nearest = paused
            } else {
                acceptPausedUntil = nil
                descriptors.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0))
            }
            let listenerPolled = acceptPausedUntil == nil
            var expired: [Connection] = []
            for connection in connections.values {
                let (events, deadline) = interest(in: connection)
                if deadline <= now {
                    expired.append(connection)
                    continue
                }
                nearest = min(nearest ?? deadline, deadline)
                descriptors.append(pollfd(fd: connection.channel.descriptor, events: events, revents: 0))
                polled.append(connection)
            }
            if !expired.isEmpty {
                for connection in expired { timeOut(connection) }
                continue
            }
            let timeout = nearest.map { Self.milliseconds(from: now, to: $0) } ?? -1
            // Timeouts and EINTR both come back here; deadlines are re-checked on the next turn.
            guard Socket.poll(&descriptors, timeoutMilliseconds: timeout) > 0 else { continue }
            now = .now
            if descriptors[0].revents != 0 { Socket.drain(wakeDescriptor) }
            if listenerPolled && descriptors[1].revents != 0 { acceptConnections() }
            let base = listenerPolled ? 2 : 1
            for (offset, connection) in polled.enumerated() {
                let events = descriptors[base + offset].revents
                if events != 0 && !connection.isClosed { handle(connection, events: events) }
            }
        }
        Socket.close(listener)
        for connection in Array(connections.values) { close(connection) }
        Socket.close(wakeDescriptor)
        core.finishStopping()
    }

    // MARK: - Events

    private func acceptConnections() {
        for _ in 0..<Self.maximumAcceptsPerWake {
            switch Socket.accept(from: listener) {
            case .accepted(let descriptor):
                let id = nextConnectionID
                nextConnectionID += 1
                let channel = ConnectionChannel(id: id, descriptor: descriptor)
                connections[id] = Connection(channel: channel, limits: limits, now: now)
            case .wouldBlock:
                return
            case .failed(let code):
                // Out of descriptors or memory: the listener stays readable, so back off instead of spinning.
                if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                    acceptPausedUntil = now + .milliseconds(100)
                }
                return
            }
        }
    }

    private func handle(_ connection: Connection, events: Int16) {
        switch connection.phase {
        case .draining:
            while true {
                switch Socket.read(connection.channel.descriptor, into: readBuffer) {
                case .transferred: continue
                case .wouldBlock: return
                case .endOfStream, .failed: return close(connection)
                }
            }
        case .open:
            if events & Int16(POLLOUT) != 0 { connection.channel.flush() }
            if events & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                readAvailable(connection)
                if connection.isClosed { return }
            }
            advance(connection)
        }
    }

    private func readAvailable(_ connection: Connection) {
        for _ in 0..<16 {
            switch Socket.read(connection.channel.descriptor, into: readBuffer) {
            case .transferred(let count):
                connection.parser.append(UnsafeRawBufferPointer(rebasing: readBuffer[..<count]))
                connection.lastActivity = now
                if count < readBuffer.count { return }
            case .wouldBlock:
                return
            case .endOfStream, .failed:
                // The client is gone (or half-closed): nobody will read an answer, so its handler is cancelled.
                return close(connection)
            }
        }
    }

    /// Decides what an open connection does next: finish closing, wait for its handler, or parse the next
    /// request out of what is buffered.
    private func advance(_ connection: Connection) {
        guard case .open = connection.phase, !connection.isClosed else { return }
        let state = connection.channel.snapshot(wantsNotice: connection.parser.bufferedByteCount > 0)
        if state.writeFailed { return close(connection) }
        if state.closeAfterOutput {
            if !state.hasOutput { beginDraining(connection) }
            return
        }
        if state.isResponding { return }
        while true {
            do {
                switch try connection.parser.next() {
                case .needMoreData:
                    connection.requestStartedAt =
                        connection.parser.isMidRequest ? connection.requestStartedAt ?? now : nil
                    return
                case .expectsContinue:
                    connection.channel.enqueue(HTTPResponseSerializer.continueBytes, closeAfterwards: false)
                case .message(let message):
                    connection.requestStartedAt = nil
                    return dispatch(message, on: connection)
                }
            } catch {
                return fail(connection, status: error.status, reason: error.reason)
            }
        }
    }

    private func dispatch(_ message: HTTPParser.Message, on connection: Connection) {
        let request = LocalServer.Request(
            method: message.method, target: message.target, headers: message.headers, body: Data(message.body),
            arrivedAt: now, arrivedAtDate: Date(), connectionID: connection.id, version: message.version.description)
        core.record(request)
        let channel = connection.channel
        channel.beginResponse(noticeWhenDone: connection.parser.bufferedByteCount > 0)
        connection.respondingCheck = now + configuration.idleTimeout
        let core = self.core
        let keepAlive = message.keepAlive
        let task = Task { await core.respond(to: request, on: channel, keepAlive: keepAlive) }
        channel.attach(task)
    }

    /// Answers with an error status and closes once the answer is written.
    private func fail(_ connection: Connection, status: Int, reason: String) {
        connection.channel.enqueue(
            HTTPResponseSerializer.serializeError(status: status, reason: reason), closeAfterwards: true)
        advance(connection)
    }

    private func beginDraining(_ connection: Connection) {
        Socket.shutdownWriting(connection.channel.descriptor)
        connection.phase = .draining(deadline: now + min(configuration.requestTimeout, Self.maximumLinger))
    }

    private func close(_ connection: Connection) {
        guard !connection.isClosed else { return }
        connection.isClosed = true
        connections[connection.id] = nil
        connection.channel.close()?.cancel()
    }

    // MARK: - Deadlines

    /// What to poll a connection for, and when it times out.
    private func interest(in connection: Connection) -> (events: Int16, deadline: ContinuousClock.Instant) {
        switch connection.phase {
        case .draining(let deadline):
            return (Int16(POLLIN), deadline)
        case .open:
            let state = connection.channel.snapshot()
            var events: Int16 = 0
            if state.hasOutput { events |= Int16(POLLOUT) }
            if !state.isResponding || connection.parser.bufferedByteCount < Self.maximumBufferedWhileResponding {
                events |= Int16(POLLIN)
            }
            return (events, deadline(of: connection, state: state))
        }
    }

    private func deadline(of connection: Connection, state: ConnectionChannel.Snapshot) -> ContinuousClock.Instant {
        if state.hasOutput {
            // A client that stops reading its response is treated like one that stops sending its request.
            return (state.outputSince ?? now) + configuration.requestTimeout
        }
        if state.isResponding {
            return connection.respondingCheck ?? now + configuration.idleTimeout
        }
        if connection.parser.isMidRequest {
            return (connection.requestStartedAt ?? now) + configuration.requestTimeout
        }
        let lastActivity = max(connection.lastActivity, state.lastResponseAt ?? connection.lastActivity)
        return lastActivity + configuration.idleTimeout
    }

    private func timeOut(_ connection: Connection) {
        guard case .open = connection.phase else { return close(connection) }
        let state = connection.channel.snapshot()
        // The state may have moved on since the deadline was computed.
        guard deadline(of: connection, state: state) <= now else { return }
        if state.hasOutput || state.closeAfterOutput {
            close(connection)
        } else if state.isResponding {
            connection.respondingCheck = now + configuration.idleTimeout
        } else if connection.parser.isMidRequest {
            fail(connection, status: 408, reason: "the request did not arrive within \(configuration.requestTimeout)")
        } else {
            close(connection)
        }
    }

    private static func milliseconds(from now: ContinuousClock.Instant, to deadline: ContinuousClock.Instant) -> Int32 {
        let (seconds, attoseconds) = (deadline - now).components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: max(0, milliseconds))
    }
}
