import SessionKitOAuth

/// Runs async operations one after another, in the order they were enqueued.
///
/// Enqueueing is synchronous, so a caller can decide under its own lock whether an operation is admitted and
/// know that everything enqueued later runs after it. That is how a session's credential writes and its
/// account's purge are ordered: the purge is enqueued after the session stopped admitting writes, so it runs
/// behind every admitted write.
final class SerialQueue: Sendable {
    private let tail = Lock<Task<Void, Never>?>(nil)

    init() {}

    /// Enqueues `operation` behind everything enqueued before it.
    ///
    /// - Parameter operation: The work; it is not cancelled when the caller is.
    /// - Returns: A task whose value is the operation's result.
    @discardableResult
    func enqueue<T: Sendable>(_ operation: @escaping @Sendable () async -> T) -> Task<T, Never> {
        tail.withLock { tail in
            let previous = tail
            let task = Task<T, Never> {
                await previous?.value
                return await operation()
            }
            tail = Task { _ = await task.value }
            return task
        }
    }
}
