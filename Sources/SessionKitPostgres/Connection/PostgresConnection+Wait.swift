#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension PostgresConnection {
    /// Why ``waitForInput(timeout:stopDescriptor:)`` returned.
    package enum WaitOutcome: Sendable, Equatable {
        /// The socket has input (or an error, or the connection is gone): call ``notifications()``.
        case readable
        /// The stop descriptor became readable; it is checked first, so a stop is never missed for input.
        case stopped
        /// The timeout passed with neither.
        case timedOut
    }

    /// Sleeps in `poll` until the server sends something, `stopDescriptor` becomes readable, or `timeout` passes;
    /// a listener's wait that neither spins nor needs a thread of its own to be interrupted.
    ///
    /// Call ``notifications()`` first: input already read with a statement's result no longer wakes the socket.
    ///
    /// - Parameters:
    ///   - timeout: The longest wait; `nil` waits without end.
    ///   - stopDescriptor: A descriptor whose readability ends the wait (a pipe's read end); `-1` for none. It is
    ///     not read: emptying it is the caller's.
    /// - Returns: Why the wait ended; `.readable` at once when the connection is closed or lost, so the caller's
    ///   next ``notifications()`` reports it.
    package func waitForInput(timeout: Duration?, stopDescriptor: Int32) -> WaitOutcome {
        Self.wait(socket: socket, stopDescriptor: stopDescriptor, timeout: timeout)
    }

    /// `poll` on the two descriptors until one is readable or `timeout` passes; an interrupted call resumes with
    /// the time left.
    static func wait(socket: Int32, stopDescriptor: Int32, timeout: Duration?) -> WaitOutcome {
        guard socket >= 0 else { return .readable }
        let deadline = timeout.map { ContinuousClock.now.advanced(by: $0) }
        var descriptors = [
            pollfd(fd: stopDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: socket, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { return .timedOut }
                let (seconds, attoseconds) = left.components
                // Rounded up, so the wait never ends before the deadline and then spins on a zero timeout.
                milliseconds = Int32(
                    clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            }
            let count = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            if count < 0 {
                if errno == EINTR { continue }
                return .readable
            }
            if descriptors[0].revents != 0 { return .stopped }
            if descriptors[1].revents != 0 { return .readable }
        }
    }
}
