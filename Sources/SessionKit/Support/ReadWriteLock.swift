#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pthread readers–writer lock guarding a value: many readers at once, or one writer that waits for every
/// reader under way and keeps new ones out.
///
/// For work that many threads may do at the same time and that one event must be able to stop and wait for:
/// requests starting (readers) and their session ending (the writer). Like ``Lock``, it is built on pthreads so
/// that ThreadSanitizer sees every hand-over, and it is `@unchecked Sendable` for the same reason: `state` is
/// read only while the lock is held for reading or writing, and written only while it is held for writing.
package final class ReadWriteLock<State: Sendable>: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
    private var state: State

    package init(_ initialState: State) {
        state = initialState
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    /// Runs `body` while holding the lock for reading: other readers may run at the same time, no writer can.
    ///
    /// - Parameter body: Reads the state; it may block briefly, but never waits for a writer of this lock.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package func withReadLock<Result>(_ body: (State) throws -> Result) rethrows -> Result {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(state)
    }

    /// Runs `body` while holding the lock for writing: it waits until every reader under way has finished.
    ///
    /// - Parameter body: Reads or changes the state.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package func withWriteLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body(&state)
    }
}
