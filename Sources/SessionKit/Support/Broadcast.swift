import SessionKitOAuth
import Synchronization

/// A one-shot result that many waiters can await, each with its own deadline and its own cancellation.
///
/// Cancelling one waiter, or letting its deadline pass, resumes only that waiter: the work that will produce
/// the result goes on for the others.
final class Broadcast<Value: Sendable>: Sendable {
    private struct State {
        var result: Result<Value, any Error>?
        var waiters: [Int: CheckedContinuation<Value, any Error>] = [:]
    }

    private let state = Lock(State())
    /// The waiters' ids: each call of ``value(deadline:clock:timeoutError:)`` takes the next before it registers,
    /// so its timer and its cancellation name it. A counter, not state: nothing else is decided with it.
    private let nextID = Atomic(0)

    init() {}

    /// How many waiters wait now (for tests that order a join before the result).
    var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// Sets the result, once, and resumes every waiter with it; later calls do nothing.
    ///
    /// - Parameter result: The outcome.
    /// - Returns: Whether this call set the result.
    @discardableResult
    func resolve(_ result: Result<Value, any Error>) -> Bool {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, any Error>]? in
            guard state.result == nil else { return nil }
            state.result = result
            let waiters = Array(state.waiters.values)
            state.waiters.removeAll()
            return waiters
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(with: result) }
        return true
    }

    /// Waits for the result, at most until `deadline`.
    ///
    /// - Parameters:
    ///   - deadline: When to give up, on `clock`; `nil` waits as long as it takes.
    ///   - clock: The clock the deadline is on.
    ///   - timeoutError: What to throw when the deadline passes.
    /// - Returns: The value.
    /// - Throws: The result's error, `timeoutError`, or `CancellationError` when the waiting task is cancelled.
    func value(
        deadline: ContinuousClock.Instant?,
        clock: any SessionClock,
        timeoutError: any Error
    ) async throws -> Value {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        let timeout = timeoutError
        let timer: Task<Void, Never>? = deadline.map { deadline in
            Task { [weak self] in
                do { try await clock.sleep(until: deadline) } catch { return }
                self?.resumeWaiter(id, with: .failure(timeout))
            }
        }
        defer { timer?.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let immediate = state.withLock { state -> Result<Value, any Error>? in
                    if let result = state.result { return result }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    // A timer that fired before this waiter registered found nothing to resume.
                    if let deadline, clock.now >= deadline { return .failure(timeout) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            resumeWaiter(id, with: .failure(CancellationError()))
        }
    }

    private func resumeWaiter(_ id: Int, with result: Result<Value, any Error>) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.resume(with: result)
    }
}
