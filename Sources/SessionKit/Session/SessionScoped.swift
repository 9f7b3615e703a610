import Observation
import SessionKitOAuth

/// State that belongs to the current session — a screen's data, a store's contents — and accepts writes only
/// from that session while it is active.
///
/// Register the container with the ``SessionManager`` (`manager.register(container)`): from then on it is bound
/// to the manager's current session. A result is committed with ``commit(_:from:)``,
/// which checks, at the moment of the commit — after the last `await` of the work that produced it — that the
/// producing session is the bound one, by identity, and still active; a refused commit returns `false` and
/// changes nothing.
///
/// When the current session changes (a sign-in, a switch, a sign-out) or the bound session ends, the contents go
/// back to the empty value synchronously, before any `await`, so the next frame shows nothing of the previous
/// account.
///
/// ```swift
/// let loans = SessionScoped<[Loan]>(empty: [])
/// manager.register(loans)
/// let (data, _) = try await session.data(for: request)
/// loans.commit(try decoder.decode([Loan].self, from: data), from: session)  // refused if signed out meanwhile
/// ```
///
/// - Important: Thread-safe; observable with Observation (`withObservationTracking`, SwiftUI).
public final class SessionScoped<Value: Sendable>: Sendable, Observable {
    private struct State {
        var value: Value
        var session: UserSession?
        /// The key of the end handler registered on ``session``, removed when the container is bound elsewhere.
        var endHandler: Int?
        var discardedCommits = 0
    }

    private let registrar = ObservationRegistrar()
    private let state: Lock<State>
    /// The value the container holds when no session's data is in it.
    public let emptyValue: Value

    /// Creates an unbound container holding `empty`.
    ///
    /// - Parameter empty: The value shown when no session's data is present.
    public init(empty: Value) {
        self.emptyValue = empty
        self.state = Lock(State(value: empty))
    }

    /// The current contents: the bound session's data, or ``emptyValue`` when no session's data is in it.
    public var value: Value {
        registrar.access(self, keyPath: \.value)
        return state.withLock { $0.value }
    }

    /// The session whose data the container holds, if any.
    public var session: UserSession? {
        registrar.access(self, keyPath: \.session)
        return state.withLock { $0.session }
    }

    /// How many commits were refused because their session was not the bound one or had ended.
    package var discardedCommits: Int {
        registrar.access(self, keyPath: \.discardedCommits)
        return state.withLock { $0.discardedCommits }
    }

    /// Binds the container to `session`; if that changes the bound session, the contents are emptied at once.
    ///
    /// When the bound session ends, by whatever route, the contents are emptied synchronously in `end()`.
    ///
    /// The container keeps one end handler on the session it is bound to and removes it when bound elsewhere, so
    /// switching back and forth between two long-lived sessions leaves nothing behind on either.
    ///
    /// - Parameter session: The session whose data the container will hold, or `nil`.
    package func bind(to session: UserSession?) {
        typealias Previous = (session: UserSession?, endHandler: Int?)
        let previous = state.withLock { state -> Previous? in
            guard state.session !== session else { return nil }
            defer {
                state.session = session
                state.endHandler = nil
                state.value = emptyValue
            }
            return (state.session, state.endHandler)
        }
        guard let previous else { return }
        if let old = previous.session, let key = previous.endHandler { old.removeEndHandler(key) }
        notifyAll()
        guard let session else { return }
        let id = session.serial
        guard let key = session.addEndHandler({ [weak self] in self?.clear(ifBoundTo: id) }) else { return }
        // Kept only while `session` is still the bound one and has no handler of this container yet; a concurrent
        // bind may have moved on (or registered first) meanwhile.
        let kept = state.withLock { state -> Bool in
            guard state.session === session, state.endHandler == nil else { return false }
            state.endHandler = key
            return true
        }
        if !kept { session.removeEndHandler(key) }
    }

    /// Replaces the contents with `value` if `session` is the bound session and still active.
    ///
    /// - Parameters:
    ///   - value: The new contents.
    ///   - session: The session whose work produced `value`.
    /// - Returns: Whether the value was committed.
    @discardableResult
    public func commit(_ value: Value, from session: UserSession) -> Bool {
        update(from: session) { $0 = value }
    }

    /// Changes the contents in place if `session` is the bound session and still active.
    ///
    /// - Parameters:
    ///   - session: The session whose work produced the change.
    ///   - change: The change; it runs under the container's lock and must not block or call back into it.
    /// - Returns: Whether the change was applied.
    @discardableResult
    public func update(from session: UserSession, _ change: (inout Value) -> Void) -> Bool {
        let accepted = state.withLock { state -> Bool in
            // Identity, not account: a re-login of the same user is another session.
            guard state.session === session, session.isActive else {
                state.discardedCommits += 1
                return false
            }
            change(&state.value)
            return true
        }
        if accepted {
            registrar.withMutation(of: self, keyPath: \.value) {}
        } else {
            registrar.withMutation(of: self, keyPath: \.discardedCommits) {}
        }
        return accepted
    }

    /// Empties the contents, keeping the binding.
    public func clear() {
        state.withLock { $0.value = emptyValue }
        registrar.withMutation(of: self, keyPath: \.value) {}
    }

    private func clear(ifBoundTo id: UserSession.Serial) {
        let cleared = state.withLock { state -> Bool in
            guard state.session?.serial == id else { return false }
            state.value = emptyValue
            return true
        }
        if cleared { registrar.withMutation(of: self, keyPath: \.value) {} }
    }

    private func notifyAll() {
        registrar.withMutation(of: self, keyPath: \.session) {}
        registrar.withMutation(of: self, keyPath: \.value) {}
    }
}
