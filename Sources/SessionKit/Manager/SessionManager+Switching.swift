import Foundation
import SessionKitOAuth

// Which session is current, and what follows it: installing a session, switching to one, and the containers that
// are rebound (and so emptied) whenever the current session changes.
extension SessionManager {
    /// Makes `session` live (and current, or current anyway when it replaces the current session of its
    /// account), ending any other live session of the same account.
    ///
    /// - Parameters:
    ///   - session: The new session.
    ///   - makeCurrent: Whether it becomes current.
    ///   - event: What to tell the state machine, under the same lock that changes `current`.
    func install(_ session: UserSession, makeCurrent: Bool, event: SessionState.Event? = nil) {
        guard
            case .installed(let replaced, let changed) = send(.install(session, makeCurrent: makeCurrent, event: event))
        else { return }
        rebindContainers()
        for old in replaced { old.end() }
        registrar.withMutation(of: self, keyPath: \.sessions) {}
        registrar.withMutation(of: self, keyPath: \.current) {}
        if changed { registrar.withMutation(of: self, keyPath: \.state) {} }
    }

    /// Makes `session` the current one; the previous current session stays alive unless `endingOthers`.
    ///
    /// State held for the previous account (every registered ``SessionScoped`` container) is emptied at once, and
    /// the switch is remembered with the session's credentials, so that ``restore()`` brings this account back.
    ///
    /// - Parameters:
    ///   - session: A live session.
    ///   - endingOthers: Whether every other live session is signed out.
    ///   - options: How the others are signed out.
    /// - Returns: The reports of the sessions signed out.
    /// - Throws: ``SessionError`` (`sessionEnded`) when `session` is not live.
    /// - Important: Registered containers are rebound, and so emptied, before the first `await`: the next frame
    ///   shows nothing of the previous account. A response that the previous account's session receives later is
    ///   refused at commit, because the containers are now bound to `session`.
    @discardableResult
    public func switchTo(
        _ session: UserSession,
        endingOthers: Bool = false,
        options: SignOutOptions = SignOutOptions()
    ) async throws -> [SignOutReport] {
        guard case .switched(let others?, let changed) = send(.switchTo(session)) else {
            throw SessionError(.sessionEnded, "cannot switch to a session that is not live")
        }
        rebindContainers()
        session.markSwitchedTo(at: configuration.sessionConfiguration.clock.wallNow)
        registrar.withMutation(of: self, keyPath: \.current) {}
        if changed { registrar.withMutation(of: self, keyPath: \.state) {} }
        guard endingOthers else { return [] }
        var reports: [SignOutReport] = []
        for other in others { if let report = await signOut(other, options: options) { reports.append(report) } }
        return reports
    }

    /// Binds every registered container to the session that is current now.
    ///
    /// Bound outside the manager's lock (a container notifies its observers, which may read the manager), but
    /// under a lock of its own, reading `current` inside it: two switches that race both rebind, and the one that
    /// rebinds last reads the session current then, so no container stays bound to a session that is not current.
    func rebindContainers() {
        binding.withLock { rebinds in
            rebinds &+= 1
            guard case .bind(let current, let containers) = send(.containersToBind) else { return }
            for container in containers { container.target?.bind(to: current) }
        }
    }
}

/// A weak reference to a registered container.
struct WeakBindable: Sendable {
    weak var target: (any SessionBindable)?

    init(_ target: any SessionBindable) { self.target = target }
}

/// A container whose contents follow one session.
protocol SessionBindable: AnyObject, Sendable {
    func bind(to session: UserSession?)
}

extension SessionScoped: SessionBindable {}
