#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pthread mutex guarding a value: `Synchronization.Mutex`'s `withLock`, on a lock ThreadSanitizer can see.
///
/// On Linux, `Mutex` hands a contended lock to the next waiter inside the kernel (`FUTEX_LOCK_PI`), where
/// ThreadSanitizer cannot observe the hand-over, so it reports races between critical sections of the same
/// mutex (reproduced with four threads appending to a `Mutex<[Int]>`; Swift 6.3.1). The I/O thread and the
/// handler tasks contend for these locks on every request, and CI runs the suites under ThreadSanitizer, so
/// LocalServer uses this instead. It is the module's one `@unchecked Sendable` type: `state` is read and written
/// only between `pthread_mutex_lock` and `pthread_mutex_unlock`.
final class Lock<State: Sendable>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var state: State

    init(_ initialState: State) {
        state = initialState
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state. Keep it short; never suspend or block in it.
    ///
    /// - Parameter body: Reads or changes the state.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
