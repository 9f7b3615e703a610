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

    /// Starts `task` unless the request was cancelled first; a task that does not start is cancelled instead, so
    /// its completion handler still runs, with `URLError.cancelled`.
    ///
    /// - Parameter task: The request's task, created suspended.
    func start(_ task: URLSessionTask) {
        let started = state.withLock { state -> Bool in
            state.task = task
            guard !state.cancelled else { return false }
            task.resume()
            return true
        }
        if !started { task.cancel() }
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
