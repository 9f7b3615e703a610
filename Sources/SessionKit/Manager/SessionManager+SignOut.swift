import Foundation
import SessionKitOAuth

extension SessionManager {
    /// Signs `session` out (the current one by default): detach, clear, cancel, then purge and revoke.
    ///
    /// Before its first suspension, sign-out makes the intent to purge durable (in the data directory, else beside
    /// the store's records; see ``Configuration/dataDirectory``), detaches the session (``current`` and the state
    /// change in the same step), stops it storing credentials and queues the deletion of its credential record
    /// behind every write it admitted, and empties the registered containers. So once ``current`` no longer is the
    /// session, a kill of the process never brings the user back: the next ``restore()`` finishes the purge before
    /// anything authenticates.
    ///
    /// Then writes in flight follow their ``WritePolicy``, the session ends (every request cancelled), and the
    /// record's deletion completes before any server is contacted. The tokens the session held when it ended are
    /// revoked on clients of their own, bounded by ``SignOutOptions/serverTimeout``, best effort (the server steps
    /// run at the same time, so a hung endpoint starves no other; an empty token is never sent), while the
    /// account's directory, outbox and registered resources are purged. The local phases share one deadline,
    /// ``SignOutOptions/localTimeout``. A sign-in of the same account waits until the purge has finished.
    ///
    /// When the session was current and other accounts are live, the one current most recently becomes current (one
    /// never current comes after), and its selection is stored, so the next ``restore()`` makes the same account
    /// current; with none live the state is ``SessionState/signedOut``.
    ///
    /// Signing out a session that is no longer live, of an account that has signed in again since, only makes
    /// sure it has ended: the account's records and files belong to the live session, so the report's purge and
    /// server steps are all ``SignOutReport/StepOutcome/notRequested``.
    ///
    /// - Parameters:
    ///   - session: The session to end; `nil` means the current one.
    ///   - options: Which kinds of sign-out to do.
    /// - Returns: What each phase did, or `nil` when there was nothing to sign out: `session` is `nil` and no
    ///   session is current. Nothing is then purged, revoked or changed.
    /// - Important: When this returns, the session has ended (nothing it started is still running but handed-off
    ///   writes), its credential record is deleted and its directory removed, unless the report's
    ///   ``SignOutReport/credentialDeletion`` or ``SignOutReport/directoryRemoval`` says otherwise
    ///   (``SignOutReport/isPurgeComplete``); a failed purge is retried by ``restore()`` or by the account's next
    ///   sign-in, whichever comes first. With ``SignOutOptions/waitForServer`` off the purge does not wait for the
    ///   server steps, which finish in the background: a process about to exit waits for them with
    ///   ``finishPendingWork(within:)``.
    @discardableResult
    public func signOut(_ session: UserSession? = nil, options: SignOutOptions = SignOutOptions()) async
        -> SignOutReport?
    {
        await end(session, options: options, ending: nil)
    }

    /// Sign-out's phases for `session`, for the user's sign-out (`ending` `nil`) or the provider's ending of the
    /// account (``endAccount(_:because:)``), which the state, the report and the diagnostics tell.
    func end(_ session: UserSession?, options: SignOutOptions, ending: AccountEnding?) async -> SignOutReport? {
        let clock = configuration.sessionConfiguration.clock
        let started = clock.now
        let deadline = started.advanced(by: options.localTimeout)
        let finished = Broadcast<Void>()
        var journalFailure: (any Error)?
        var writesAtDetach: [UserSession.PendingWrite] = []
        var identityResets: [String] = []
        // Detach, before the plan's phases: the manager forgets the session, so no new work can start as this
        // account. The purge intent is durable before anyone can see the session gone: it is written inside the
        // critical section that detaches (the one critical section besides `send`), and only for a session the
        // state detached, never for one a re-login superseded.
        let detached = guarded.withLock { state -> Detached? in
            let detached = state.detach(session, until: finished, ending: ending)
            // The state change is told only once the intent is written: a stream's reader sees no signed-out state
            // before it is durable.
            defer { tell(&state) }
            guard case .detached(let target, _, _, _) = detached else { return detached }
            do { try journal.record(target.account) } catch { journalFailure = error }
            // The writes in flight at the instant the session is seen gone: one that finishes before the wait below
            // reaches it still counts as waited for.
            writesAtDetach = target.pendingWrites
            // The current user's identity elsewhere (analytics) is reset here, before the state change is told and
            // before anyone can sign in or be made current: the next user is never identified as this one.
            if case .detached(_, true, _, _) = detached {
                for reset in state.identityResets {
                    reset.reset(target.account)
                    identityResets.append(reset.name)
                }
            }
            return detached
        }
        guard case .detached(let target, let wasCurrent, let successor, let stateChanged) = detached else {
            guard case .superseded(let target) = detached else { return nil }
            var report = SignOutReport(account: target.account)
            report.endedBy = ending
            report.cancelledRequests = target.finish(refreshError: nil)?.cancelledRequests ?? 0
            return report
        }
        let account = target.account
        defer {
            send(.signOutFinished(account, finished))
            finished.resolve(.success(()))
        }
        var report = SignOutReport(account: account)
        report.endedBy = ending
        report.purgeIntent = .succeeded
        if let journalFailure {
            report.purgeIntent = .failed((journalFailure as? SessionError)?.code ?? .storageFailure)
        }
        // What the phases hand each other: the record's deletion (queued at the seal), the session's tokens and
        // revoker at its end, and the server steps once started.
        var deletion: Task<(any Error)?, Never>?
        var tokens: TokenSet?
        var serverSteps: Task<SignOutReport, Never>?
        var planned: [SignOutPlan.ServerStep] = []
        let plan = SignOutPlan(wasCurrent: wasCurrent, options: options)
        for phase in plan.phases {
            switch phase {
            case .seal:
                // A refresh that still completes serves its last requests and its revocation, from memory.
                target.sealCredentials { deletion = vault.enqueueDelete(for: account) }
            case .clear:
                rebindContainers()
            case .publish:
                successor?.markSwitchedTo(at: clock.wallNow)
                registrar.withMutation(of: self, keyPath: \.sessions) {}
                registrar.withMutation(of: self, keyPath: \.current) {}
                if stateChanged { registrar.withMutation(of: self, keyPath: \.state) {} }
            case .settleWrites:
                await settleWrites(of: target, detachedWith: writesAtDetach, until: deadline, into: &report)
            case .cancel:
                let ending = target.finish(refreshError: nil)
                report.cancelledRequests = ending?.cancelledRequests ?? 0
                report.localPhasesDuration = started.duration(to: clock.now)
                // The tokens the session held when it ended (a refresh committed while writes were waited for
                // included).
                tokens = ending?.tokens
            case .startServerSteps:
                let revoker = target.revoker
                planned = SignOutPlan.serverSteps(options: options, tokens: tokens, canRevoke: revoker != nil)
                // Each server step's outcome is told the moment it is known, whether or not this call waits for it.
                let tell: @Sendable (String, SignOutReport.StepOutcome) -> Void = { [weak self] step, outcome in
                    self?.diagnoseStep(step, outcome, account: account)
                }
                let steps = Task { [configuration, tokens, planned] () -> SignOutReport in
                    await Self.runServerSteps(
                        planned, tokens: tokens, account: account, revoker: revoker, options: options,
                        configuration: configuration, tell: tell)
                }
                serverSteps = steps
                // A process about to exit waits for them (finishPendingWork), whether or not this call does.
                trackPending(.serverSteps, steps)
            case .purge:
                let queued = deletion
                let purge = Task {
                    await self.purge(account, outbox: options.outbox, deadline: deadline, credentialDeletion: queued)
                }
                let purged = await purge.value
                report.credentialDeletion = purged.credentialDeletion
                if tokens?.proofKey != nil { report.proofKeyDestruction = purged.credentialDeletion }
                report.directoryRemoval = purged.directoryRemoval
                report.resourcePurges = identityResets.map { ($0, .succeeded) } + purged.resourcePurges
            case .awaitServerSteps:
                if let server = await serverSteps?.value {
                    for step in SignOutPlan.ServerStep.allCases { report[step] = server[step] }
                }
            }
        }
        // A plan that does not wait for the server steps reports each one it started as running in the background.
        if !plan.phases.contains(.awaitServerSteps) {
            for step in planned { report[step] = .inBackground }
        }
        diagnoseSteps(of: report)
        return report
    }

    /// Waits for the session's writes in flight whose policy says so, all within the local deadline, and counts
    /// each kind in `report`: those in flight at the detach, and any the app started since through a reference it
    /// kept.
    func settleWrites(
        of target: UserSession, detachedWith writesAtDetach: [UserSession.PendingWrite],
        until deadline: ContinuousClock.Instant, into report: inout SignOutReport
    ) async {
        let clock = configuration.sessionConfiguration.clock
        var writes = writesAtDetach
        for later in target.pendingWrites where !writes.contains(where: { $0.done === later.done }) {
            writes.append(later)
        }
        for write in writes {
            switch write.policy {
            case .wait(let bound):
                let own = clock.now.advanced(by: bound)
                do {
                    try await write.done.value(
                        deadline: min(own, deadline),
                        clock: clock,
                        timeoutError: SessionError(.timedOut, "write still in flight at sign-out")
                    )
                    report.writesWaitedFor += 1
                } catch {
                    report.writesAbandoned += 1
                }
            case .handOff:
                report.writesHandedOff += 1
                trackPending(.handedOffWrite, until: write.done)
            case .discard: report.writesDiscarded += 1
            }
        }
    }

    /// Emits each local step of a sign-out that ran, with its outcome, and the server steps left to the background
    /// as such (their own outcomes are told by ``diagnoseStep(_:_:account:)`` when known).
    func diagnoseSteps(of report: SignOutReport) {
        guard configuration.sessionConfiguration.diagnostics != nil else { return }
        var steps: [(String, SignOutReport.StepOutcome)] = [
            ("purge_intent", report.purgeIntent), ("credential_deletion", report.credentialDeletion),
            ("proof_key_destruction", report.proofKeyDestruction), ("directory_removal", report.directoryRemoval),
        ]
        steps += report.resourcePurges.map { ("resource:\($0.resource)", $0.outcome) }
        steps += SignOutPlan.ServerStep.allCases.map { ($0.rawValue, report[$0]) }.filter { $0.1 == .inBackground }
        for (step, outcome) in steps { diagnoseStep(step, outcome, account: report.account) }
    }

    /// Emits one step of a sign-out with its outcome, unless it did not run: failures as warnings.
    func diagnoseStep(_ step: String, _ outcome: SignOutReport.StepOutcome, account: Account) {
        guard outcome != .notRequested else { return }
        let failed = outcome != .succeeded && outcome != .inBackground
        diagnose(
            failed ? .warning : .info, .signOutStep, account: account, ["step": step, "outcome": outcome.description])
    }

    /// Whether a bounded step talks to a server, which decides what a passed bound is called: a server step says
    /// what is known of it (never sent, or sent and not answered); a local step simply did not finish in time.
    enum StepKind { case server, local }

    /// Runs `step` until `deadline`: its outcome, or, once the bound has passed, `.timedOut` for a local step and
    /// for a server step `.unanswered` (it was started) or `.notSent` (the bound had passed before it could start,
    /// and it never does). A step the bound cuts short is cancelled and left behind.
    ///
    /// An error that is not a ``SessionError`` is reported as `otherErrors`: a server step's as
    /// `networkUnavailable`, a purge step's as `storageFailure`. ``SessionError/Code/noRevocationEndpoint`` is
    /// reported as `.noEndpoint`: the step had nowhere to go, which is not a failure of the app's input.
    static func bounded(
        until deadline: ContinuousClock.Instant,
        clock: any SessionClock,
        kind: StepKind = .server,
        otherErrors: SessionError.Code = .networkUnavailable,
        _ step: @escaping @Sendable () async throws -> Void
    ) async -> SignOutReport.StepOutcome {
        let passed: SignOutReport.StepOutcome = kind == .server ? .unanswered : .timedOut
        if kind == .server, clock.now >= deadline { return .notSent }
        let outcome = Broadcast<SignOutReport.StepOutcome>()
        let work = Task {
            do {
                try await step()
                outcome.resolve(.success(.succeeded))
            } catch let error as SessionError where error.code == .noRevocationEndpoint {
                // Nothing could be sent: the provider has nowhere to send it, which the app did not get wrong.
                outcome.resolve(.success(.noEndpoint))
            } catch let error as SessionError {
                outcome.resolve(.success(.failed(error.code)))
            } catch {
                outcome.resolve(.success(.failed(otherErrors)))
            }
        }
        let result =
            (try? await outcome.value(
                deadline: deadline,
                clock: clock,
                timeoutError: SessionError(.timedOut, "sign-out step timed out")
            )) ?? passed
        if result == passed { work.cancel() }
        return result
    }

    /// Runs sign-out's server steps at the same time, each within the one ``SignOutOptions/serverTimeout``, so a
    /// hung endpoint costs the others nothing.
    ///
    /// One order is kept, where the plan says so (``SignOutPlan/accessRevocationWaitsForBackend(_:)``): the access
    /// token's revocation starts once the app's backend step has finished, or half the bound has passed, whichever
    /// comes first, because a backend that authenticates its sign-out call with the access token must see it still
    /// valid. Only the `planned` steps run (``SignOutPlan/serverSteps(options:tokens:canRevoke:)``,
    /// which never plans the revocation of an empty token).
    static func runServerSteps(
        _ planned: [SignOutPlan.ServerStep],
        tokens: TokenSet?,
        account: Account,
        revoker: (any TokenRevoker)?,
        options: SignOutOptions,
        configuration: Configuration,
        tell: @escaping @Sendable (String, SignOutReport.StepOutcome) -> Void = { _, _ in }
    ) async -> SignOutReport {
        let clock = configuration.sessionConfiguration.clock
        let deadline = clock.now.advanced(by: options.serverTimeout)
        // Which tokens are sent is the plan's decision (an empty one never is); these are only what it decided on.
        let refreshToken = tokens?.refreshToken
        let accessToken = tokens?.accessToken
        let backendFinished = Broadcast<Void>()

        async let refreshOutcome: SignOutReport.StepOutcome = {
            guard planned.contains(.refreshTokenRevocation), let revoker, let refreshToken else { return .notRequested }
            let outcome = await bounded(until: deadline, clock: clock) {
                try await revoker.revoke(refreshToken, hint: .refreshToken)
            }
            tell(SignOutPlan.ServerStep.refreshTokenRevocation.rawValue, outcome)
            return outcome
        }()
        // The app's and the provider's steps of the list, each kind run in the list's order within its one bound.
        let backends = options.serverSteps.compactMap { step -> (@Sendable (TokenSet) async throws -> Void)? in
            if case .backend(let call) = step.kind { call } else { nil }
        }
        let providerSteps = options.serverSteps.filter { $0.reportedAs == .providerLogout }
        let waitsForBackend = SignOutPlan.accessRevocationWaitsForBackend(planned)
        async let backendOutcome: SignOutReport.StepOutcome = {
            defer { _ = backendFinished.resolve(.success(())) }
            guard planned.contains(.serverSession), let tokens else { return .notRequested }
            let outcome = await bounded(until: deadline, clock: clock) {
                for backend in backends { try await backend(tokens) }
            }
            tell(SignOutPlan.ServerStep.serverSession.rawValue, outcome)
            return outcome
        }()
        async let accessOutcome: SignOutReport.StepOutcome = {
            guard planned.contains(.accessTokenRevocation), let revoker, let accessToken else { return .notRequested }
            if waitsForBackend {
                let halfway = clock.now.advanced(by: options.serverTimeout / 2)
                _ = try? await backendFinished.value(
                    deadline: min(halfway, deadline), clock: clock,
                    timeoutError: SessionError(.timedOut, "backend sign-out still running"))
            }
            let outcome = await bounded(until: deadline, clock: clock) {
                try await revoker.revoke(accessToken, hint: .accessToken)
            }
            tell(SignOutPlan.ServerStep.accessTokenRevocation.rawValue, outcome)
            return outcome
        }()
        async let providerOutcome: SignOutReport.StepOutcome = {
            guard planned.contains(.providerLogout) else { return .notRequested }
            let idToken = tokens?.idToken
            let outcome = await bounded(until: deadline, clock: clock) {
                for step in providerSteps {
                    switch step.kind {
                    case .provider(let call): try await call(account)
                    case .openID(let logout): try await logout.run(idToken: idToken)
                    default: break
                    }
                }
            }
            tell(SignOutPlan.ServerStep.providerLogout.rawValue, outcome)
            return outcome
        }()

        var report = SignOutReport(account: account)
        report.refreshTokenRevocation = await refreshOutcome
        report.serverSession = await backendOutcome
        report.accessTokenRevocation = await accessOutcome
        report.providerLogout = await providerOutcome
        return report
    }

    /// Deletes the account's credential record (behind every admitted write), its directory and outbox, and every
    /// registered resource's data, each step by `deadline`; then forgets the purge intent if every step succeeded.
    ///
    /// - Parameters:
    ///   - account: The account.
    ///   - outbox: What becomes of its outbox.
    ///   - deadline: When the steps still running are given up (and retried at the next launch or sign-in).
    ///   - credentialDeletion: The record's deletion, if already queued; else one is queued now.
    /// - Returns: The outcome of each step, in the report's terms.
    func purge(
        _ account: Account,
        outbox: SignOutOptions.OutboxDisposition,
        deadline: ContinuousClock.Instant,
        credentialDeletion: Task<(any Error)?, Never>? = nil
    ) async -> PurgeOutcomes {
        let clock = configuration.sessionConfiguration.clock
        var outcomes = PurgeOutcomes()
        let deletion = credentialDeletion ?? vault.enqueueDelete(for: account)
        outcomes.credentialDeletion = await Self.bounded(
            until: deadline, clock: clock, kind: .local, otherErrors: .storageFailure
        ) {
            if let error = await deletion.value { throw error }
        }
        // The outbox is closed either way; a directory is reported only where the manager keeps one.
        let directoryGone = directories.purge(account, outbox: outbox)
        if directories.root != nil {
            outcomes.directoryRemoval = directoryGone ? .succeeded : .failed(.storageFailure)
        }
        for resource in snapshot.resources.inPurgeOrder {
            let outcome = await Self.bounded(
                until: deadline, clock: clock, kind: .local, otherErrors: .storageFailure
            ) {
                try await resource.purge(for: account)
            }
            outcomes.resourcePurges.append((resource.name, outcome))
        }
        if outcomes.succeeded { journal.complete(account) }
        return outcomes
    }
}

/// What each step of a purge did (``SessionManager/purge(_:outbox:deadline:credentialDeletion:)``).
struct PurgeOutcomes: Sendable {
    var credentialDeletion = SignOutReport.StepOutcome.notRequested
    var directoryRemoval = SignOutReport.StepOutcome.notRequested
    var resourcePurges: [(resource: String, outcome: SignOutReport.StepOutcome)] = []

    /// Whether no step failed or timed out.
    var succeeded: Bool {
        ([credentialDeletion, directoryRemoval] + resourcePurges.map { $0.outcome }).allSatisfy {
            $0 == .succeeded || $0 == .notRequested
        }
    }
}
