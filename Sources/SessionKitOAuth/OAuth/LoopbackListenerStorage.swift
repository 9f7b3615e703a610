/// The descriptors of a ``LoopbackRedirectListener`` and the one wait it allows, under one lock.
///
/// The calling task, its cancellation handler, the listener's thread and `deinit` meet here. Who closes what: the
/// listening socket belongs to the loop once the wait began (it closes it as soon as the callback arrives); the
/// wake pipe is closed here, under the lock, so a cancellation never writes to a descriptor number that was
/// closed and perhaps reused.
package final class LoopbackListenerStorage: Sendable {
    package struct Descriptors: Sendable {
        package var listener: Int32
        package var wakeReading: Int32
        package var wakeWriting: Int32
    }

    private enum State {
        /// Bound and listening; no wait yet.
        case ready(Descriptors)
        /// The loop runs and owns the listening socket; `cancelled` once the waiting task was cancelled.
        case waiting(Descriptors, cancelled: Bool)
        /// Every descriptor is closed.
        case finished
    }

    private let state: Lock<State>

    package init(_ descriptors: Descriptors) {
        state = Lock(.ready(descriptors))
    }

    /// Starts the one wait.
    ///
    /// - Returns: The descriptors; the listening socket now belongs to the caller's loop.
    /// - Throws: `SessionError(.invalidInput)` when a wait already ran or runs.
    package func beginWaiting() throws -> Descriptors {
        try state.withLock { state in
            guard case .ready(let descriptors) = state else {
                throw SessionError(
                    .invalidInput, "a loopback redirect listener waits once; this one already waited or is waiting")
            }
            state = .waiting(descriptors, cancelled: false)
            return descriptors
        }
    }

    /// Whether the waiting task was cancelled.
    package var isCancelled: Bool {
        state.withLock { state in
            if case .waiting(_, cancelled: true) = state { return true }
            return false
        }
    }

    /// Marks the wait cancelled and wakes the loop out of `poll`.
    package func cancel() {
        state.withLock { state in
            guard case .waiting(let descriptors, _) = state else { return }
            state = .waiting(descriptors, cancelled: true)
            LoopbackSocket.signal(descriptors.wakeWriting)
        }
    }

    /// Ends the wait: the loop closed the listening socket and its connections; this closes the wake pipe.
    package func finish() {
        state.withLock { state in
            guard case .waiting(let descriptors, _) = state else { return }
            LoopbackSocket.close(descriptors.wakeReading)
            LoopbackSocket.close(descriptors.wakeWriting)
            state = .finished
        }
    }

    /// Closes everything when the listener goes away without having waited.
    package func release() {
        state.withLock { state in
            guard case .ready(let descriptors) = state else { return }
            LoopbackSocket.close(descriptors.listener)
            LoopbackSocket.close(descriptors.wakeReading)
            LoopbackSocket.close(descriptors.wakeWriting)
            state = .finished
        }
    }
}
