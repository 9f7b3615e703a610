import SessionKit

/// Counts requests as they finish and remembers when the last one did, so a drain can be timed to the moment the
/// last request in flight gave up rather than to when someone noticed.
final class CompletionRecorder: Sendable {
    private struct State {
        var remaining: Int
        var failures = 0
        var last: ContinuousClock.Instant?
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state: Lock<State>

    /// Expects `count` completions.
    init(expecting count: Int) {
        state = Lock(State(remaining: count))
    }

    /// Records one completion, now.
    ///
    /// - Parameter failed: Whether the request threw (was cancelled).
    func record(failed: Bool) {
        let now = ContinuousClock.now
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.remaining -= 1
            if failed { state.failures += 1 }
            state.last = now
            guard state.remaining == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits for every expected completion; returns when the last one happened (nil if none was expected) and
    /// how many failed.
    func waitForAll() async -> (last: ContinuousClock.Instant?, failures: Int) {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                guard state.remaining > 0 else { return true }
                state.waiter = continuation
                return false
            }
            if done { continuation.resume() }
        }
        return state.withLock { ($0.last, $0.failures) }
    }
}
