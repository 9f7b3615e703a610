#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pthread mutex guarding a value: `Synchronization.Mutex`'s `withLock`, on a lock ThreadSanitizer can see.
///
/// On Linux, `Mutex` hands a contended lock to the next waiter inside the kernel (`FUTEX_LOCK_PI`), where
/// ThreadSanitizer cannot observe the hand-over, so it reports races between critical sections of the same
/// mutex (reproduced with four threads appending to a `Mutex<[Int]>`; Swift 6.3.1). CI runs every suite under
/// ThreadSanitizer, and a privacy library must be able to tell a real race from that artifact, so SessionKit
/// and SessionKitTesting use this lock everywhere instead of `Mutex`. It is the package's one
/// `@unchecked Sendable` type: `state` is read and written only between `pthread_mutex_lock` and
/// `pthread_mutex_unlock`. It is `package`, not public: it is no part of the API.
package final class Lock<State: Sendable>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var state: State

    package init(_ initialState: State) {
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
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
