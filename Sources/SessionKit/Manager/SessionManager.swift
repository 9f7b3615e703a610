import Foundation
import Observation
import SessionKitOAuth

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
        /// How sessions of the default provider refresh (sign-ins that name no ``Provider``); `nil` means a 401
        /// cannot be recovered.
        public var tokenEndpoint: (any TokenEndpoint)?
        /// How sign-out revokes the default provider's tokens; `nil` means it does not.
        public var revoker: (any TokenRevoker)?
        /// The named providers accounts sign in through besides the default one, each with its own token endpoint
        /// and revoker: a sign-in names one (``SessionManager/signIn(through:makeCurrent:authenticate:)``), and every
        /// later refresh and revocation of that account goes to it. Names must be unique.
        public var providers: [Provider]
        /// A biometric or user-presence check before each use of a refresh token, if the app wants one: called
        /// with the reason to show the user, it returns when the user confirmed and throws ``SessionError`` with
        /// code `userCancelled` when they cancelled (the session then stays signed in and unrefreshed; nothing
        /// loops). On Apple platforms the Keychain store's access control can show the system prompt instead.
        public var userPresence: (@Sendable (_ reason: String) async throws -> Void)?
        /// How each session sends requests.
        public var sessionConfiguration: UserSession.Configuration
        /// When sessions refresh.
        public var refreshPolicy: RefreshPolicy
        /// The app-chosen root of per-account directories and of the purge journal. With `nil` there are no
        /// account directories, and the journal lives in the store's own directory when it has one
        /// (such as ``FileCredentialStore``), else in memory.
        public var dataDirectory: URL?
        /// How long ``SessionManager/restore()`` waits at launch for the current account's refresh before it
        /// returns signed in and offline, the refresh going on; 2 seconds by default.
        public var launchBudget: Duration
        /// How soon the manager tries a store that could not be read (`storeUnavailable`: a locked device or
        /// keyring) again, after a restore that could not read it or a write of rotated tokens it refused: first
        /// after this long, then twice as long each time up to 16 times this, for as long as it stays unreadable.
        /// 2 seconds by default; on Apple platforms the protected data becoming available also tries at once.
        public var storeRetryInterval: Duration

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - store: The credential store.
        ///   - tokenEndpoint: The refresh client.
        ///   - revoker: The revocation client.
        ///   - providers: Named providers, each with its own clients.
        ///   - userPresence: The presence check guarding refresh tokens.
        ///   - sessionConfiguration: Per-session settings.
        ///   - refreshPolicy: Refresh settings.
        ///   - dataDirectory: Root of per-account data.
        ///   - launchBudget: The longest restore waits for a refresh.
        ///   - storeRetryInterval: The first wait before a locked store is tried again.
        public init(
            store: any CredentialStore,
            tokenEndpoint: (any TokenEndpoint)? = nil,
            revoker: (any TokenRevoker)? = nil,
            providers: [Provider] = [],
            userPresence: (@Sendable (_ reason: String) async throws -> Void)? = nil,
            sessionConfiguration: UserSession.Configuration = UserSession.Configuration(),
            refreshPolicy: RefreshPolicy = RefreshPolicy(),
            dataDirectory: URL? = nil,
            launchBudget: Duration = .seconds(2),
            storeRetryInterval: Duration = .seconds(2)
        ) {
            self.store = store
            self.tokenEndpoint = tokenEndpoint
            self.revoker = revoker
            self.providers = providers
            self.userPresence = userPresence
            self.sessionConfiguration = sessionConfiguration
            self.refreshPolicy = refreshPolicy
            self.dataDirectory = dataDirectory
            self.launchBudget = launchBudget
            self.storeRetryInterval = storeRetryInterval
        }
    }

    /// The configuration the manager was created with.
    public let configuration: Configuration
    /// The credential store behind one queue per account: a read, a write and the sign-out purge of one account
    /// run in the order they were asked for, so a purge is always the last operation on a signed-out account.
    package let vault: CredentialVault
    /// What became of writes in flight at sign-out, kept for each account's next session.
    package let ledger = WriteLedger()
    let journal: PurgeJournal
    let directories: AccountDirectories
    let registrar = ObservationRegistrar()
    /// Everything of the manager that changes, decided by the value (``ManagerState``) and changed only through
    /// ``send(_:)``, one event per critical section; sign-out's detach is the one other critical section.
    let guarded = Lock(ManagerState())
    /// Held while registered containers are rebound, so that concurrent rebinds end with every container bound to
    /// the session that is current when the last one ran; counts the rebinds. Not part of the state: it serializes
    /// an effect (binding, which tells the containers' observers, who may read the manager) that must not run under
    /// the state's lock, and a rebind returns only once its own reading of `current` is bound. (Not a `Lock<Void>`:
    /// ThreadSanitizer reports the exclusivity check of a zero-sized state as a race.)
    let binding = Lock(0)

    /// Creates a manager. Call ``restore()`` at launch.
    ///
    /// - Parameter configuration: What the manager needs.
    public init(configuration: Configuration) {
        self.configuration = configuration
        self.vault = CredentialVault(store: configuration.store)
        let directories = AccountDirectories(root: configuration.dataDirectory)
        self.directories = directories
        // The intent to purge lives beside the data it is about: in the data directory, else beside the store's
        // records, so a kill during sign-out is finished at next launch in either configuration.
        let storeJournal = (configuration.store as? any DirectoryBackedCredentialStore)?.directory
            .appendingPathComponent(".purge-pending")
        self.journal = PurgeJournal(directory: directories.journal ?? storeJournal)
        let watcher = configuration.store.coordination?.watchChanges { [weak self] change in
            self?.storeChanged(change)
        }
        #if canImport(UIKit)
            let observer: ObserverToken? = ObserverToken(observeProtectedData())
        #else
            let observer: ObserverToken? = nil
        #endif
        send(
            .configure(
                diagnostics: configuration.sessionConfiguration.diagnostics,
                clock: configuration.sessionConfiguration.clock, watcher: watcher, observer: observer))
    }

    deinit {
        guard case .teardown(let watcher, let observer) = send(.teardown) else { return }
        watcher?.stop()
        if let observer { NotificationCenter.default.removeObserver(observer.value) }
    }

    /// Feeds the manager's state one event, in one critical section, and returns its answer for the caller to act
    /// on once the lock is released.
    ///
    /// The state changes the event made are told to the streams and to the diagnostics sink inside the same
    /// critical section (both only enqueue): every stream sees the states in the order they happened.
    @discardableResult
    func send(_ event: ManagerState.Event) -> ManagerState.Answer {
        guarded.withLock { state in
            let answer = state.handle(event)
            tell(&state)
            return answer
        }
    }

    /// Tells the streams and the sink what `state` has kept to tell; called inside the critical section that made it.
    func tell(_ state: inout ManagerState) {
        for publication in state.publications {
            if let from = publication.from, let diagnostics = state.diagnostics, let clock = state.clock {
                diagnostics.emit(
                    .info, .stateChanged, account: publication.state.account ?? from.account, at: clock.wallNow,
                    ["from": from.diagnosticName, "to": publication.state.diagnosticName])
            }
            for continuation in publication.to { continuation.yield(publication.state) }
        }
        state.publications.removeAll()
    }

    /// The manager's state as it is now, for reading.
    var snapshot: ManagerState {
        guard case .snapshot(let state) = send(.read) else { preconditionFailure("a read answers a snapshot") }
        return state
    }

    // MARK: - Observation

    /// Where the current session stands.
    public var state: SessionState {
        registrar.access(self, keyPath: \.state)
        return snapshot.state
    }

    /// The session the app acts as now, if any.
    public var current: UserSession? {
        registrar.access(self, keyPath: \.current)
        return snapshot.current
    }

    /// Every live session (the current one and those kept alive across account switches).
    public var sessions: [UserSession] {
        registrar.access(self, keyPath: \.sessions)
        return snapshot.sessions
    }

    /// Accounts whose rotated credentials could not be stored (a locked keyring, a full disk), with the error.
    ///
    /// The session goes on with the tokens in memory, but the stored record holds a refresh token the provider
    /// has retired: unless a later write succeeds (the entry then disappears), the next launch will present it and
    /// be asked to sign in again. Show it, or ask the user to unlock the store.
    public var storageFailures: [Account: SessionError] {
        registrar.access(self, keyPath: \.storageFailures)
        return snapshot.storageFailures
    }

    /// The states from now on, starting with the current one.
    ///
    /// Each read makes a new stream. It never finishes on its own: cancel the task that iterates it.
    public var states: AsyncStream<SessionState> {
        let (stream, continuation) = AsyncStream<SessionState>.makeStream(bufferingPolicy: .unbounded)
        let id = send(.subscribe(continuation)).id
        continuation.onTermination = { [weak self] _ in self?.send(.unsubscribe(id)) }
        return stream
    }

    /// Feeds an event to the state machine for the current session and publishes the result.
    func apply(_ event: SessionState.Event) {
        apply { _ in event }
    }

    /// Feeds the state machine the event `decide` picks from the manager's state, read and applied under one lock:
    /// for events that depend on what is current at that instant.
    func apply(_ decide: @escaping (ManagerState) -> SessionState.Event?) {
        if send(.decide(decide)).flag { registrar.withMutation(of: self, keyPath: \.state) {} }
    }

    // MARK: - Sessions

    /// A session of `account` through `provider` (resolved by ``Configuration/provider(_:for:)``; `nil` for the
    /// default one): it refreshes at that provider's token endpoint, and its records name it.
    func makeSession(
        account: Account, tokens: TokenSet, provider: Provider?, providerSessionID: String? = nil
    ) -> UserSession {
        var endpoint = configuration.tokenEndpoint(of: provider)
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
            ledger: ledger,
            provider: provider?.id,
            revoker: configuration.revoker(of: provider),
            providerSessionID: providerSessionID
        )
        session.useDownloadsDirectory(directories.downloads(of: account))
        session.setEventHandler { [weak self, weak session] event in
            guard let self, let session else { return }
            self.handle(event, from: session)
        }
        return session
    }

    /// Reacts to what a session reports. State events apply only while the session is current, checked under the
    /// same lock that applies them.
    private func handle(_ event: SessionEvent, from session: UserSession) {
        func ifCurrent(_ event: SessionState.Event) {
            apply { $0.current === session ? event : nil }
        }
        switch event {
        case .refreshStarted:
            ifCurrent(.refreshStarted)
        case .refreshed:
            ifCurrent(.refreshSucceeded)
        case .refreshFailed(let error):
            if error.code == .userCancelled {
                ifCurrent(.userCancelled)
            } else if error.isTransient || error.code == .refreshTimedOut {
                ifCurrent(.refreshFailedTransiently)
            } else if error.code != .sessionEnded {
                ifCurrent(.refreshFailed)
            }
        case .refreshRejected(let error):
            rejectSession(session, error: error)
        case .storageFailed(let error):
            let failure =
                error as? SessionError
                ?? SessionError(.storageFailure, "the refreshed credentials could not be stored (\(type(of: error)))")
            send(.storageFailed(session.account, failure))
            registrar.withMutation(of: self, keyPath: \.storageFailures) {}
            diagnose(.warning, .storageFailed, account: session.account, ["code": "\(failure.code)"])
            // A locked store opens again: the rotated tokens, kept in memory meanwhile, are written then.
            if failure.code == .storeUnavailable { retryStoring(session) }
        case .stored:
            if send(.stored(session.account)).flag {
                registrar.withMutation(of: self, keyPath: \.storageFailures) {}
                diagnose(.notice, .storedAfterRetry, account: session.account)
            }
        case .signedOutElsewhere:
            diagnose(.notice, .signedOutElsewhere, account: session.account)
            forgetSignedOutElsewhere(session)
        }
    }

    /// Another process signed the account out: forgets the session (if it was current, the account that follows
    /// is current, as after a sign-out here). Deletes nothing: that process purged the shared record; the session ends right after this.
    private func forgetSignedOutElsewhere(_ session: UserSession) {
        guard case .left(let wasCurrent, let successor, let changed) = send(.signedOutElsewhere(session)) else {
            return
        }
        if wasCurrent { rebindContainers() }
        successor?.markSwitchedTo(at: configuration.sessionConfiguration.clock.wallNow)
        registrar.withMutation(of: self, keyPath: \.sessions) {}
        if wasCurrent { registrar.withMutation(of: self, keyPath: \.current) {} }
        if changed { registrar.withMutation(of: self, keyPath: \.state) {} }
    }

    /// The refresh token is dead: ends the session, deletes its record, asks the user to sign in again.
    private func rejectSession(_ session: UserSession, error: SessionError) {
        let account = session.account
        guard case .left(let wasCurrent, _, let changed) = send(.rejected(session)) else { return }
        if wasCurrent { rebindContainers() }
        if changed { registrar.withMutation(of: self, keyPath: \.state) {} }
        // Only this session's record: a sign-in of the same account may have saved a new one meanwhile (the session
        // left `sessions` above, so nothing makes that sign-in wait for this deletion). The deletion is queued at the
        // moment the session stops admitting writes, with the refresh token it holds then: no refresh can commit a
        // newer one afterwards, and whoever sees the session ended finds it queued. A session something else ended
        // first (a sign-out, which purges; a re-login, whose record must stay) is left to that.
        let vault = vault
        session.finish(refreshError: error) { refreshToken, leftInStore in
            if let refreshToken {
                vault.enqueueDelete(for: account, ifHolding: refreshToken, orHolding: leftInStore)
            } else {
                vault.enqueueDelete(for: account)
            }
        }
        registrar.withMutation(of: self, keyPath: \.sessions) {}
        registrar.withMutation(of: self, keyPath: \.current) {}
    }
}

/// A token endpoint that asks for the user's presence before each use of the refresh token.
private struct PresenceGuardedEndpoint: TokenEndpoint {
    let inner: any TokenEndpoint
    let prompt: @Sendable (_ reason: String) async throws -> Void

    func refresh(using refreshToken: String) async throws -> TokenSet {
        try await prompt("Confirm it is you to stay signed in")
        return try await inner.refresh(using: refreshToken)
    }

    func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws -> TokenSet {
        try await prompt("Confirm it is you to stay signed in")
        return try await inner.refresh(using: refreshToken, for: account, proofKey: proofKey)
    }
}

/// A notification observer, kept to be removed; only the manager's init and deinit touch it.
struct ObserverToken: @unchecked Sendable {
    let value: any NSObjectProtocol

    init(_ value: any NSObjectProtocol) { self.value = value }
}

extension SessionManager {
    /// Emits an event, when the sessions' configuration has a sink.
    func diagnose(
        _ level: DiagnosticEvent.Level, _ kind: DiagnosticEvent.Kind, account: Account?,
        _ fields: @autoclosure () -> [String: String] = [:]
    ) {
        guard let diagnostics = configuration.sessionConfiguration.diagnostics else { return }
        diagnostics.emit(
            level, kind, account: account, at: configuration.sessionConfiguration.clock.wallNow, fields())
    }
}
