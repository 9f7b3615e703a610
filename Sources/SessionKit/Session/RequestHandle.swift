import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The URLSession task of one request, and whether the request was cancelled (its caller's task was cancelled,
/// or its session ended), so that a cancellation that comes first keeps the task from ever starting.
///
/// - Important: ``start(_:)`` resumes the task under this request's own lock, and ``markCancelled()`` takes the
///   same lock: once `markCancelled()` has returned, the task either started before it (and is returned, to be
///   cancelled) or never will.
final class RequestHandle: Sendable {
    private let state = Lock<(task: URLSessionTask?, cancelled: Bool, finished: Bool)>((nil, false, false))
    private let answered = Lock(false)

    /// Claims the one right to resume the request's continuation: the completion handler and the path for a task
    /// that never started can both reach it (invalidating the session completes even a task never resumed).
    ///
    /// - Returns: `true` for the first caller only.
    func claimAnswer() -> Bool {
        answered.withLock { answered in
            defer { answered = true }
            return !answered
        }
    }

    /// Starts `task` unless the request was cancelled first; a task that does not start is left alone, never
    /// cancelled, so its completion handler never runs and the caller must answer for it.
    ///
    /// - Parameter task: The request's task, created suspended.
    /// - Returns: Whether the task was started.
    @discardableResult
    func start(_ task: URLSessionTask) -> Bool {
        // A request cancelled first is never resumed and never cancelled: FoundationNetworking traps when a task
        // that was never registered is cancelled. Its completion handler then never runs; the caller resumes.
        state.withLock { state -> Bool in
            state.task = task
            guard !state.cancelled else { return false }
            task.resume()
            return true
        }
    }

    /// Marks the request cancelled.
    ///
    /// - Returns: The task if it has started, for the caller to cancel; `nil` if it has not (it never will).
    func markCancelled() -> URLSessionTask? {
        state.withLock { state -> URLSessionTask? in
            state.cancelled = true
            // FoundationNetworking traps when a task it has already finished and unregistered is cancelled again
            // ("a task that is not in the registry"); a finished task has nothing left to cancel anyway.
            return state.finished ? nil : state.task
        }
    }

    /// Records that the task's completion handler ran: from then on, cancelling it is a no-op.
    func markFinished() {
        state.withLock { $0.finished = true }
    }

    /// Cancels the request now; for a cancellation of the calling Swift task.
    func cancel() {
        markCancelled()?.cancel()
    }
}
