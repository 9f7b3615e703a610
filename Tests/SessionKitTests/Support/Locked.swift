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
