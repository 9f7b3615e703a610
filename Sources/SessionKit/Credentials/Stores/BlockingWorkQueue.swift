import Dispatch
import SessionKitOAuth

/// Runs blocking calls (file system syscalls, synchronous D-Bus round trips) one at a time on a dedicated
/// serial queue, so they neither block the cooperative thread pool nor interleave with each other.
final class BlockingWorkQueue: Sendable {
    private let queue: DispatchQueue

    /// Creates a serial queue.
    ///
    /// - Parameter label: The queue's label, for debuggers.
    init(label: String) {
        queue = DispatchQueue(label: label, qos: .utility)
    }

    /// Runs `body` on the queue after every call submitted before it, and returns its result.
    ///
    /// The call is not abandoned when the awaiting task is cancelled: half a write is worse than a late one.
    ///
    /// - Parameter body: The blocking work.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { try body() })
            }
        }
        return try result.get()
    }
}
