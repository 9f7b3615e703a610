import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// Cancels `tasks` so that no cancellation can race a completion handler, then, if asked, invalidates the
    /// session once they have all finished.
    ///
    /// FoundationNetworking's `URLSessionTask.cancel()` works in two hops on the task's work queue: the first
    /// checks that the task is still running and marks it cancelling, the second reports the failure, which
    /// looks the task up in the session's registry. A completion handler that runs on the delegate queue between
    /// the two hops unregisters the task, and the second hop then stops the process ("Trying to access a
    /// behaviour for a task that in not in the registry"). `invalidateAndCancel()` cancels the same way.
    ///
    /// Where completion handlers run on the session's work queue (``ImmediateDelegateQueue``, Linux), both hops
    /// and every completion run on that one serial queue, so no completion can come between the hops: the tasks are
    /// cancelled with a bare `cancel()`, as FoundationNetworking's own `async` methods cancel theirs, but never on
    /// the caller's thread. FoundationNetworking 6.3 takes the first hop with `sync` on that queue, and the caller
    /// may be a Swift task's cancellation handler, which holds the task's status lock: the completion handler that
    /// resumes that task needs the lock, on the queue the cancellation waits for, and both would wait forever (the
    /// deadlock of swift-corelibs-foundation#5412, which the `async` methods of 6.3 have). So the cancellations,
    /// and the invalidation after them, run on the session's serial `endings` queue, which also keeps the caller's
    /// time the same however many tasks it cancels.
    ///
    /// Otherwise every cancellation runs in an operation on the session's serial delegate queue, where completion
    /// handlers run, and that operation waits until the task's work queue has taken both hops (reading `priority`
    /// waits for that queue: the first read for the first hop, which queues the second behind it, and the second
    /// read for the second hop). No completion handler can run meanwhile, so one either ran entirely before (the
    /// task was already completed, and the cancellation did nothing) or runs after the failure was reported, and
    /// the task leaves the registry only then. Apple's URLSession does not need this; it costs one operation and
    /// two queue round trips per task there too, and keeps the code the same on every platform.
    ///
    /// - Parameters:
    ///   - tasks: The tasks to cancel; a task that already finished is left as it is.
    ///   - invalidate: Whether to invalidate the session afterwards. The session must already refuse new tasks
    ///     (its owner checks that before creating one), or `gate` must be given; the cancelled tasks finish first.
    ///   - gate: Held for reading by the session's owner while it creates a task, and checked there: lowered (held
    ///     for writing) just before the invalidation, after every creation under way, so that no task is created on
    ///     the invalidated session.
    ///   - first: Runs on the same queue before any cancellation (answering the tasks' callers, say); it must not
    ///     wait for the session's work queue.
    /// - Precondition: The session's delegate queue is serial (the default when none is given) or immediate.
    package func cancelWithoutRacingCompletion<Tasks: Collection & Sendable>(
        _ tasks: Tasks, thenInvalidate invalidate: Bool = false, closing gate: SharedLock<Bool>? = nil,
        first: (@Sendable () -> Void)? = nil
    ) where Tasks.Element: CarriesSessionTask {
        guard !tasks.isEmpty || invalidate else { return }
        if let endings {
            endings.async { [self] in
                first?()
                for task in tasks { task.sessionTask?.cancel() }
                if invalidate {
                    gate?.withExclusiveLock { $0 = false }
                    finishTasksAndInvalidate()
                }
            }
            return
        }
        precondition(delegateQueue.maxConcurrentOperationCount == 1, "the delegate queue must be serial")
        delegateQueue.addOperation { [self] in
            first?()
            for task in tasks { task.sessionTask?.cancel() }
            // Each read waits until the task's work queue has run everything queued before it: the first pass the
            // first hop of each cancellation, the second pass the second hop, which the first hop queued.
            for task in tasks { _ = task.sessionTask?.priority }
            for task in tasks { _ = task.sessionTask?.priority }
            if invalidate {
                gate?.withExclusiveLock { $0 = false }
                finishTasksAndInvalidate()
            }
        }
    }
}

/// What ``URLSession/cancelWithoutRacingCompletion(_:thenInvalidate:closing:first:)`` cancels: a task, or something
/// that carries one (a session's registry entry), so that a registry's `values` are handed over as they are: a
/// `values.lazy.map(\.task)` would make the call itself cost time in proportion to the tasks, on the thread that
/// ends the session, which must not wait for what is in flight.
package protocol CarriesSessionTask {
    /// The task to cancel; `nil` for an entry whose work is not a task of this session (a libcurl transfer,
    /// which its own client cancels).
    var sessionTask: URLSessionTask? { get }
}

extension URLSessionTask: CarriesSessionTask {
    package var sessionTask: URLSessionTask? { self }
}
