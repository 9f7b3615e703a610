import Synchronization

/// A thread-safe counter that can be shared by reference.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)

    init() {}

    /// The current count.
    var value: Int { storage.load(ordering: .relaxed) }

    /// Adds one.
    func increment() { storage.add(1, ordering: .relaxed) }
}
