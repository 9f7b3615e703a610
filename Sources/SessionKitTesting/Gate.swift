import SessionKit

/// A one-shot barrier: tasks that ``wait()`` suspend until ``open()`` is called, without sleeping.
///
/// Use it to hold a server handler or a step of a test at an exact point, then release it when the test has
/// arranged what it wants to race against it.
public final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextID = 0
        var arrivals = 0
        var arrivalWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = Lock(State())

    /// Creates a closed gate.
    public init() {}

    /// Whether the gate has been opened.
    public var isOpen: Bool { state.withLock { $0.isOpen } }

    /// How many tasks have arrived at the gate so far, whether or not it was open.
    public var arrivals: Int { state.withLock { $0.arrivals } }

    /// Suspends until the gate opens, or the waiting task is cancelled; returns at once if it is open.
    public func wait() async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (resume, arrived) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                    state.arrivals += 1
                    let arrived = state.arrivalWaiters.filter { $0.count <= state.arrivals }.map(\.continuation)
                    state.arrivalWaiters.removeAll { $0.count <= state.arrivals }
                    if state.isOpen || Task.isCancelled { return (true, arrived) }
                    state.waiters[id] = continuation
                    return (false, arrived)
                }
                for waiter in arrived { waiter.resume() }
                if resume { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    /// Suspends until at least `count` tasks have arrived at the gate.
    ///
    /// - Parameter count: The number of arrivals to wait for.
    public func waitForArrivals(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.arrivals >= count { return true }
                state.arrivalWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Opens the gate for good, releasing every waiting task.
    public func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }
}
