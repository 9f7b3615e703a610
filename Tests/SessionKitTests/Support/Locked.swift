import Foundation

/// A value guarded by a pthread mutex (`NSLock`), for test bookkeeping that handler tasks, URLSession callbacks
/// and the test itself share.
///
/// Not `Synchronization.Mutex`: on Linux a contended `Mutex` hands the lock over inside the kernel, where
/// ThreadSanitizer cannot see it, and the randomized suites run under ThreadSanitizer; a report from the test's
/// own bookkeeping would hide the ones that matter. `value` is only touched between `lock()` and `unlock()`.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. Never suspend or block in it.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Whether `operation` returns within `bound` on the wall clock; one that does not is left running. For a test that
/// waits on something that may never answer: it fails with a name instead of hanging until its time limit.
func returns(within bound: Duration, _ operation: @escaping @Sendable () async -> Void) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let waiting = Locked<CheckedContinuation<Bool, Never>?>(continuation)
        let take: @Sendable () -> CheckedContinuation<Bool, Never>? = {
            waiting.withLock { waiting in
                defer { waiting = nil }
                return waiting
            }
        }
        let timer = Task {
            try? await Task.sleep(for: bound)
            take()?.resume(returning: false)
        }
        Task {
            await operation()
            // Taken before the timer is cancelled: a cancelled timer wakes at once and would take it first.
            take()?.resume(returning: true)
            timer.cancel()
        }
    }
}
