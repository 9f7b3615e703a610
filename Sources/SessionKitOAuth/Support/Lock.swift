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
/// and SessionKitTesting use this lock everywhere instead of `Mutex` (and ``SharedLock``, a pthread reader-writer
/// lock, where readers must not wait for each other). It is `@unchecked Sendable`: the state is read and written
/// only between `pthread_mutex_lock` and `pthread_mutex_unlock`. (The package's other unchecked state: a
/// `RequestHandle`'s `deadline…` fields, guarded by `DeadlineTicker`'s lock, ``SharedLock``, and the
/// `ImmediateDelegateQueue` subclass of `OperationQueue`.) It is `package`, not public: it is no part of the API.
package struct Lock<State: Sendable>: @unchecked Sendable {
    /// The state and its mutex in one allocation. The state is reached through a pointer, so an access pays no
    /// dynamic exclusivity check (the mutex is what makes it exclusive).
    private final class Storage: ManagedBuffer<State, pthread_mutex_t> {
        deinit {
            _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
        }
    }

    private let storage: Storage

    package init(_ initialState: State) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in initialState }
        _ = buffer.withUnsafeMutablePointerToElements { mutex in
            mutex.initialize(to: pthread_mutex_t())
            return pthread_mutex_init(mutex, nil)
        }
        // `create` returns the subclass it was called on.
        storage = unsafeDowncast(buffer, to: Storage.self)
    }

    /// Runs `body` with exclusive access to the state. Keep it short; never suspend or block in it.
    ///
    /// - Parameter body: Reads or changes the state.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    @inline(__always)
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, mutex in
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }

    /// Runs `body` with exclusive access to the state if no other thread holds the lock now, without waiting.
    ///
    /// - Parameter body: Reads or changes the state.
    /// - Returns: What `body` returns, or `nil` if the lock was held.
    /// - Throws: What `body` throws.
    package func withLockIfAvailable<Result>(_ body: (inout State) throws -> Result) rethrows -> Result? {
        try storage.withUnsafeMutablePointers { state, mutex in
            guard pthread_mutex_trylock(mutex) == 0 else { return nil }
            defer { pthread_mutex_unlock(mutex) }
            return try body(&state.pointee)
        }
    }
}
