#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pthread reader-writer lock guarding a value: any number of threads read it at once, one at a time changes it.
///
/// For a value read on every request and changed once in a session's life, where the readers may hold it for a
/// while (creating a URLSession task waits for FoundationNetworking's work queue): with ``Lock``, each of several
/// concurrent readers waited for the one before it to finish; here they wait only for a writer. Like ``Lock``, it
/// is a pthread lock so that ThreadSanitizer sees it, and `@unchecked Sendable`: the state is read only while the
/// lock is held for reading and written only while it is held for writing. `package`, not public.
package struct SharedLock<State: Sendable>: @unchecked Sendable {
    /// The state and its lock in one allocation.
    private final class Storage: ManagedBuffer<State, pthread_rwlock_t> {
        deinit {
            _ = withUnsafeMutablePointerToElements { pthread_rwlock_destroy($0) }
        }
    }

    private let storage: Storage

    package init(_ initialState: State) {
        let buffer = Storage.create(minimumCapacity: 1) { _ in initialState }
        _ = buffer.withUnsafeMutablePointerToElements { lock in
            lock.initialize(to: pthread_rwlock_t())
            return pthread_rwlock_init(lock, nil)
        }
        // `create` returns the subclass it was called on.
        storage = unsafeDowncast(buffer, to: Storage.self)
    }

    /// Runs `body` with the state, which no other thread changes meanwhile; other readers may run at the same time.
    /// Never change shared state in it that needs exclusion from those readers; never suspend in it.
    ///
    /// - Parameter body: Reads the state.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    @inline(__always)
    package func withSharedLock<Result>(_ body: (State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, lock in
            pthread_rwlock_rdlock(lock)
            defer { pthread_rwlock_unlock(lock) }
            return try body(state.pointee)
        }
    }

    /// Runs `body` with exclusive access to the state, once every reader under way has finished. Keep it short.
    ///
    /// - Parameter body: Reads or changes the state.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package func withExclusiveLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withUnsafeMutablePointers { state, lock in
            pthread_rwlock_wrlock(lock)
            defer { pthread_rwlock_unlock(lock) }
            return try body(&state.pointee)
        }
    }

    /// Runs `body` with exclusive access to the state if no thread holds the lock now, for reading or writing,
    /// without waiting.
    ///
    /// - Parameter body: Reads or changes the state.
    /// - Returns: What `body` returns, or `nil` if the lock was held.
    /// - Throws: What `body` throws.
    package func withExclusiveLockIfAvailable<Result>(_ body: (inout State) throws -> Result) rethrows -> Result? {
        try storage.withUnsafeMutablePointers { state, lock in
            guard pthread_rwlock_trywrlock(lock) == 0 else { return nil }
            defer { pthread_rwlock_unlock(lock) }
            return try body(&state.pointee)
        }
    }
}
