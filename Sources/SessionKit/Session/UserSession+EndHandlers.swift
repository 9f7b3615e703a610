import SessionKitOAuth

extension UserSession {
    /// Runs `handler` once, synchronously, when the session ends; at once if it already has.
    ///
    /// - Parameter handler: What to run. It must not call back into this session's ``end()``.
    public func onEnd(_ handler: @escaping @Sendable () -> Void) {
        addEndHandler(handler)
    }

    /// Runs `handler` once when the session ends, like ``onEnd(_:)``, and returns the key that removes it.
    ///
    /// - Parameter handler: What to run.
    /// - Returns: The key for ``removeEndHandler(_:)``, or `nil` if the session had already ended (`handler` has
    ///   then run, before this returns).
    @discardableResult
    func addEndHandler(_ handler: @escaping @Sendable () -> Void) -> Int? {
        let key = lifetime(.addEndHandler(handler)).id
        // Run outside the lock, like every handler `end()` runs: it may read the session.
        if key == nil { handler() }
        return key
    }

    /// Forgets an end handler that is no longer wanted (a container bound to another session), so that a session
    /// that lives long does not collect them. Does nothing if it ran or was removed already.
    ///
    /// - Parameter key: What ``addEndHandler(_:)`` returned.
    func removeEndHandler(_ key: Int) {
        lifetime(.removeEndHandler(key))
    }

    /// How many end handlers are registered, for tests.
    var endHandlerCount: Int {
        guard case .count(let count) = lifetime(.endHandlerCount) else { return 0 }
        return count
    }
}
