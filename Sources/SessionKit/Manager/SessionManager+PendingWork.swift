import Foundation
import SessionKitOAuth

// Work the manager started that outlives the call that started it: what a process waits for before it exits. The
// manager's state keeps each piece (``ManagerState/pendingWork``) until it resolves.
extension SessionManager {
    /// Tracks `done` until it resolves.
    func trackPending(_ kind: PendingWorkKind, until done: Broadcast<Void>) {
        let id = send(.track(kind, done)).id
        Task { [weak self] in
            _ = try? await done.value(deadline: nil, clock: SystemClock(), timeoutError: CancellationError())
            self?.send(.untrack(id))
        }
    }

    /// Tracks `task` until it ends.
    func trackPending<T: Sendable>(_ kind: PendingWorkKind, _ task: Task<T, Never>) {
        let done = Broadcast<Void>()
        trackPending(kind, until: done)
        Task {
            _ = await task.value
            done.resolve(.success(()))
        }
    }
}

extension SessionManager {
    /// What was still running when ``SessionManager/finishPendingWork(within:)`` gave up; all zero when everything
    /// finished.
    public struct PendingWork: Sendable, Hashable, CustomStringConvertible {
        /// Refreshes still waiting for the provider: a refresh token the server may have rotated.
        public var refreshes = 0
        /// Credential store operations still queued: writes of rotated tokens and selections, deletions of records
        /// (a rejected refresh token's, a sign-out's).
        public var credentialOperations = 0
        /// Sign-outs whose server steps (revocations, provider logout) still run in the background.
        public var serverSteps = 0
        /// Writes handed off at sign-out that have not finished.
        public var handedOffWrites = 0

        /// Whether nothing was left.
        public var isEmpty: Bool { self == PendingWork() }

        /// What was left, by kind; no account, token or URL.
        public var description: String {
            guard !isEmpty else { return "no pending work" }
            return [
                (refreshes, "refreshes"), (credentialOperations, "credential operations"),
                (serverSteps, "sign-out server steps"), (handedOffWrites, "handed-off writes"),
            ].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + " still pending"
        }
    }

    /// Waits, at most `timeout`, for the work SessionKit still does after the calls that started it returned: so
    /// that a process can exit (a command-line tool after its command, an app being suspended, a server shutting
    /// down) without losing it.
    ///
    /// That work is: refreshes in flight (whose rotated refresh token must be stored, or the next launch presents
    /// a retired one), credential writes and deletions queued (the deletion of a record whose refresh token the
    /// provider rejected, which otherwise stays on disk and is presented again at every launch), a sign-out's
    /// revocations running in the background (``SignOutOptions/waitForServer`` off), and writes handed off at
    /// sign-out. Nothing new is started, and nothing is cancelled: what is still running at the deadline goes on.
    /// Last, the diagnostics sink is flushed (``Diagnostics/flush()``): the events that work emitted are written.
    ///
    /// ```swift
    /// await manager.restore()
    /// try await runCommand(manager)
    /// let left = await manager.finishPendingWork(within: .seconds(3))
    /// if !left.isEmpty { print("warning: \(left)") }
    /// ```
    ///
    /// - Parameter timeout: The longest it waits, on the session clock; 5 seconds by default.
    /// - Returns: What was still running at the deadline; ``PendingWork/isEmpty`` when everything finished.
    @discardableResult
    public func finishPendingWork(within timeout: Duration = .seconds(5)) async -> PendingWork {
        let clock = configuration.sessionConfiguration.clock
        let deadline = clock.now.advanced(by: timeout)
        func finished(_ done: Broadcast<Void>) async -> Bool {
            (try? await done.value(
                deadline: deadline, clock: clock, timeoutError: SessionError(.timedOut, "pending work")))
                != nil
        }
        func signal<T: Sendable>(_ task: Task<T, Never>) -> Broadcast<Void> {
            let done = Broadcast<Void>()
            Task {
                _ = await task.value
                done.resolve(.success(()))
            }
            return done
        }
        var left = PendingWork()
        // Refreshes first: a flight's outcome queues a write or a deletion, which the vault's drain then waits for.
        for session in snapshot.sessions {
            guard let flight = session.refresher?.flightTask else { continue }
            if !(await finished(signal(flight))) { left.refreshes += 1 }
        }
        let running = snapshot.pendingWork.sorted { $0.key < $1.key }.map(\.value)
        for (kind, done) in running where !(await finished(done)) {
            switch kind {
            case .serverSteps: left.serverSteps += 1
            case .handedOffWrite: left.handedOffWrites += 1
            }
        }
        // Last: what finished above may have queued more.
        left.credentialOperations = await finishCredentialOperations(until: deadline)
        // Last of all, the events that work emitted: a process exiting next loses none of them.
        configuration.sessionConfiguration.diagnostics?.flush()
        return left
    }

    /// Waits until the vault's queues are empty or `deadline` passes, whichever comes first; each round waits
    /// for what was queued when it began, then looks again (a finished write may have queued a deletion).
    ///
    /// - Returns: How many credential operations were still queued at the end.
    func finishCredentialOperations(until deadline: ContinuousClock.Instant) async -> Int {
        let clock = configuration.sessionConfiguration.clock
        while vault.pending.operations > 0, clock.now < deadline {
            let markers = vault.drain()
            var all = true
            for marker in markers {
                let done = Broadcast<Void>()
                Task {
                    await marker.value
                    done.resolve(.success(()))
                }
                let finished =
                    (try? await done.value(
                        deadline: deadline, clock: clock, timeoutError: SessionError(.timedOut, "pending work")))
                    != nil
                if !finished { all = false }
            }
            if !all { break }
        }
        return vault.pending.operations
    }
}
