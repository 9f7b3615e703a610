import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking

    /// A delegate queue that runs what it is given at once, on the calling thread: for a `URLSession` whose only
    /// callbacks are completion handlers that hand their answer on and return, it is FoundationNetworking's own
    /// work queue that runs them.
    ///
    /// FoundationNetworking (Linux) delivers a completion handler through the session's delegate `OperationQueue`:
    /// an operation object, the queue's bookkeeping and a wake-up of one of its threads for every request (figures in
    /// BENCHMARKS.md, "Figures behind the code's rules"). Its own `async` methods skip that
    /// (they run the handler on the task's work queue), but they hide the task from the caller, which a session
    /// must hold to cancel it when it ends. With this queue a completion handler runs where the async methods run
    /// it: on the session's work queue, which is also where both steps of `URLSessionTask.cancel()` run, so no
    /// cancellation can race a completion (see `cancelWithoutRacingCompletion`).
    ///
    /// That work queue is serial, and every `URLSession` of the process targets one queue behind it
    /// (FoundationNetworking 6.3: `URLSession.sharedQueue`): a callback that waits stops every session of the process.
    /// So the callbacks of a session with this queue must never block, never wait for a lock that is held while a
    /// `URLSession` call waits for that queue (creating a task, `resume()` and, in 6.3, `cancel()` do), and never
    /// call such a method themselves; the session's cancellations run on ``endings``. Only the data session of a
    /// ``UserSession`` uses it: its completion handlers only claim their answer and resume a continuation. Sessions
    /// whose delegates write to disk or report progress (transfers) keep an ordinary serial queue.
    package final class ImmediateDelegateQueue: OperationQueue, @unchecked Sendable {
        /// Where the session's tasks are cancelled, and the session invalidated when it ends, off the caller's thread
        /// (`cancelWithoutRacingCompletion`): serial, so that the invalidation follows the cancellations. Each
        /// cancellation waits for FoundationNetworking's work queue, so this queue is an overcommitting one (no
        /// target: Dispatch gives it a thread of its own when the others wait), never one of the width-limited global
        /// queues, which on Linux are the threads of Swift's cooperative pool: a few sessions ending while that work
        /// queue is busy would otherwise stop every Swift task of the process until it is free.
        package let endings = DispatchQueue(label: "SessionKit.ImmediateDelegateQueue.endings")

        override package func addOperation(_ block: @escaping @Sendable () -> Void) {
            block()
        }
    }

    extension URLSession {
        /// Where ``cancelWithoutRacingCompletion(_:thenInvalidate:)`` cancels the tasks of a session whose callbacks
        /// run on its work queue (``ImmediateDelegateQueue``); `nil` for any other session.
        package var endings: DispatchQueue? { (delegateQueue as? ImmediateDelegateQueue)?.endings }
    }
#else
    extension URLSession {
        /// Where ``cancelWithoutRacingCompletion(_:thenInvalidate:)`` cancels the tasks of a session whose callbacks
        /// run on its work queue: none on Apple platforms, whose URLSession delivers on the delegate queue it was
        /// given.
        package var endings: DispatchQueue? { nil }
    }
#endif
