import SessionKit

@testable import SessionKitTesting

/// A one-shot gate: tasks wait until it opens; once open it stays open. Orders events in tests without sleeps.
final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    }

    private let state = Lock(State())

    /// Opens the gate and releases every waiter.
    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    var isOpen: Bool { state.withLock { $0.isOpen } }

    /// Waits until the gate opens.
    ///
    /// - Throws: `CancellationError` when the waiting task is cancelled first.
    func wait() async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Result<Void, any Error>? = state.withLock { state in
                    if state.isOpen { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters[id] = continuation
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}

/// Counts arrivals and opens its gate when the count reaches a target.
final class Arrivals: Sendable {
    private let count = Lock(0)
    private let target: Int
    /// Opens when `target` arrivals have been counted.
    let reached = Gate()

    init(target: Int) {
        self.target = target
    }

    /// Counts one arrival.
    func arrive() {
        let now = count.withLock { count in
            count += 1
            return count
        }
        if now >= target { reached.open() }
    }
}
