import Foundation
import Observation
import Synchronization

/// The one coordinator the app owns: it signs in, restores at launch, signs out in order, switches accounts,
/// lists the live sessions and publishes the state.
///
/// Screens and interceptors never refresh or clear credentials on their own: they ask the manager, or use the
/// ``current`` session, whose requests carry that session's token only.
///
/// Sign-out runs the five phases in order — detach, clear, cancel, revoke, purge — with detach and clear
/// before the first `await`, so no new work starts as the signed-out account and the next frame shows nothing
/// of it. Revocation is best effort and bounded; the local phases always complete.
///
/// - Important: Observable (Observation, so SwiftUI too) through ``state``, ``current`` and ``sessions``,
///   and as an `AsyncStream` through ``states``. Thread-safe.
public final class SessionManager: Sendable, Observable {
    /// What the manager needs to know.
    public struct Configuration: Sendable {
        /// Where credentials live between launches.
        public var store: any CredentialStore
        /// How sessions refresh; `nil` means a 401 cannot be recovered.
        public var tokenEndpoint: (any TokenEndpoint)?
        /// How sign-out revokes tokens; `nil` means it does not.
        public var revoker: (any TokenRevoker)?
        /// A biometric or user-presence check before each use of a refresh token, if the app wants one.
        public var userPresence: (any UserPresencePrompt)?
        /// How each session sends requests.
        public var sessionConfiguration: UserSession.Configuration
        /// When sessions refresh.
        public var refreshPolicy: RefreshPolicy
        /// The app-chosen root of per-account directories and of the purge journal; `nil` keeps both in
        /// memory (a purge interrupted by a crash is then not finished at next launch).
        public var dataDirectory: URL?

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - store: The credential store.
        ///   - tokenEndpoint: The refresh client.
        ///   - revoker: The revocation client.
        ///   - userPresence: The presence check guarding refresh tokens.
        ///   - sessionConfiguration: Per-session settings.
        ///   - refreshPolicy: Refresh settings.
        ///   - dataDirectory: Root of per-account data.
        public init(
            store: any CredentialStore,
            tokenEndpoint: (any TokenEndpoint)? = nil,
            revoker: (any TokenRevoker)? = nil,
            userPresence: (any UserPresencePrompt)? = nil,
            sessionConfiguration: UserSession.Configuration = UserSession.Configuration(),
            refreshPolicy: RefreshPolicy = RefreshPolicy(),
            dataDirectory: URL? = nil
        ) {
            self.store = store
            self.tokenEndpoint = tokenEndpoint
            self.revoker = revoker
            self.userPresence = userPresence
            self.sessionConfiguration = sessionConfiguration
            self.refreshPolicy = refreshPolicy
            self.dataDirectory = dataDirectory
        }
    }

    private struct State {
        var state = SessionState.signedOut
        var sessions: [UserSession] = []
        var current: UserSession?
        var containers: [WeakBindable] = []
        var resources: [any UserScopedResource] = []
        var continuations: [Int: AsyncStream<SessionState>.Continuation] = [:]
        var nextContinuationID = 0
        /// Sign-outs in progress per account, until their purge has finished.
        var signOuts: [Account: [Broadcast<Void>]] = [:]
    }

    /// The configuration the manager was created with.
    public let configuration: Configuration
    /// The credential store behind one queue per account: a read, a write and the sign-out purge of one account
    /// run in the order they were asked for, so a purge is always the last operation on a signed-out account.
    public let vault: CredentialVault
    /// What became of writes in flight at sign-out, kept for each account's next session.
    public let ledger = WriteLedger()
    private let journal: PurgeJournal
    private let registrar = ObservationRegistrar()
    private let guarded = Lock(State())

    /// Creates a manager. Call ``restore()`` at launch.
    ///
    /// - Parameter configuration: What the manager needs.
    public init(configuration: Configuration) {
        self.configuration = configuration
        self.vault = CredentialVault(store: configuration.store)
        self.journal = PurgeJournal(directory: configuration.dataDirectory?.appendingPathComponent("purge-pending"))
    }

    // MARK: - Observation

    /// Where the current session stands.
    public var state: SessionState {
        registrar.access(self, keyPath: \.state)
        return guarded.withLock { $0.state }
    }

    /// The session the app acts as now, if any.
    public var current: UserSession? {
        registrar.access(self, keyPath: \.current)
        return guarded.withLock { $0.current }
    }

    /// Every live session (the current one and those kept alive across account switches).
    public var sessions: [UserSession] {
        registrar.access(self, keyPath: \.sessions)
        return guarded.withLock { $0.sessions }
    }

    /// The states from now on, starting with the current one.
    ///
    /// Each read makes a new stream. It never finishes on its own: cancel the task that iterates it.
    public var states: AsyncStream<SessionState> {
        let (stream, continuation) = AsyncStream<SessionState>.makeStream(bufferingPolicy: .unbounded)
        let id = guarded.withLock { guarded -> Int in
            guarded.nextContinuationID += 1
            guarded.continuations[guarded.nextContinuationID] = continuation
            continuation.yield(guarded.state)
            return guarded.nextContinuationID
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.guarded.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// Feeds an event to the state machine for the current session and publishes the result.
    private func apply(_ event: SessionState.Event) {
        guarded.withLock { guarded in
            let next = guarded.state.applying(event)
            guard next != guarded.state else { return }
            guarded.state = next
            for continuation in guarded.continuations.values { continuation.yield(next) }
        }
        registrar.withMutation(of: self, keyPath: \.state) {}
    }

    // MARK: - Registration

    /// Registers a container whose contents follow the current session: emptied at once when it changes.
    ///
    /// - Parameter container: The container; held weakly.
    public func register<Value: Sendable>(_ container: SessionScoped<Value>) {
        let current = guarded.withLock { guarded -> UserSession? in
            guarded.containers.removeAll { $0.target == nil }
            guarded.containers.append(WeakBindable(container))
            return guarded.current
        }
        container.bind(to: current)
    }

    /// Registers something that belongs to the user and must be purged at sign-out, in registration order.
    ///
    /// - Parameter resource: The resource and its purge step.
    public func register(_ resource: any UserScopedResource) {
        guarded.withLock { $0.resources.append(resource) }
    }

    /// The directory that holds `account`'s files, created on first use (mode 0700); purged at sign-out.
    ///
    /// - Parameter account: The account.
    /// - Returns: The directory, or `nil` when the manager has no data directory.
    public func directory(for account: Account) -> URL? {
        guard let root = configuration.dataDirectory else { return nil }
        let url = root.appendingPathComponent("accounts").appendingPathComponent(account.storageKey)
        try? FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        return url
    }

    /// The outbox of `account`'s queued writes, stored in its directory.
    ///
    /// - Parameter account: The account.
    /// - Returns: The outbox; replayable only by a session of `account`.
    public func outbox(for account: Account) -> Outbox {
        Outbox(account: account, file: directory(for: account)?.appendingPathComponent("outbox.json"))
    }

    // MARK: - Sign-in

    /// Signs `account` in with tokens obtained elsewhere (a grant the app ran, a test fixture).
    ///
    /// A sign-out of the same account still in progress (revoking, then purging) finishes first. A live session
    /// of the same account is ended before the new record is written (locally: its record is replaced, not
    /// purged), so nothing it was still writing can land after the new record.
    ///
    /// - Parameters:
    ///   - account: Who signed in.
    ///   - tokens: Their tokens.
    ///   - makeCurrent: Whether the new session becomes ``current``; other sessions stay alive either way.
    /// - Returns: The new session.
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`) when the credentials cannot be stored.
    @discardableResult
    public func signIn(_ account: Account, tokens: TokenSet, makeCurrent: Bool = true) async throws -> UserSession {
        try await signIn(account, makeCurrent: makeCurrent) { tokens }
    }

    /// Signs in by running `authenticate` (an OAuth grant, a device flow), publishing `authenticating` while it
    /// runs.
    ///
    /// - Parameters:
    ///   - account: Who is signing in.
    ///   - makeCurrent: Whether the new session becomes ``current``.
    ///   - authenticate: Obtains the tokens.
    /// - Returns: The new session.
    /// - Throws: What `authenticate` throws (`userCancelled` returns the state to signed out), or a storage error.
    @discardableResult
    public func signIn(
        _ account: Account,
        makeCurrent: Bool = true,
        authenticate: @Sendable () async throws -> TokenSet
    ) async throws -> UserSession {
        if makeCurrent { apply(.signInStarted) }
        let tokens: TokenSet
        do {
            tokens = try await authenticate()
        } catch let error as SessionError where error.code == .userCancelled {
            if makeCurrent { apply(.userCancelled) }
            throw error
        } catch {
            let failure = error as? SessionError ?? SessionError(.authorizationFailed, "sign-in failed")
            if makeCurrent { apply(.signInFailed(failure)) }
            throw failure
        }
        // A sign-out of this account that is still revoking or purging finishes first: its purge deletes the
        // account's record and directory, and would take this sign-in's with them.
        while let signOut = guarded.withLock({ $0.signOuts[account]?.first }) {
            _ = try? await signOut.value(
                deadline: nil, clock: configuration.sessionConfiguration.clock, timeoutError: CancellationError())
            if Task.isCancelled { break }
        }
        // The account's live session ends before the new record is written, so no credential write it admitted
        // (a refresh committing now) can land after the new record.
        for replaced in guarded.withLock({ $0.sessions.filter { $0.account == account } }) { replaced.end() }
        let session = makeSession(account: account, tokens: tokens)
        do {
            if let write = session.persistTokens(), let error = await write.value { throw error }
        } catch {
            session.end()
            let failure = error as? SessionError ?? SessionError(.storageFailure, "could not store credentials")
            if makeCurrent { apply(.signInFailed(failure)) }
            throw failure
        }
        install(session, makeCurrent: makeCurrent)
        if makeCurrent { apply(.signedIn(account)) }
        return session
    }

    private func makeSession(account: Account, tokens: TokenSet) -> UserSession {
        var endpoint = configuration.tokenEndpoint
        if let inner = endpoint, let prompt = configuration.userPresence {
            endpoint = PresenceGuardedEndpoint(inner: inner, prompt: prompt)
        }
        let session = UserSession(
            account: account,
            tokens: tokens,
            configuration: configuration.sessionConfiguration,
            vault: vault,
            tokenEndpoint: endpoint,
            refreshPolicy: configuration.refreshPolicy,
            ledger: ledger
        )
        session.setEventHandler { [weak self, weak session] event in
            guard let self, let session else { return }
            self.handle(event, from: session)
        }
        return session
    }

    /// Makes `session` live (and current), ending any other live session of the same account.
    private func install(_ session: UserSession, makeCurrent: Bool) {
        let (replaced, containers) = guarded.withLock { guarded -> ([UserSession], [WeakBindable]) in
            let replaced = guarded.sessions.filter { $0.account == session.account }
            guarded.sessions.removeAll { $0.account == session.account }
            guarded.sessions.append(session)
            if makeCurrent || replaced.contains(where: { $0 === guarded.current }) { guarded.current = session }
            return (replaced, guarded.containers)
        }
        let current = guarded.withLock { $0.current }
        for container in containers { container.target?.bind(to: current) }
        for old in replaced { old.end() }
        registrar.withMutation(of: self, keyPath: \.sessions) {}
        registrar.withMutation(of: self, keyPath: \.current) {}
    }

    private func handle(_ event: SessionEvent, from session: UserSession) {
        let isCurrent = guarded.withLock { $0.current === session }
        switch event {
        case .refreshStarted:
            if isCurrent { apply(.refreshStarted) }
        case .refreshed:
            if isCurrent { apply(.refreshSucceeded) }
        case .refreshFailed(let error):
            guard isCurrent else { return }
            if error.code == .userCancelled {
                apply(.userCancelled)
            } else if error.isTransient {
                apply(.refreshFailedTransiently)
            } else {
                apply(.refreshSucceeded)  // back to active: the token in hand is unchanged
            }
        case .refreshRejected(let error):
            // The refresh token is dead: end the session, purge its credentials, ask the user to sign in.
            let account = session.account
            let wasCurrent = guarded.withLock { guarded -> Bool in
                guarded.sessions.removeAll { $0 === session }
                guard guarded.current === session else { return false }
                guarded.current = nil
                return true
            }
            if wasCurrent {
                for container in guarded.withLock({ $0.containers }) { container.target?.bind(to: nil) }
                apply(.refreshRejected)
            }
            // Only this session's record: a sign-in of the same account may have saved a new one meanwhile (the
            // session left `sessions` above, so nothing makes that sign-in wait for this deletion). The deletion is
            // queued at the moment the session stops admitting writes, with the refresh token it holds then: no
            // refresh can commit a newer one afterwards, and whoever sees the session ended finds it queued. A
            // session something else ended first (a sign-out, which purges; a re-login, whose record must stay) is
            // left to that.
            let vault = vault
            session.finish(refreshError: error) { refreshToken in
                if let refreshToken {
                    vault.enqueueDelete(for: account, ifHolding: refreshToken)
                } else {
                    vault.enqueueDelete(for: account)
                }
            }
            registrar.withMutation(of: self, keyPath: \.sessions) {}
            registrar.withMutation(of: self, keyPath: \.current) {}
        case .storageFailed:
            break
        }
    }

    // MARK: - Switching

    /// Makes `session` the current one; the previous current session stays alive unless `endingOthers`.
    ///
    /// State held for the previous account (every registered ``SessionScoped`` container) is emptied at once.
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
        let (live, containers, others) = guarded.withLock { guarded in
            let live = guarded.sessions.contains { $0 === session } && session.isActive
            if live { guarded.current = session }
            return (live, guarded.containers, guarded.sessions.filter { $0 !== session })
        }
        guard live else { throw SessionError(.sessionEnded, "cannot switch to a session that is not live") }
        for container in containers { container.target?.bind(to: session) }
        registrar.withMutation(of: self, keyPath: \.current) {}
        apply(.switched(session.account))
        guard endingOthers else { return [] }
        var reports: [SignOutReport] = []
        for other in others { reports.append(await signOut(other, options: options)) }
        return reports
    }

    // MARK: - Sign-out

    /// Signs `session` out (the current one by default) in the five phases: detach, clear, cancel, revoke,
    /// purge.
    ///
    /// Detach and clear happen before the first `await`. Writes in flight follow their ``WritePolicy``. The
    /// server-side steps run on clients of their own, bounded by ``SignOutOptions/serverTimeout``, best effort.
    /// The purge is recorded before it starts, so one interrupted by a crash is finished by ``restore()``. A
    /// sign-in of the same account waits until the purge has finished.
    ///
    /// Signing out a session that is no longer live, of an account that has signed in again since, only makes
    /// sure it has ended: the account's records and files belong to the live session.
    ///
    /// - Parameters:
    ///   - session: The session to end; `nil` means the current one.
    ///   - options: Which kinds of sign-out to do.
    /// - Returns: What each phase did; an empty report if there was nothing to sign out.
    /// - Important: When this returns, the session has ended (nothing it started is still running but handed-off
    ///   writes), its credential record is deleted and its directory removed, unless
    ///   ``SignOutReport/purgeFailures`` says otherwise; a failed purge is retried by ``restore()``.
    @discardableResult
    public func signOut(_ session: UserSession? = nil, options: SignOutOptions = SignOutOptions()) async
        -> SignOutReport
    {
        let clock = configuration.sessionConfiguration.clock
        let started = clock.now
        let finished = Broadcast<Void>()
        // 1. Detach: the manager forgets the session, so no new work can start as this account.
        let detached = guarded.withLock { guarded -> Detached? in
            guard let target = session ?? guarded.current else { return nil }
            // A session that a re-login replaced: the account and its data belong to the live session now.
            if !guarded.sessions.contains(where: { $0 === target }),
                guarded.sessions.contains(where: { $0.account == target.account })
            {
                return .superseded(target)
            }
            guarded.sessions.removeAll { $0 === target }
            let wasCurrent = guarded.current === target
            if wasCurrent { guarded.current = nil }
            // Until the purge has finished, a sign-in of this account waits.
            guarded.signOuts[target.account, default: []].append(finished)
            return .detached(target, wasCurrent: wasCurrent, containers: guarded.containers)
        }
        guard case .detached(let target, let wasCurrent, let containers) = detached else {
            if case .superseded(let target) = detached {
                target.end()
                return SignOutReport(account: target.account)
            }
            return SignOutReport(account: Account(issuer: "", subject: ""))
        }
        let account = target.account
        defer {
            guarded.withLock { guarded in
                guarded.signOuts[account]?.removeAll { $0 === finished }
                if guarded.signOuts[account]?.isEmpty == true { guarded.signOuts[account] = nil }
            }
            finished.resolve(.success(()))
        }
        var report = SignOutReport(account: account)
        let tokens = target.tokens
        // 2. Clear: the account's state leaves every screen before anything suspends.
        if wasCurrent {
            for container in containers { container.target?.bind(to: nil) }
            apply(.signedOut)
        }
        registrar.withMutation(of: self, keyPath: \.sessions) {}
        registrar.withMutation(of: self, keyPath: \.current) {}

        // Writes in flight: wait briefly for those whose policy says so; count the others.
        for write in target.pendingWrites {
            switch write.policy {
            case .wait(let bound):
                do {
                    try await write.done.value(
                        deadline: clock.now.advanced(by: bound),
                        clock: clock,
                        timeoutError: SessionError(.timedOut, "write still in flight at sign-out")
                    )
                    report.writesWaitedFor += 1
                } catch {
                    report.writesAbandoned += 1
                }
            case .handOff: report.writesHandedOff += 1
            case .discard: report.writesDiscarded += 1
            }
        }

        // 3. Cancel: no request, refresh or credential write of this session survives this line.
        report.cancelledRequests = target.end()
        report.localPhasesDuration = started.duration(to: clock.now)

        // The purge intent is durable before the first server call, so a kill from here on is recovered.
        do { try journal.record(account) } catch { report.purgeFailures.append("journal: \(error)") }

        // 4. Revoke, best effort and bounded, on clients of their own.
        let serverSteps = Task { [configuration] () -> SignOutReport in
            await Self.runServerSteps(tokens: tokens, account: account, options: options, configuration: configuration)
        }
        if options.waitForServer {
            let server = await serverSteps.value
            report.refreshTokenRevocation = server.refreshTokenRevocation
            report.accessTokenRevocation = server.accessTokenRevocation
            report.serverSession = server.serverSession
            report.providerLogout = server.providerLogout
        } else {
            if options.revokeRefreshToken, configuration.revoker != nil, tokens?.refreshToken != nil {
                report.refreshTokenRevocation = .inBackground
            }
            if options.revokeAccessToken, configuration.revoker != nil { report.accessTokenRevocation = .inBackground }
            if options.terminateServerSession != nil { report.serverSession = .inBackground }
            if options.providerLogout != nil { report.providerLogout = .inBackground }
        }

        // 5. Purge, queued behind every credential write the session admitted.
        let purge = Task { await self.purge(account, outbox: options.outbox) }
        let (purged, failures) = await purge.value
        report.purged = purged
        report.purgeFailures += failures
        return report
    }

    private static func runServerSteps(
        tokens: TokenSet?,
        account: Account,
        options: SignOutOptions,
        configuration: Configuration
    ) async -> SignOutReport {
        var report = SignOutReport(account: account)
        let clock = configuration.sessionConfiguration.clock
        let deadline = clock.now.advanced(by: options.serverTimeout)
        func bounded(_ step: @escaping @Sendable () async throws -> Void) async -> SignOutReport.StepOutcome {
            let outcome = Broadcast<SignOutReport.StepOutcome>()
            let work = Task {
                do {
                    try await step()
                    outcome.resolve(.success(.succeeded))
                } catch let error as SessionError {
                    outcome.resolve(.success(.failed(error.code)))
                } catch {
                    outcome.resolve(.success(.failed(.networkUnavailable)))
                }
            }
            let result =
                (try? await outcome.value(
                    deadline: deadline,
                    clock: clock,
                    timeoutError: SessionError(.timedOut, "server step timed out")
                )) ?? .timedOut
            if result == .timedOut { work.cancel() }
            return result
        }
        if let revoker = configuration.revoker {
            if options.revokeRefreshToken, let refreshToken = tokens?.refreshToken {
                report.refreshTokenRevocation = await bounded {
                    try await revoker.revoke(refreshToken, hint: .refreshToken)
                }
            }
            if options.revokeAccessToken, let accessToken = tokens?.accessToken {
                report.accessTokenRevocation = await bounded {
                    try await revoker.revoke(accessToken, hint: .accessToken)
                }
            }
        }
        if let terminate = options.terminateServerSession, let tokens {
            report.serverSession = await bounded { try await terminate(tokens) }
        }
        if let logout = options.providerLogout {
            report.providerLogout = await bounded { try await logout(account) }
        }
        return report
    }

    /// Deletes the account's credential record (behind every admitted write), its directory and every
    /// registered resource's data, then forgets the purge intent if every step succeeded.
    private func purge(_ account: Account, outbox: SignOutOptions.OutboxDisposition) async -> ([String], [String]) {
        var purged: [String] = []
        var failures: [String] = []
        if let error = await vault.enqueueDelete(for: account).value {
            failures.append("credentials: \((error as? SessionError)?.code.description ?? "\(type(of: error))")")
        } else {
            purged.append("credentials")
        }
        if let root = configuration.dataDirectory {
            let directory = root.appendingPathComponent("accounts").appendingPathComponent(account.storageKey)
            let kept = root.appendingPathComponent("kept-outbox").appendingPathComponent("\(account.storageKey).json")
            let fileManager = FileManager.default
            if outbox == .keepForAccount,
                fileManager.fileExists(atPath: directory.appendingPathComponent("outbox.json").path)
            {
                try? fileManager.createDirectory(
                    at: kept.deletingLastPathComponent(),
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700]
                )
                try? fileManager.removeItem(at: kept)
                try? fileManager.moveItem(at: directory.appendingPathComponent("outbox.json"), to: kept)
            } else if outbox == .delete {
                try? fileManager.removeItem(at: kept)
            }
            do {
                if fileManager.fileExists(atPath: directory.path) { try fileManager.removeItem(at: directory) }
                purged.append("directory")
            } catch {
                failures.append("directory")
            }
        }
        for resource in guarded.withLock({ $0.resources }) {
            do {
                try await resource.purge(for: account)
                purged.append(resource.name)
            } catch {
                failures.append(resource.name)
            }
        }
        if failures.isEmpty { journal.complete(account) }
        return (purged, failures)
    }

    /// Gives `account` back the outbox it set aside at its last sign-out, if any.
    ///
    /// - Parameter account: The account signing in again.
    /// - Returns: Its outbox, with any writes kept for it restored.
    public func restoreKeptOutbox(for account: Account) -> Outbox {
        if let root = configuration.dataDirectory, let directory = directory(for: account) {
            let kept = root.appendingPathComponent("kept-outbox").appendingPathComponent("\(account.storageKey).json")
            let target = directory.appendingPathComponent("outbox.json")
            if FileManager.default.fileExists(atPath: kept.path), !FileManager.default.fileExists(atPath: target.path) {
                try? FileManager.default.moveItem(at: kept, to: target)
            }
        }
        return outbox(for: account)
    }

    // MARK: - Restore

    /// Restores at launch: finishes any purge a crash interrupted, loads stored credentials, and decides the
    /// state.
    ///
    /// Every stored account gets a live session; the first becomes current. When the current one holds no
    /// usable access token, it refreshes: if the provider cannot be reached the state is active and offline
    /// (a network error never signs anyone out); if it rejects the refresh token, re-authentication required.
    /// A store that cannot be read (locked, unavailable, or the user cancelled the prompt guarding it) is not an
    /// empty one: when no account could be restored for that reason the state is ``SessionState/failed(_:)``
    /// with the store's error, nothing is deleted, and calling `restore()` again tries again.
    ///
    /// - Returns: The state after restore.
    /// - Important: Call it once at launch, before anything signs in or sends a request: a purge that a crash
    ///   interrupted is finished first, so no request ever authenticates with credentials a sign-out had already
    ///   been asked to delete.
    @discardableResult
    public func restore() async -> SessionState {
        apply(.restoreStarted)
        // An interrupted purge is finished before anything authenticates.
        for account in journal.pending() {
            _ = await purge(account, outbox: .delete)
        }
        let accounts: [Account]
        do {
            accounts = try await vault.store.accounts().sorted { $0.storageKey < $1.storageKey }
        } catch {
            // Unreadable is not empty: nobody is signed out, and nothing is deleted; restore can run again.
            apply(.restoreFailed(Self.restoreError(error)))
            return state
        }
        let clock = configuration.sessionConfiguration.clock
        var restored: [UserSession] = []
        var unreadable: SessionError?
        for account in accounts {
            let loaded: CredentialRecord?
            do {
                loaded = try await vault.load(for: account)
            } catch {
                // Kept as it is (a cancelled prompt, a locked store): a later restore may read it.
                unreadable = unreadable ?? Self.restoreError(error)
                continue
            }
            guard let record = loaded, record.account == account else { continue }
            guard record.refreshToken != nil || record.accessToken != nil else { continue }
            var lifetime: Duration = .zero
            var accessToken = ""
            if let stored = record.accessToken, let expiry = record.accessTokenExpiresAt {
                let remaining = expiry.timeIntervalSince(clock.wallNow)
                if remaining > 0 {
                    accessToken = stored
                    lifetime = .milliseconds(Int64(remaining * 1000))
                }
            }
            let tokens = TokenSet(
                accessToken: accessToken,
                refreshToken: record.refreshToken,
                idToken: record.idToken,
                scope: record.scope,
                tokenType: record.tokenType,
                lifetime: lifetime,
                receivedAt: clock.now,
                receivedAtWall: clock.wallNow
            )
            restored.append(makeSession(account: account, tokens: tokens))
        }
        guard let first = restored.first else {
            apply(unreadable.map { .restoreFailed($0) } ?? .restoredNothing)
            return state
        }
        for session in restored { install(session, makeCurrent: session === first) }
        guard first.tokens?.accessToken.isEmpty == true else {
            apply(.restored(first.account))
            return state
        }
        do {
            try await first.refreshTokens()
            apply(.restored(first.account))
        } catch let error as SessionError where error.code == .refreshRejected {
            // `handle(.refreshRejected)` already ended the session and purged its credentials.
            apply(.restoredNothing)
            apply(.switched(first.account))
            apply(.refreshRejected)
        } catch let error as SessionError where error.code == .userCancelled {
            apply(.restoredOffline(first.account))
            apply(.refreshStarted)
            apply(.userCancelled)
        } catch {
            apply(.restoredOffline(first.account))
        }
        return state
    }
}

extension SessionManager {
    /// The error a restore reports for a store that could not be read.
    fileprivate static func restoreError(_ error: any Error) -> SessionError {
        if let error = error as? SessionError { return error }
        return SessionError(.storageFailure, "the credential store could not be read (\(type(of: error)))")
    }
}

/// What sign-out's detach phase found.
private enum Detached {
    /// The session to sign out, now detached.
    case detached(UserSession, wasCurrent: Bool, containers: [WeakBindable])
    /// A session that is no longer live, of an account that has a live session again: nothing to purge.
    case superseded(UserSession)
}

/// A weak reference to a registered container.
private struct WeakBindable: Sendable {
    weak var target: (any SessionBindable)?

    init(_ target: any SessionBindable) { self.target = target }
}

/// A container whose contents follow one session.
protocol SessionBindable: AnyObject, Sendable {
    func bind(to session: UserSession?)
}

extension SessionScoped: SessionBindable {}

/// A token endpoint that asks for the user's presence before each use of the refresh token.
private struct PresenceGuardedEndpoint: TokenEndpoint {
    let inner: any TokenEndpoint
    let prompt: any UserPresencePrompt

    func refresh(using refreshToken: String) async throws -> TokenSet {
        try await prompt.confirmPresence(reason: "Confirm it is you to stay signed in")
        return try await inner.refresh(using: refreshToken)
    }
}
