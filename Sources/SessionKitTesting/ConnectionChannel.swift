import SessionKit

/// The part of a connection that the I/O thread and the task answering its current request share.
///
/// A handler's task writes its response straight to the socket when nothing is queued ahead of it: the write
/// is non-blocking, so it never holds a cooperative thread, and the common case costs no wake-up of the I/O
/// thread. Whatever the socket does not take at once is queued here for the I/O thread to finish.
///
/// - Important: Only the I/O thread closes the descriptor, and it does so under this lock after setting
///   `isClosed`; every write happens under the same lock after checking it. So no task can ever write to a
///   descriptor number the system has already given to something else.
final class ConnectionChannel: Sendable {
    /// What the I/O thread needs to know to decide what the connection waits for next.
    struct Snapshot {
        var isResponding: Bool
        var hasOutput: Bool
        var closeAfterOutput: Bool
        var writeFailed: Bool
        var lastResponseAt: ContinuousClock.Instant?
        var outputSince: ContinuousClock.Instant?
    }

    private struct State {
        var isClosed = false
        var output: [UInt8] = []
        var outputStart = 0
        /// When the queued output last moved (or was queued): a reader that stops reading is timed out.
        var outputSince: ContinuousClock.Instant?
        var isResponding = false
        var closeAfterOutput = false
        var writeFailed = false
        /// The I/O thread has buffered bytes it will parse only once the current response is handed over.
        var loopNeedsNotice = false
        var lastResponseAt: ContinuousClock.Instant?
        var task: Task<Void, Never>?

        var hasOutput: Bool { outputStart < output.count }
    }

    /// The connection's number, as ``LocalServer/Request/connectionID`` reports it.
    let id: Int
    /// The socket; owned by the I/O thread, written by tasks only under the lock.
    let descriptor: Int32
    private let state = Lock(State())

    init(id: Int, descriptor: Int32) {
        self.id = id
        self.descriptor = descriptor
    }

    // MARK: - Handler side

    /// Hands over a finished response: writes what the socket takes now and queues the rest.
    ///
    /// - Parameters:
    ///   - bytes: The serialized response (may be empty, to close without answering).
    ///   - closeAfterwards: Whether the connection closes once the bytes are written.
    /// - Returns: Whether the I/O thread must be woken to act on the connection.
    func complete(with bytes: [UInt8], closeAfterwards: Bool) -> Bool {
        state.withLock { state in
            guard !state.isClosed else { return false }
            state.isResponding = false
            state.task = nil
            state.lastResponseAt = .now
            Self.send(bytes, on: descriptor, state: &state)
            if closeAfterwards { state.closeAfterOutput = true }
            let notify = state.loopNeedsNotice || state.closeAfterOutput || state.hasOutput || state.writeFailed
            state.loopNeedsNotice = false
            return notify
        }
    }

    /// What ``stream(_:)`` did with the bytes.
    enum StreamOutcome {
        /// The socket took them all.
        case sent
        /// Some wait in the queue, for the I/O thread to write.
        case queued
        /// The connection is closed (or a write failed): nobody reads any more.
        case closed
    }

    /// Writes part of a response that is still being produced: what the socket takes now, the rest queued, and
    /// the connection stays busy with the current request.
    ///
    /// - Parameter bytes: The next bytes of the response.
    /// - Returns: What became of them.
    func stream(_ bytes: [UInt8]) -> StreamOutcome {
        state.withLock { state in
            guard !state.isClosed, !state.writeFailed else { return .closed }
            Self.send(bytes, on: descriptor, state: &state)
            if state.writeFailed { return .closed }
            return state.hasOutput ? .queued : .sent
        }
    }

    // MARK: - I/O thread side

    /// Marks the connection as answering a request, before its task exists.
    ///
    /// - Parameter noticeWhenDone: Whether input is already buffered, so the task must wake the I/O thread
    ///   when it hands the response over.
    func beginResponse(noticeWhenDone: Bool) {
        state.withLock { state in
            state.isResponding = true
            state.loopNeedsNotice = noticeWhenDone
        }
    }

    /// Remembers the task answering the current request, so closing the connection can cancel it.
    ///
    /// - Parameter task: The task; ignored if it already finished.
    func attach(_ task: Task<Void, Never>) {
        state.withLock { state in
            if state.isResponding && !state.isClosed { state.task = task }
        }
    }

    /// Queues bytes the I/O thread sends on its own (an interim or an error response) and writes what it can.
    ///
    /// - Parameters:
    ///   - bytes: The bytes.
    ///   - closeAfterwards: Whether the connection closes once they are written.
    func enqueue(_ bytes: [UInt8], closeAfterwards: Bool) {
        state.withLock { state in
            guard !state.isClosed else { return }
            Self.send(bytes, on: descriptor, state: &state)
            if closeAfterwards { state.closeAfterOutput = true }
        }
    }

    /// Writes queued output the socket can take now.
    func flush() {
        state.withLock { state in
            guard !state.isClosed else { return }
            Self.send([], on: descriptor, state: &state)
        }
    }

    /// Reads the connection's state; if a response is being prepared and `wantsNotice`, asks its task to wake
    /// the I/O thread when it hands the response over.
    ///
    /// - Parameter wantsNotice: Whether the I/O thread has buffered input waiting for the response.
    /// - Returns: The state.
    func snapshot(wantsNotice: Bool = false) -> Snapshot {
        state.withLock { state in
            if wantsNotice && state.isResponding { state.loopNeedsNotice = true }
            return Snapshot(
                isResponding: state.isResponding, hasOutput: state.hasOutput,
                closeAfterOutput: state.closeAfterOutput, writeFailed: state.writeFailed,
                lastResponseAt: state.lastResponseAt, outputSince: state.outputSince)
        }
    }

    /// Closes the socket for good and returns the task still answering on it, for the caller to cancel.
    ///
    /// - Returns: The running task, if any.
    func close() -> Task<Void, Never>? {
        state.withLock { state in
            guard !state.isClosed else { return nil }
            state.isClosed = true
            state.output = []
            state.outputStart = 0
            Socket.close(descriptor)
            defer { state.task = nil }
            return state.task
        }
    }

    private static func send(_ bytes: [UInt8], on descriptor: Int32, state: inout State) {
        guard !state.writeFailed else { return }
        if !state.hasOutput {
            // Fast path: nothing queued, so these bytes go first and are copied only if the socket is full.
            var sent = 0
            bytes.withUnsafeBytes { buffer in
                sent = write(buffer, on: descriptor, state: &state)
            }
            state.output.removeAll(keepingCapacity: true)
            state.outputStart = 0
            if sent < bytes.count && !state.writeFailed {
                state.output.append(contentsOf: bytes[sent...])
                state.outputSince = .now
            } else {
                state.outputSince = nil
            }
            return
        }
        state.output.append(contentsOf: bytes)
        let start = state.outputStart
        var sent = 0
        let output = state.output
        output.withUnsafeBytes { buffer in
            sent = write(UnsafeRawBufferPointer(rebasing: buffer[start...]), on: descriptor, state: &state)
        }
        if sent > 0 { state.outputSince = .now }
        state.outputStart += sent
        if !state.hasOutput || state.writeFailed {
            state.output = []
            state.outputStart = 0
            state.outputSince = nil
        } else if state.outputStart > 64 * 1024 && state.outputStart * 2 > state.output.count {
            state.output.removeSubrange(0..<state.outputStart)
            state.outputStart = 0
        }
    }

    /// Writes until the socket is full; returns how many bytes it took and records a failure.
    private static func write(_ buffer: UnsafeRawBufferPointer, on descriptor: Int32, state: inout State) -> Int {
        var sent = 0
        while sent < buffer.count {
            switch Socket.write(descriptor, UnsafeRawBufferPointer(rebasing: buffer[sent...])) {
            case .transferred(let count):
                sent += count
            case .wouldBlock, .endOfStream:
                return sent
            case .failed:
                state.writeFailed = true
                return sent
            }
        }
        return sent
    }
}
