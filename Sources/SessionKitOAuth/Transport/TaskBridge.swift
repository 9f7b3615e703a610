import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The one bridge from a URLSession task to `async`: every request kind of a session (data, hand-off writes,
/// uploads and downloads, byte streams) and the OAuth client's exchanges await their task through it.
///
/// What it guarantees, for every caller alike:
/// - **Created, then admitted, then started.** `create` makes the task (under whatever lock its owner needs, e.g.
///   the one `end()` takes), and the task is started only if `admits()` still says so and the caller has not been
///   cancelled first (``RequestHandle/start(_:)``); no lock is held across `resume()`. A task that is not started
///   is handed to `discardUnstarted` (by default cancelled with `cancelWithoutRacingCompletion`, so its session
///   does not keep it registered) and the call throws `notStarted`.
/// - **Answered once.** The completion handler, a delegate event and the path for a task that never started can
///   all answer; the first wins (``TaskAnswer/resume(returning:)`` returns whether it did) and the rest are dropped.
/// - **Cancelled without racing the completion.** A cancellation of the calling Swift task and the deadline
///   cancel the task with `cancelWithoutRacingCompletion`, never with a bare `cancel()` (a cancellation that races
///   a completion handler stops the process in FoundationNetworking): through the session's delegate queue, or,
///   where completions run on the session's work queue (``ImmediateDelegateQueue``), on the session's `endings`
///   queue, never on the caller's thread.
/// - **A deadline**, when given (``DeadlineTicker``), that cancels the exchange if it has no answer by then, and
///   turns the cancellation it causes into `onTimeout`'s error.
package enum TaskBridge {
    /// Creates, starts and awaits one task.
    ///
    /// - Parameters:
    ///   - handle: The task's start and cancellation state; pass one in to reach it from the task's events.
    ///   - canceller: The session that creates the task, through which it is cancelled; `nil` for
    ///     a task the caller's cancellation does not reach (a handed-off write), which also has no deadline.
    ///   - deadline: How long the exchange may take; `nil` for none.
    ///   - onTimeout: The error to throw instead of `error` when the deadline passed first and the calling task
    ///     was not cancelled; `nil` keeps `error`.
    ///   - admits: Whether the task may start, asked after it was created and before it is resumed, with no lock
    ///     of the bridge's held (a session's start flag, which `end()` lowers).
    ///   - notStarted: What the call throws when the task was created but not started.
    ///   - discardUnstarted: What to do with a task that was created but not started, after the call was answered;
    ///     by default it is cancelled with `canceller`'s `cancelWithoutRacingCompletion`.
    ///   - create: Makes the task, suspended, and wires its completion to the answer it is given; it runs once,
    ///     synchronously. It throws to refuse (nothing created): the call throws that error.
    /// - Returns: The value the task's completion answered with.
    /// - Throws: What the task's completion answered with, what `create` threw, `notStarted`, or `onTimeout`'s
    ///   error.
    @inline(__always)
    package static func run<Value: Sendable>(
        handle: RequestHandle = RequestHandle(),
        cancellingThrough canceller: URLSession?,
        deadline: Duration? = nil,
        onTimeout: (_ error: any Error) -> (any Error)? = { _ in nil },
        admits: () -> Bool = { true },
        notStarted: @autoclosure () -> any Error,
        discardUnstarted: ((URLSessionTask) -> Void)? = nil,
        create: (TaskAnswer<Value>) throws -> URLSessionTask
    ) async throws -> Value {
        guard let canceller else {
            return try await withUnsafeThrowingContinuation { continuation in
                start(TaskAnswer(handle, continuation), nil, admits, notStarted, discardUnstarted, create)
            }
        }
        if let deadline { DeadlineTicker.shared.add(handle, after: deadline, cancellingThrough: canceller) }
        defer { if deadline != nil { DeadlineTicker.shared.remove(handle) } }
        do {
            return try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { continuation in
                    start(TaskAnswer(handle, continuation), canceller, admits, notStarted, discardUnstarted, create)
                }
            } onCancel: {
                handle.cancel(in: canceller)
            }
        } catch {
            guard deadline != nil, handle.hasExpired, !Task.isCancelled, let replaced = onTimeout(error) else {
                throw error
            }
            throw replaced
        }
    }

    @inline(__always)
    private static func start<Value: Sendable>(
        _ answer: TaskAnswer<Value>,
        _ canceller: URLSession?,
        _ admits: () -> Bool,
        _ notStarted: () -> any Error,
        _ discardUnstarted: ((URLSessionTask) -> Void)?,
        _ create: (TaskAnswer<Value>) throws -> URLSessionTask
    ) {
        let task: URLSessionTask
        do {
            task = try create(answer)
        } catch {
            answer.resume(throwing: error)
            return
        }
        // Started with no lock held: `resume()` waits for the URLSession's serial work queue, which every transfer
        // of the session keeps busy, and a lock held meanwhile would stall whoever needs it (other starts,
        // completions, `end()`, a cancelling caller). The handle orders the start against the caller's
        // cancellation; `admits` against whatever else refuses starts (a session's `end()`, which cancels the
        // tasks whose start passed this check itself).
        guard admits() && answer.handle.start(task) else {
            // Answered first, so that the cancelled task's own completion finds the call answered.
            answer.resume(throwing: notStarted())
            if let discardUnstarted {
                discardUnstarted(task)
            } else {
                canceller?.cancelWithoutRacingCompletion([task])
            }
            return
        }
    }
}

/// The right to answer one ``TaskBridge`` call: whoever resumes first wins.
///
/// The continuation is an `UnsafeContinuation`, not a checked one. A second resume is ruled out here, by
/// ``RequestHandle/claimAnswer()`` before every resume, so the checked continuation's guard would only cost an
/// object allocated and released per request, and, since its layout is known only inside the concurrency library,
/// every copy of this struct (and of the registry entries that hold it) would go through the runtime's value
/// witnesses. That every call is answered is what the bridge's paths guarantee (the completion handler, the path
/// for a task that never started, `end()`'s early answer), and what the tests, each under a time limit, check.
package struct TaskAnswer<Value: Sendable>: Sendable {
    /// The task's start and cancellation state.
    package let handle: RequestHandle
    private let continuation: UnsafeContinuation<Value, any Error>

    package init(_ handle: RequestHandle, _ continuation: UnsafeContinuation<Value, any Error>) {
        self.handle = handle
        self.continuation = continuation
    }

    /// Answers the call with `value` unless it was answered already.
    ///
    /// - Returns: Whether this was the answer.
    @inline(__always) @discardableResult
    package func resume(returning value: Value) -> Bool {
        guard handle.claimAnswer() else { return false }
        continuation.resume(returning: value)
        return true
    }

    /// Answers the call with `error` unless it was answered already.
    ///
    /// - Returns: Whether this was the answer.
    @inline(__always) @discardableResult
    package func resume(throwing error: any Error) -> Bool {
        guard handle.claimAnswer() else { return false }
        continuation.resume(throwing: error)
        return true
    }
}
