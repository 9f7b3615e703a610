import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The URLSession task of one request, whether it started, and whether its caller cancelled it, so that a
/// cancellation that comes first keeps the task from ever starting.
///
/// - Important: No lock is held while ``start(_:)`` resumes the task (`resume()` waits for the URLSession's work
///   queue, which every transfer of the session keeps busy): a cancellation never waits for a start. Once
///   ``cancel(in:)`` has returned, the task either never starts, or it started (or is being started) and is
///   cancelled, by ``cancel(in:)`` itself or, for a start under way, by ``start(_:)`` right after `resume()`.
///   A session's `end()` orders itself against starts with a flag of its own, for every request at once.
package final class RequestHandle: Sendable {
    private enum Phase {
        case created, starting, started, cancelled
        /// Cancelled while ``start(_:)`` was resuming the task: the starter cancels it through `canceller`.
        case cancelledWhileStarting
    }

    private struct State {
        var task: URLSessionTask?
        var phase = Phase.created
        var canceller: URLSession?
        var answered = false
        var expired = false
    }

    // The handle's place among the deadlines `DeadlineTicker` watches: read and written only under the ticker's
    // lock, never this handle's, and stored in the handle, so that registering a deadline allocates nothing.

    /// When an exchange's deadline passes, and the session through which the ticker then cancels it.
    ///
    /// A struct, not a tuple: an optional tuple is tested and moved through the runtime's generic tuple witnesses
    /// (`tuple_getEnumTagSinglePayload`, seen in a profile of every request's `remove`), a struct inline.
    package struct Deadline {
        /// When it passes: the time since the ticker's origin (`DeadlineTicker.origin`), a `Duration` for its fixed
        /// layout.
        package let at: Duration
        package let canceller: URLSession
    }

    /// The exchange's deadline; `nil` while the handle is not registered.
    package nonisolated(unsafe) var deadline: Deadline?
    /// The next registered handle.
    package nonisolated(unsafe) var deadlineNext: RequestHandle?
    /// The previous registered handle; unowned, since that one keeps this one alive through its `deadlineNext`.
    nonisolated(unsafe) unowned(unsafe) var deadlinePrevious: RequestHandle?

    /// One lock for all of it: a request's state is touched a handful of times, never contended for long, and
    /// each lock costs an allocation and a mutex to set up and tear down on every request.
    private let state = Lock(State())

    package init() {}

    /// Claims the one right to resume the request's continuation: the completion handler and the path for a task
    /// that never started can both reach it (cancelling a task that never started still runs its handler).
    ///
    /// - Returns: `true` for the first caller only.
    package func claimAnswer() -> Bool {
        state.withLock { state in
            defer { state.answered = true }
            return !state.answered
        }
    }

    /// Whether the request's deadline passed before it was answered (``expire(in:)``), so that the cancellation
    /// it caused can be told apart from the caller's and read as a timeout.
    package var hasExpired: Bool { state.withLock { $0.expired } }

    /// Cancels the request for its deadline, unless it was answered already.
    ///
    /// - Parameter session: The session that created the task.
    package func expire(in session: URLSession) {
        let unanswered = state.withLock { state -> Bool in
            guard !state.answered else { return false }
            state.expired = true
            return true
        }
        if unanswered { cancel(in: session) }
    }

    /// Starts `task` unless the request was cancelled first.
    ///
    /// - Parameter task: The request's task, created suspended.
    /// - Returns: Whether the task was started. When it was not, the caller answers the request itself and
    ///   cancels the task, so that its session does not keep it registered.
    package func start(_ task: URLSessionTask) -> Bool {
        let admitted = state.withLock { state -> Bool in
            state.task = task
            guard state.phase == .created else { return false }
            state.phase = .starting
            return true
        }
        guard admitted else { return false }
        task.resume()
        let canceller = state.withLock { state -> URLSession? in
            defer {
                state.phase = .started
                state.canceller = nil
            }
            return state.phase == .cancelledWhileStarting ? state.canceller : nil
        }
        canceller?.cancelWithoutRacingCompletion([task])
        return true
    }

    /// Marks the request cancelled.
    ///
    /// - Returns: The task if it has started, for the caller to cancel; `nil` if it has not (it never will), or
    ///   if a start is under way (only ``cancel(in:)`` has that start cancel it).
    package func markCancelled() -> URLSessionTask? {
        mark(cancellingThrough: nil)
    }

    /// Cancels the request now, for a cancellation of the calling Swift task or its deadline.
    ///
    /// - Parameter session: The session that created the task.
    package func cancel(in session: URLSession) {
        guard let task = mark(cancellingThrough: session) else { return }
        session.cancelWithoutRacingCompletion([task])
    }

    private func mark(cancellingThrough session: URLSession?) -> URLSessionTask? {
        state.withLock { state -> URLSessionTask? in
            switch state.phase {
            case .created:
                state.phase = .cancelled
                return nil
            case .starting:
                state.phase = .cancelledWhileStarting
                state.canceller = session
                return nil
            case .started:
                return state.task
            case .cancelledWhileStarting:
                if state.canceller == nil { state.canceller = session }
                return nil
            case .cancelled:
                return nil
            }
        }
    }
}
