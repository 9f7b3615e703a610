import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The manager keeps a user who did nothing wrong signed in, its state agrees with what is current, and what
/// sign-out promises holds when a step fails, a caller goes away or a step hangs.
@Suite(.timeLimit(.minutes(1))) struct SessionManagerLivenessTests {
    private func rotatingEndpoint(gate: Gate? = nil) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint(gate: gate) { refreshToken, n in
            let user = refreshToken.replacingOccurrences(of: "refresh-", with: "").prefix { $0 != "-" }
            return TokenSet(
                accessToken: "token-\(user)-\(n)", refreshToken: "refresh-\(user)-\(n)", lifetime: .seconds(3600))
        }
    }

    // MARK: - Purge and sign-in

    @Test func aFailedPurgeNeverPurgesTheNextSignInOfTheSameAccount() async throws {
        let root = try temporaryDirectory()
        let store = try FileCredentialStore(directory: root.appendingPathComponent("credentials"))
        // Fails at the sign-out and again when the next sign-in retries it; works at the next launch.
        let failures = Lock(2)
        let analytics = PurgeStep("analytics") { _ in
            let fails = failures.withLock { remaining -> Bool in
                defer { remaining -= 1 }
                return remaining > 0
            }
            if fails { throw SessionError(.storageFailure, "analytics unavailable") }
        }
        let manager = SessionManager(configuration: .init(store: store, dataDirectory: root))
        manager.register(analytics)
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut(options: .localOnly))
        #expect(report.resourcePurges.map { $0.outcome } == [.failed(.storageFailure)])
        #expect(!report.isPurgeComplete)

        // Alice signs in again, writes a file, and the app is closed.
        try await manager.signIn(alice, tokens: tokens("alice", refresh: "refresh-alice-2"))
        let directory = try #require(manager.directory(for: alice))
        try Data("new".utf8).write(to: directory.appendingPathComponent("notes.txt"))

        let relaunched = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: rotatingEndpoint(), dataDirectory: root, launchBudget: .seconds(120)))
        relaunched.register(analytics)
        #expect(await relaunched.restore() == .active(alice, offline: false))
        #expect(relaunched.current?.tokens?.refreshToken == "refresh-alice-1")
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-1", "the new sign-in's, rotated")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("notes.txt").path))
    }

    @Test func aSignInCancelledWhileASignOutIsInProgressStopsAndStoresNothing() async throws {
        let gate = Gate()
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, revoker: ScriptedRevoker(gate: gate)))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let signOut = Task { await manager.signOut() }
        await gate.waitForArrivals(1)  // revoking: the sign-out is in progress

        let signIn = Task { try await manager.signIn(alice, tokens: tokens("alice", refresh: "refresh-alice-2")) }
        signIn.cancel()
        await #expect(throws: CancellationError.self) { try await signIn.value }
        gate.open()
        _ = await signOut.value

        #expect(manager.sessions.isEmpty)
        #expect(manager.current == nil)
        #expect(manager.state == .signedOut)
        #expect(await store.load(for: alice) == nil)
    }

    // MARK: - Restore

    @Test func restoreBringsBackTheAccountThatWasCurrent() async throws {
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store))
        // The account that sorts last by storage key is the one current at the end, so that choosing by key fails.
        let (first, last) = alice.storageKey < bob.storageKey ? (alice, bob) : (bob, alice)
        let lastSession = try await manager.signIn(last, tokens: tokens(last.subject))
        try await manager.signIn(first, tokens: tokens(first.subject))
        try await manager.switchTo(lastSession)
        // The switch stores its selection in the background; the app waits for that before it exits, as apps do.
        let pending = await manager.finishPendingWork(within: .seconds(30))
        #expect(pending.isEmpty, "\(pending)")

        let relaunched = SessionManager(
            configuration: .init(store: store, tokenEndpoint: rotatingEndpoint(), launchBudget: .seconds(120)))
        #expect(await relaunched.restore() == .active(last, offline: false))
        #expect(relaunched.current?.account == last)
        #expect(relaunched.sessions.count == 2)
    }

    @Test func restoreReturnsWithinItsLaunchBudgetAndTheRefreshGoesOn() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let store = InMemoryCredentialStore()
        await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let endpoint = rotatingEndpoint(gate: gate)
        let manager = SessionManager(
            configuration: .init(
                store: store,
                tokenEndpoint: endpoint,
                sessionConfiguration: UserSession.Configuration(clock: clock),
                launchBudget: .seconds(2)
            )
        )
        let restore = Task { await manager.restore() }
        await gate.waitForArrivals(1)
        await eventually { clock.sleepers >= 2 }  // restore's budget and the refresh's waiter
        clock.advance(by: .seconds(2))
        #expect(await restore.value == .active(alice, offline: true), "signed in and offline, not blocked")
        #expect(manager.current?.account == alice)

        gate.open()
        await eventually { manager.state == .active(alice, offline: false) }
        #expect(manager.current?.tokens?.accessToken == "token-alice-1")
        #expect(endpoint.count == 1)
    }

    @Test func aCallerWhoseRefreshWaitTimesOutSeesTheStateOfflineNotRefreshing() async throws {
        let clock = ManualClock()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(),
                tokenEndpoint: rotatingEndpoint(gate: Gate()),  // never answers
                sessionConfiguration: UserSession.Configuration(clock: clock),
                refreshPolicy: RefreshPolicy(waitTimeout: .seconds(5))
            )
        )
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        let refresh = Task { try await session.refreshTokens() }
        await eventually { manager.state == .refreshing(alice) && clock.sleepers == 1 }
        clock.advance(by: .seconds(5))
        await #expect(throws: SessionError.self) { try await refresh.value }
        #expect(manager.state == .active(alice, offline: true))
        #expect(manager.current === session)
    }

    // MARK: - State agrees with current

    @Test(arguments: [SessionError.Code.authorizationFailed, .userCancelled])
    func aSecondAccountsFailedSignInLeavesTheCurrentAccountActive(_ code: SessionError.Code) async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        await #expect(throws: SessionError.self) {
            try await manager.signIn(authenticate: { throw SessionError(code, "no") })
        }
        #expect(manager.current === session)
        #expect(manager.state == .active(alice, offline: false))
    }

    @Test func aRotatedTokenThatCouldNotBeStoredIsVisibleUntilAWriteSucceeds() async throws {
        let store = SaveRefusingStore()
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: rotatingEndpoint(), launchBudget: .seconds(120)))
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        store.refusesSaves.withLock { $0 = true }
        try await session.refreshTokens()
        #expect(manager.storageFailures[alice]?.code == .storageFailure)
        store.refusesSaves.withLock { $0 = false }
        try await session.refreshTokens()
        #expect(manager.storageFailures.isEmpty)
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-2")
    }

    /// A grant rejected after the store refused the session's rotated tokens (a full disk): the record still
    /// holds the refresh token the rotation retired, the session's own, and goes with the session as any rejected
    /// grant's record does, so no later launch restores the dead grant and presents a retired token.
    @Test func aRejectedGrantDeletesARecordLeftBehindByARefusedRotation() async throws {
        let store = SaveRefusingStore()
        let endpoint = ScriptedTokenEndpoint { _, call in
            guard call == 1 else {
                throw SessionError(.refreshRejected, "revoked", statusCode: 400, oauthError: "invalid_grant")
            }
            return TokenSet(accessToken: "token-alice-2", refreshToken: "refresh-alice-2", lifetime: .seconds(3600))
        }
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint))
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        store.refusesSaves.withLock { $0 = true }
        try await session.refreshTokens()
        store.refusesSaves.withLock { $0 = false }
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice", "the record lags behind")
        await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(manager.state == .reauthenticationRequired(alice))
        _ = await manager.finishPendingWork(within: .seconds(5))
        #expect(try await store.load(for: alice) == nil)
    }

    @Test func racingSwitchesLeaveEveryContainerBoundToTheCurrentSession() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let profile = SessionScoped<String>(empty: "")
        manager.register(profile)
        var sessions: [UserSession] = []
        for user in ["alice", "bob", "carol", "dave"] {
            let account = Account(issuer: issuer, subject: user)
            sessions.append(try await manager.signIn(account, tokens: tokens(user)))
        }
        for round in 0..<50 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, session) in sessions.enumerated() where (index + round) % 2 == 0 || index == 3 {
                    group.addTask { try await manager.switchTo(session) }
                }
                try await group.waitForAll()
            }
            let current = try #require(manager.current)
            #expect(profile.commit("round \(round)", from: current), "the container is bound to the current session")
        }
    }

    // MARK: - Sign-out

    @Test func signOutRevokesTheRefreshTokenTheSessionHeldWhenItEnded() async throws {
        try await LocalServer.withRunning { server in
            let held = Gate()
            server.route("/write") { _ in
                await held.wait()
                return .json("{}")
            }
            let store = InMemoryCredentialStore()
            let revoker = ScriptedRevoker()
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: rotatingEndpoint(), revoker: revoker))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))
            let write = Task { try await session.write(post(server, "/write"), policy: .wait(.seconds(30))) }
            await held.waitForArrivals(1)
            let signOut = Task { await manager.signOut() }
            await eventually { manager.current == nil }
            // While sign-out waits for the write, the session refreshes: its newest refresh token is revoked, and
            // stored nowhere.
            try await session.refreshTokens()
            held.open()
            _ = try await write.value
            let report = try #require(await signOut.value)
            #expect(report.writesWaitedFor == 1)
            #expect(revoker.revoked.withLock { $0 } == ["refresh-alice-1"])
            #expect(await store.load(for: alice) == nil)
        }
    }

    @Test func theLocalPhasesShareOneDeadlineAHungPurgeIncluded() async throws {
        let clock = ManualClock()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(),
                sessionConfiguration: UserSession.Configuration(clock: clock)
            )
        )
        let hung = Gate()
        manager.registerPurge(named: "search index") { _ in await hung.wait() }
        try await manager.signIn(alice, tokens: tokens("alice"))
        var options = SignOutOptions.localOnly
        options.localTimeout = .seconds(3)
        let signOut = Task { await manager.signOut(options: options) }
        await hung.waitForArrivals(1)
        await eventually { clock.sleepers >= 1 }
        clock.advance(by: .seconds(3))
        let report = try #require(await signOut.value)
        #expect(report.credentialDeletion == .succeeded)
        #expect(report.directoryRemoval == .notRequested, "the manager has no data directory")
        #expect(report.resourcePurges.map { $0.resource } == ["search index"])
        #expect(report.resourcePurges.map { $0.outcome } == [.timedOut])
        #expect(!report.isPurgeComplete)
        #expect(report.description.contains("search index timed out"), "the description hides no failure")
        hung.open()
    }

    @Test func oneOutboxPerAccountClosedAtPurgeAndNoCredentialHeaderPersisted() async throws {
        let root = try temporaryDirectory()
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), dataDirectory: root))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let outbox = manager.outbox(for: alice)
        #expect(manager.outbox(for: alice) === outbox)
        var request = URLRequest(url: URL(string: "https://api.example/comments")!)
        request.httpMethod = "POST"
        request.setValue("session=alice-secret", forHTTPHeaderField: "Cookie")
        request.setValue("Basic c2VjcmV0", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("Bearer token-alice", forHTTPHeaderField: "Authorization")
        try outbox.enqueue(request)
        let file = try #require(manager.directory(for: alice)).appendingPathComponent("outbox.json")
        let stored = String(decoding: try Data(contentsOf: file), as: UTF8.self)
        #expect(!stored.contains("alice-secret") && !stored.contains("c2VjcmV0") && !stored.contains("token-alice"))

        await manager.signOut(options: .localOnly)
        let refused = #expect(throws: SessionError.self) { try outbox.enqueue(request) }
        // The code says the account's session is over, and the message why: its outbox was closed at sign-out.
        #expect(refused?.code == .sessionEnded)
        #expect(refused?.message == "the account was signed out; its outbox is closed")
        #expect(!FileManager.default.fileExists(atPath: file.deletingLastPathComponent().path))
        #expect(manager.outbox(for: alice) !== outbox)
        #expect(manager.outbox(for: alice).pending.isEmpty)
    }

    /// A flush whose write is answered after the account's purge writes nothing: the purge removed the account's
    /// folder, and the outbox must not bring back its file (with whatever the flush still held).
    @Test func aFlushAnsweredAfterThePurgeLeavesNoFileBehind() async throws {
        try await LocalServer.withRunning { server async throws in
            let gate = Gate()
            server.route("POST", "/comment") { _ in
                await gate.wait()
                return .status(201)
            }
            let root = try temporaryDirectory()
            let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), dataDirectory: root))
            try await manager.signIn(alice, tokens: tokens("alice"))
            let outbox = manager.outbox(for: alice)
            try outbox.enqueue(post(server, "/comment", body: "alice's comment"))
            let folder = try #require(manager.directory(for: alice))
            #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("outbox.json").path))

            // The flush goes through a session of the same account the manager does not own, so the sign-out
            // does not cancel its write: the answer arrives after the purge.
            let flusher = UserSession(account: alice, tokens: tokens("alice"))
            defer { flusher.end() }
            let flush = Task { try await outbox.flush(using: flusher) }
            await gate.waitForArrivals(1)
            await manager.signOut(options: .localOnly)
            #expect(!FileManager.default.fileExists(atPath: folder.path))
            gate.open()

            #expect(try await flush.value == 1)
            #expect(!FileManager.default.fileExists(atPath: folder.path))
            #expect(outbox.pending.isEmpty)
        }
    }
}

/// An in-memory store whose saves fail while told to, as a locked keyring's do.
final class SaveRefusingStore: CredentialStore {
    private let inner = InMemoryCredentialStore()
    let refusesSaves = Lock(false)

    func save(_ record: CredentialRecord) async throws {
        if refusesSaves.withLock({ $0 }) { throw SessionError(.storageFailure, "the keyring is locked") }
        await inner.save(record)
    }

    func load(for account: Account) async throws -> CredentialRecord? { await inner.load(for: account) }
    func delete(for account: Account) async throws { await inner.delete(for: account) }
    func deleteAll() async throws { await inner.deleteAll() }
    func accounts() async throws -> [Account] { await inner.accounts() }
}
