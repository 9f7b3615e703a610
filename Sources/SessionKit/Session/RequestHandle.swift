import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The URLSession task of one request, whether it started, and whether its caller cancelled it, so that a
/// cancellation that comes first keeps the task from ever starting.
///
/// - Important: ``start(_:)`` resumes the task under this request's own lock, and ``markCancelled()`` takes the
///   same lock: once `markCancelled()` has returned, the task either started before it (and is returned, to be
///   cancelled) or never will (and whoever called `start(_:)` cancels it). A session's `end()` orders itself
///   against starts with its own lock, for every request at once.
final class RequestHandle: Sendable {
    private let state = Lock<(task: URLSessionTask?, started: Bool, cancelled: Bool)>((nil, false, false))
    private let answered = Lock(false)

    /// Claims the one right to resume the request's continuation: the completion handler and the path for a task
    /// that never started can both reach it (cancelling a task that never started still runs its handler).
    ///
    /// - Returns: `true` for the first caller only.
    func claimAnswer() -> Bool {
        answered.withLock { answered in
            defer { answered = true }
            return !answered
        }
    }

    /// Starts `task` unless the request was cancelled first.
    ///
    /// - Parameter task: The request's task, created suspended.
    /// - Returns: Whether the task was started. When it was not, the caller answers the request itself and
    ///   cancels the task, so that its session does not keep it registered.
    func start(_ task: URLSessionTask) -> Bool {
        state.withLock { state -> Bool in
            state.task = task
            guard !state.cancelled else { return false }
            task.resume()
            state.started = true
            return true
        }
    }

    /// Marks the request cancelled.
    ///
    /// - Returns: The task if it has started, for the caller to cancel; `nil` if it has not (it never will).
    func markCancelled() -> URLSessionTask? {
        state.withLock { state -> URLSessionTask? in
            state.cancelled = true
            return state.started ? state.task : nil
        }
    }

    /// Cancels the request now, for a cancellation of the calling Swift task.
    ///
    /// - Parameter session: The session that created the task.
    func cancel(in session: URLSession) {
        guard let task = markCancelled() else { return }
        session.cancelWithoutRacingCompletion([task])
    }
}
