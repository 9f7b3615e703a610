import Foundation
import Observation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A revoker scripted by the test.
final class ScriptedRevoker: TokenRevoker {
    let revoked = Lock<[String]>([])
    let gate: Gate?
    let failure: SessionError?

    init(gate: Gate? = nil, failure: SessionError? = nil) {
        self.gate = gate
        self.failure = failure
    }

    func revoke(_ token: String, hint: TokenTypeHint) async throws {
        if let gate { await gate.wait() }
        if let failure { throw failure }
        revoked.withLock { $0.append(token) }
    }
}

/// A user-presence check the user always cancels, counting how often it was asked.
func cancellingPrompt(asked: Counter) -> @Sendable (String) async throws -> Void {
    { _ in
        asked.increment()
        throw SessionError(.userCancelled, "the user cancelled")
    }
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct SessionManagerTests {
    func rotatingEndpoint(gate: Gate? = nil) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint(gate: gate) { refreshToken, n in
            let user = refreshToken.replacingOccurrences(of: "refresh-", with: "").prefix { $0 != "-" }
            return TokenSet(
                accessToken: "token-\(user)-\(n)", refreshToken: "refresh-\(user)-\(n)", lifetime: .seconds(3600))
        }
    }

    @Test func signOutRunsDetachClearCancelAndDeletesTheRecordBeforeRevoking() async throws {
        let gate = Gate()
        let store: any CredentialStore = InMemoryCredentialStore()
        let revoker = ScriptedRevoker(gate: gate)
        let root = try temporaryDirectory()
        let manager = SessionManager(
            configuration: .init(store: store, revoker: revoker, dataDirectory: root)
        )
        let profile = SessionScoped<String>(empty: "")
        manager.register(profile)
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        #expect(profile.commit("alice's profile", from: session))
        let directory = try #require(manager.directory(for: alice))
        try Data("private".utf8).write(to: directory.appendingPathComponent("notes.txt"))
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice")

        let signOut = Task { await manager.signOut() }
        await gate.waitForArrivals(1)  // revocation has started: every local phase before it is done
        #expect(manager.current == nil)
        #expect(manager.state == .signedOut)
        #expect(profile.value == "")
        #expect(!session.isActive)
        // The record is deleted before any server is contacted: a kill during revocation cannot bring Alice back.
        #expect(try await store.load(for: alice) == nil, "the record is gone before revocation")
        gate.open()
        let report = try #require(await signOut.value)
        #expect(report.refreshTokenRevocation == .succeeded)
        #expect(revoker.revoked.withLock { $0 } == ["refresh-alice"])
        #expect(report.credentialDeletion == .succeeded)
        #expect(report.directoryRemoval == .succeeded)
        #expect(report.isPurgeComplete)
        #expect(try await store.load(for: alice) == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test func offlineSignOutStillCompletesLocallyWithinItsBound() async throws {
        let clock = ManualClock()
        let store: any CredentialStore = InMemoryCredentialStore()
        let gate = Gate()
        let hung = ScriptedRevoker(gate: gate)  // never answers
        let manager = SessionManager(
            configuration: .init(
                store: store,
                revoker: hung,
                sessionConfiguration: UserSession.Configuration(clock: clock)
            )
        )
        try await manager.signIn(alice, tokens: tokens("alice"))
        // The local deadline lies past the server's, so advancing past the revocation's bound never also cuts the
        // record's deletion short (both 5 s by default).
        let signOut = Task {
            await manager.signOut(options: SignOutOptions(serverTimeout: .seconds(5), localTimeout: .seconds(60)))
        }
        // Bounded, so an unbounded revocation fails here instead of spinning: nothing would ever sleep on the clock.
        let bounded = await eventually(within: .seconds(60)) { clock.sleepers > 0 }
        try #require(bounded, "the sign-out waits for the revocation without a deadline on the session's clock")
        // Sent before the bound passes, so the report says it went unanswered (not that it was never sent).
        await gate.waitForArrivals(1)
        clock.advance(by: .seconds(5))
        let report = try #require(await signOut.value)
        #expect(report.refreshTokenRevocation == .unanswered)
        #expect(try await store.load(for: alice) == nil)
        #expect(manager.sessions.isEmpty)

        let offline = SessionManager(
            configuration: .init(
                store: store, revoker: ScriptedRevoker(failure: SessionError(.networkUnavailable, "offline")))
        )
        try await offline.signIn(bob, tokens: tokens("bob"))
        let offlineReport = try #require(await offline.signOut())
        #expect(offlineReport.refreshTokenRevocation == .failed(.networkUnavailable))
        #expect(try await store.accounts().isEmpty)
    }

    @Test func signingOutWithNoSessionReportsNothingAndChangesNothing() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        let revoker = ScriptedRevoker()
        let manager = SessionManager(configuration: .init(store: store, revoker: revoker))
        #expect(await manager.signOut() == nil, "no session was ever current")

        try await manager.signIn(alice, tokens: tokens("alice"))
        #expect(try #require(await manager.signOut()).account == alice)
        #expect(await manager.signOut() == nil, "the second sign-out finds no current session")
        #expect(manager.state == .signedOut)
        #expect(revoker.revoked.withLock { $0 } == ["refresh-alice"], "nothing revoked for the empty sign-out")
    }

    @Test func aPurgeIntentThatCannotBeRecordedIsReportedAndThePurgeGoesOn() async throws {
        let root = try temporaryDirectory()
        // A file where the journal's folder belongs: the intent cannot be written.
        try Data().write(to: root.appendingPathComponent("purge-pending"))
        let store: any CredentialStore = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, dataDirectory: root))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let directory = try #require(manager.directory(for: alice))
        let report = try #require(await manager.signOut(options: .localOnly))
        #expect(report.purgeIntent == .failed(.storageFailure))
        #expect(report.credentialDeletion == .succeeded && report.directoryRemoval == .succeeded)
        #expect(!report.isPurgeComplete, "the purge went, but not crash-safely")
        #expect(report.description.contains("purge intent failed (storageFailure)"))
        #expect(try await store.load(for: alice) == nil)
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test func theReportsDescriptionNamesEveryStepWithItsOutcome() async throws {
        let root = try temporaryDirectory()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(),
                revoker: ScriptedRevoker(failure: SessionError(.networkUnavailable, "offline")),
                dataDirectory: root
            )
        )
        manager.registerPurge(named: "notifications") { _ in }
        manager.registerPurge(named: "analytics") { _ in throw CocoaError(.fileWriteNoPermission) }
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut())
        #expect(report.purgeIntent == .succeeded)
        #expect(report.directoryRemoval == .succeeded)
        #expect(report.resourcePurges.map { $0.outcome } == [.succeeded, .failed(.storageFailure)])
        #expect(!report.isPurgeComplete)
        for step in [
            "refresh-token revocation failed (networkUnavailable)", "access-token revocation not requested",
            "server session not requested", "provider logout not requested", "purge intent succeeded",
            "credentials succeeded", "directory succeeded", "notifications succeeded",
            "analytics failed (storageFailure)",
        ] {
            #expect(report.description.contains(step), "\(step) in \(report.description)")
        }
        #expect(!report.description.contains("refresh-alice") && !report.description.contains("token-alice"))
    }

    @Test func revocationCanFinishInTheBackground() async throws {
        let gate = Gate()
        let store: any CredentialStore = InMemoryCredentialStore()
        let revoker = ScriptedRevoker(gate: gate)
        let manager = SessionManager(configuration: .init(store: store, revoker: revoker))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut(options: SignOutOptions(waitForServer: false)))
        #expect(report.refreshTokenRevocation == .inBackground)
        #expect(try await store.load(for: alice) == nil)
        gate.open()
        await eventually { revoker.revoked.withLock { $0 } == ["refresh-alice"] }
    }

    @Test func restoreWithStoredCredentialsBecomesActive() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let endpoint = rotatingEndpoint()
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
        let state = await manager.restore()
        #expect(state == .active(alice, offline: false))
        #expect(manager.current?.tokens?.accessToken == "token-alice-1")
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice-1")
    }

    /// A stored access token is used only while it has time left: an expired one is never sent, the restore
    /// refreshes instead; a live one is used as is, with no token request.
    @Test func restoreUsesAStoredAccessTokenOnlyWhileItIsValid() async throws {
        for (expiresIn, expected, refreshes) in [(-60.0, "token-alice-1", 1), (600.0, "stored-access", 0)] {
            let store: any CredentialStore = InMemoryCredentialStore()
            try await store.save(
                CredentialRecord(
                    account: alice, refreshToken: "refresh-alice", accessToken: "stored-access",
                    accessTokenExpiresAt: Date().addingTimeInterval(expiresIn)))
            let endpoint = rotatingEndpoint()
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
            #expect(await manager.restore() == .active(alice, offline: false))
            #expect(manager.current?.tokens?.accessToken == expected, "stored token expiring in \(expiresIn) s")
            #expect(endpoint.count == refreshes, "stored token expiring in \(expiresIn) s")
            await manager.signOut()
        }
    }

    @Test func offlineLaunchWithStoredCredentialsIsActiveAndOffline() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let endpoint = ScriptedTokenEndpoint { _, _ in throw SessionError(.networkUnavailable, "offline") }
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: endpoint, refreshPolicy: RefreshPolicy(retryPolicy: .never))
        )
        let state = await manager.restore()
        #expect(state == .active(alice, offline: true))
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice", "a network error signs no one out")
    }

    @Test func restoreWithARotatedRefreshTokenRequiresReauthentication() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice-stale"))
        let endpoint = ScriptedTokenEndpoint { _, _ in
            throw SessionError(.refreshRejected, "invalid_grant", statusCode: 400, oauthError: "invalid_grant")
        }
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
        let state = await manager.restore()
        #expect(state == .reauthenticationRequired(alice))
        #expect(endpoint.count == 1, "no loop")
        #expect(try await manager.vault.load(for: alice) == nil)
        #expect(manager.current == nil)
    }

    @Test func restoreWithNothingStoredIsSignedOut() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        #expect(await manager.restore() == .signedOut)
    }

    @Test func restoreFinishesAnInterruptedPurgeBeforeAuthenticating() async throws {
        let root = try temporaryDirectory()
        let store: any CredentialStore = InMemoryCredentialStore()
        // A previous process recorded the intent to purge alice, then died before deleting anything.
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        let journal = root.appendingPathComponent("purge-pending")
        try FileManager.default.createDirectory(at: journal, withIntermediateDirectories: true)
        try JSONEncoder().encode(alice).write(to: journal.appendingPathComponent("\(alice.storageKey).json"))
        let endpoint = rotatingEndpoint()
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: endpoint, dataDirectory: root, launchBudget: .seconds(120)))
        #expect(await manager.restore() == .signedOut)
        #expect(endpoint.count == 0, "nothing authenticated with a record that was to be purged")
        #expect(try await store.load(for: alice) == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: journal.path).isEmpty)
    }

    /// A Keychain item guarded by user presence throws `userCancelled` from `load` when the user dismisses the
    /// prompt; a locked keyring throws `storeUnavailable`. Neither means "no credentials".
    @Test(arguments: [SessionError.Code.userCancelled, .storeUnavailable])
    func restoreThatCannotReadTheStoreFailsAndKeepsEverything(_ code: SessionError.Code) async throws {
        let store = RefusingStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        store.refusal.withLock { $0 = SessionError(code, "refused") }
        let endpoint = rotatingEndpoint()
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
        let state = await manager.restore()
        guard case .failed(let error) = state else {
            Issue.record("expected failed, got \(state)")
            return
        }
        #expect(error.code == code)
        #expect(manager.current == nil)
        #expect(endpoint.count == 0)
        // Nothing was deleted; once the store can be read, restoring again signs the account back in.
        store.refusal.withLock { $0 = nil }
        #expect(await manager.restore() == .active(alice, offline: false))
        #expect(manager.current?.tokens?.accessToken == "token-alice-1")
    }

    @Test func restoreThatCannotListTheStoreFailsWithoutSigningOut() async throws {
        let store = RefusingStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        store.refusal.withLock { $0 = SessionError(.storeUnavailable, "locked") }
        store.refusesListing.withLock { $0 = true }
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: rotatingEndpoint(), launchBudget: .seconds(120)))
        #expect(await manager.restore() == .failed(SessionError(.storeUnavailable, "locked")))
        store.refusal.withLock { $0 = nil }
        #expect(try await store.load(for: alice)?.refreshToken == "refresh-alice")
    }

    @Test func restoreKeepsTheAccountsItCanReadWhenAnotherCannotBeRead() async throws {
        let store = RefusingStore()
        try await store.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
        try await store.save(CredentialRecord(account: bob, refreshToken: "refresh-bob"))
        store.refusedAccount.withLock { $0 = alice }
        store.refusal.withLock { $0 = SessionError(.userCancelled, "dismissed") }
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: rotatingEndpoint(), launchBudget: .seconds(120)))
        #expect(await manager.restore() == .active(bob, offline: false))
        #expect(manager.sessions.map(\.account) == [bob])
        store.refusal.withLock { $0 = nil }
        #expect(try await store.load(for: alice) != nil, "the unreadable account was not purged")
    }

    /// Found by the randomized suite: a session whose refresh was rejected left `sessions` before its deletion
    /// was queued, so a sign-in of the same account in between saved a record the deletion then took.
    @Test func aRejectedRefreshDeletesOnlyTheRecordOfItsOwnSession() async throws {
        let store = InMemoryCredentialStore()
        let endpoint = ScriptedTokenEndpoint { _, _ in
            throw SessionError(.refreshRejected, "invalid_grant", statusCode: 400, oauthError: "invalid_grant")
        }
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
        let dead = try await manager.signIn(alice, tokens: tokens("alice"))
        #expect(try await manager.vault.load(for: alice)?.refreshToken == dead.tokens?.refreshToken)
        // A newer session of alice saved its record before the dead one's deletion ran.
        try await manager.vault.save(CredentialRecord(account: alice, refreshToken: "refresh-alice-newer"))
        let error = await #expect(throws: SessionError.self) { try await dead.refreshTokens() }
        #expect(error?.code == .refreshRejected)
        #expect(!dead.isActive)
        #expect(try await manager.vault.load(for: alice)?.refreshToken == "refresh-alice-newer")

        // Without a newer record, the dead session's own record is deleted.
        let again = try await manager.signIn(alice, tokens: tokens("alice"))
        _ = await #expect(throws: SessionError.self) { try await again.refreshTokens() }
        #expect(try await manager.vault.load(for: alice) == nil)
    }

    @Test func cancelledPresencePromptLeavesTheStateAsItWas() async throws {
        let store: any CredentialStore = InMemoryCredentialStore()
        let asked = Counter()
        let endpoint = rotatingEndpoint()
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: endpoint, userPresence: cancellingPrompt(asked: asked))
        )
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .userCancelled)
        #expect(manager.state == .active(alice, offline: false))
        #expect(asked.value == 1)
        #expect(endpoint.count == 0)
        #expect(try await store.load(for: alice) != nil, "no sign-out")
    }

    @Test func rejectedRefreshRequiresReauthenticationAndPurgesCredentials() async throws {
        try await LocalServer.withRunning(handler: unauthorizedHandler) { server in
            let store: any CredentialStore = InMemoryCredentialStore()
            let endpoint = ScriptedTokenEndpoint { _, _ in
                throw SessionError(.refreshRejected, "invalid_grant", oauthError: "invalid_grant")
            }
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))
            let error = await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/me")) }
            #expect(error?.code == .refreshRejected)
            #expect(manager.state == .reauthenticationRequired(alice))
            #expect(try await manager.vault.load(for: alice) == nil)
            #expect(!session.isActive)
            #expect(endpoint.count == 1)
        }
    }

    @Test func refreshInFlightAtSignOutIsStoredNowhereAndNeverUsed() async throws {
        try await LocalServer.withRunning(handler: tokenEchoHandler) { server in
            let gate = Gate()
            let store: any CredentialStore = InMemoryCredentialStore()
            let endpoint = rotatingEndpoint(gate: gate)
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: endpoint, launchBudget: .seconds(120)))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))
            let refresh = Task { try await session.refreshTokens() }
            await gate.waitForArrivals(1)
            let report = try #require(await manager.signOut(options: .localOnly))
            #expect(report.credentialDeletion == .succeeded)
            gate.open()
            await #expect(throws: SessionError.self) { try await refresh.value }
            #expect(try await store.load(for: alice) == nil)
            #expect(session.tokens == nil)
            let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
            _ = try await bobSession.data(for: get(server, "/me"))
            #expect(!server.requests.contains { $0.bearerToken == "token-alice-1" })
            #expect(try await store.accounts() == [bob])
        }
    }

    @Test func switchingKeepsTheOtherAccountAliveWithItsOwnToken() async throws {
        try await LocalServer.withRunning(handler: nameHandler) { server in
            let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
            let screen = SessionScoped<String>(empty: "")
            manager.register(screen)
            let work = try await manager.signIn(alice, tokens: tokens("alice"))
            #expect(screen.commit("alice's inbox", from: work))
            let personal = try await manager.signIn(bob, tokens: tokens("bob"))
            #expect(manager.current === personal)
            #expect(screen.value == "", "the previous account's state is cleared on switch")
            #expect(manager.sessions.count == 2)
            #expect(work.isActive)
            let (a, _) = try await work.data(for: get(server, "/me"))
            let (b, _) = try await personal.data(for: get(server, "/me"))
            #expect(text(a) == #"{"name":"alice"}"#)
            #expect(text(b) == #"{"name":"bob"}"#)
            #expect(!screen.commit("alice's late inbox", from: work), "not the current session")

            try await manager.switchTo(work, endingOthers: true, options: .localOnly)
            #expect(manager.current === work)
            #expect(!personal.isActive)
            #expect(manager.state == .active(alice, offline: false))
            for request in server.requests {
                #expect(["token-alice", "token-bob"].contains(request.bearerToken ?? ""))
            }
        }
    }

    @Test func unauthorizedAfterASwitchIsNeverReplayedWithTheOtherAccountsToken() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("/me") { request in
                if request.bearerToken == "token-alice" {
                    await gate.wait()
                    return LocalServer.Response(status: 401)
                }
                return .json(#"{"t":"\#(request.bearerToken ?? "")"}"#)
            }
            let endpoint = rotatingEndpoint()
            let manager = SessionManager(
                configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: endpoint))
            let a = try await manager.signIn(alice, tokens: tokens("alice"))
            let request = Task { try await a.data(for: get(server, "/me")) }
            await gate.waitForArrivals(1)
            _ = try await manager.signIn(bob, tokens: tokens("bob"))  // switch to bob
            gate.open()
            let (body, _) = try await request.value
            #expect(text(body) == #"{"t":"token-alice-1"}"#)
            #expect(endpoint.presented == ["refresh-alice"])
            #expect(!server.requests.contains { $0.path == "/me" && $0.bearerToken?.contains("bob") == true })
        }
    }

    @Test func writesInFlightFollowTheirPolicyAndReconcileOnlyForTheirAccount() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("POST", "/rating") { _ in .json("{}") }
            server.route("POST", "/upload") { _ in
                await gate.wait()
                return .json("{}", status: 201)
            }
            server.route("POST", "/sync") { _ in
                await gate.wait()
                return .json("{}")
            }
            let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))
            let rating = Task { try await session.write(post(server, "/rating"), policy: .wait(.seconds(5))) }
            let upload = Task { try await session.write(post(server, "/upload"), policy: .handOff) }
            let sync = Task { try await session.write(post(server, "/sync"), policy: .discard) }
            await gate.waitForArrivals(2)
            _ = try await rating.value
            let report = try #require(await manager.signOut(options: .localOnly))
            #expect(report.writesHandedOff == 1)
            #expect(report.writesDiscarded == 1)
            gate.open()
            let (_, uploaded) = try await upload.value
            #expect(uploaded.statusCode == 201, "a handed-off write completes after sign-out")
            await #expect(throws: SessionError.self) { try await sync.value }

            let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
            #expect(manager.takeWriteReconciliations(for: bob.self).isEmpty, "nothing of alice's writes reaches bob")
            _ = bobSession
            let reconciliation = manager.takeWriteReconciliations(for: alice)
            #expect(
                Set(reconciliation) == [
                    .completed(summary: "POST /upload", status: 201), .discarded(summary: "POST /sync"),
                ])
            #expect(reconciliation.map(\.summary).sorted() == ["POST /sync", "POST /upload"])
            #expect(
                Set(reconciliation.map(\.description)) == ["POST /upload: completed (201)", "POST /sync: discarded"])
            #expect(manager.takeWriteReconciliations(for: alice).isEmpty, "taken once")
            #expect(server.requests.filter { $0.path == "/upload" }.allSatisfy { $0.bearerToken == "token-alice" })
        }
    }

    @Test func waitPolicyWritesAreWaitedForWithinTheirBound() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            let (manager, session) = try await signedInWithHeldRating(server, gate)
            let rating = Task { try await session.write(post(server, "/rating"), policy: .wait(.seconds(30))) }
            await gate.waitForArrivals(1)
            let signOut = Task { await manager.signOut(options: .localOnly) }
            await eventually { manager.current == nil }
            gate.open()
            let report = try #require(await signOut.value)
            _ = try await rating.value
            #expect(report.writesWaitedFor == 1)
            #expect(report.cancelledRequests == 0)
        }
    }

    /// A write in flight when sign-out detaches the session counts as waited for even when it finishes before the
    /// wait reaches it: here it finishes while sign-out tells observers that `current` changed (the clear phase,
    /// after the detach), and the report still says it was waited for.
    @Test func aWaitPolicyWriteThatFinishesRightAfterTheDetachIsWaitedFor() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            let (manager, session) = try await signedInWithHeldRating(server, gate)
            let finished = DispatchSemaphore(value: 0)
            let rating = Task {
                defer { finished.signal() }
                return try await session.write(post(server, "/rating"), policy: .wait(.seconds(30)))
            }
            await gate.waitForArrivals(1)
            let finishedInTime = Lock(false)
            withObservationTracking {
                _ = manager.current
            } onChange: {
                // Runs on sign-out's thread, between the detach and the wait for writes.
                gate.open()
                finishedInTime.withLock { $0 = finished.wait(timeout: .now() + 10) == .success }
            }
            let report = try #require(await manager.signOut(options: .localOnly))
            _ = try await rating.value
            #expect(finishedInTime.withLock { $0 }, "the write did not finish during the clear phase")
            #expect(report.writesWaitedFor == 1)
            #expect(report.writesAbandoned == 0)
        }
    }

    /// Alice signed in to a new manager; the server holds her `POST /rating` until `gate` opens.
    private func signedInWithHeldRating(
        _ server: LocalServer, _ gate: Gate
    ) async throws -> (SessionManager, UserSession) {
        server.route("POST", "/rating") { _ in
            await gate.wait()
            return .json("{}")
        }
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        return (manager, try await manager.signIn(alice, tokens: tokens("alice")))
    }

    @Test func outboxIsKeptForItsAccountAndNeverReplayedAsAnother() async throws {
        try await LocalServer.withRunning(handler: emptyJSONHandler) { server in
            let root = try temporaryDirectory()
            let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), dataDirectory: root))
            _ = try await manager.signIn(alice, tokens: tokens("alice"))
            try manager.outbox(for: alice).enqueue(post(server, "/comment", body: "alice's comment"))
            await manager.signOut(options: SignOutOptions(serverSteps: [], keepsOutbox: true))
            // The kept outbox holds alice's unsent writes: its folder is private to this user, as hers was.
            let keptFolder = root.appendingPathComponent("kept-outbox").path
            let mode = try FileManager.default.attributesOfItem(atPath: keptFolder)[.posixPermissions] as? Int
            #expect(mode == 0o700, "kept-outbox is \(String(mode ?? 0, radix: 8))")

            let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
            let kept = manager.restoreKeptOutbox(for: alice)
            let refused = await #expect(throws: SessionError.self) { try await kept.flush(using: bobSession) }
            #expect(refused?.code == .invalidInput)
            // The error says which rule refused it, so the app's log explains the refusal.
            #expect(refused?.message == "an outbox is replayed only by a session of its own account")
            #expect(server.requests.isEmpty)

            let aliceAgain = try await manager.signIn(alice, tokens: tokens("alice-2"))
            let outbox = manager.restoreKeptOutbox(for: alice)
            #expect(outbox.pending.count == 1)
            #expect(try await outbox.flush(using: aliceAgain) == 1)
            #expect(server.requests.map(\.bearerToken) == ["token-alice-2"])
            #expect(server.requests.first?.header("Idempotency-Key") != nil)
        }
    }

    @Test func registeredResourcesArePurgedInOrderAndAFailureIsRetriedAtLaunch() async throws {
        let root = try temporaryDirectory()
        let order = Lock<[String]>([])
        let failOnce = Lock(true)
        let store: any CredentialStore = InMemoryCredentialStore()
        func makeManager() -> SessionManager {
            let manager = SessionManager(configuration: .init(store: store, dataDirectory: root))
            manager.registerPurge(named: "notifications") { _ in order.withLock { $0.append("notifications") } }
            manager.register(
                PurgeStep("analytics") { _ in
                    let fail = failOnce.withLock { value -> Bool in
                        defer { value = false }
                        return value
                    }
                    if fail { throw SessionError(.storageFailure, "x") }
                    order.withLock { $0.append("analytics") }
                }
            )
            return manager
        }
        let manager = makeManager()
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut(options: .localOnly))
        #expect(report.resourcePurges.map { $0.resource } == ["notifications", "analytics"])
        #expect(report.resourcePurges.map { $0.outcome } == [.succeeded, .failed(.storageFailure)])
        #expect(!report.isPurgeComplete)
        #expect(order.withLock { $0 } == ["notifications"])
        // Next launch: the interrupted purge is finished first.
        _ = await makeManager().restore()
        #expect(order.withLock { $0 } == ["notifications", "notifications", "analytics"])
    }

    @Test func statesArePublishedInOrder() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        var iterator = manager.states.makeAsyncIterator()
        #expect(await iterator.next() == .signedOut)
        try await manager.signIn(alice, tokens: tokens("alice"))
        #expect(await iterator.next() == .authenticating)
        #expect(await iterator.next() == .active(alice, offline: false))
        await manager.signOut(options: .localOnly)
        #expect(await iterator.next() == .signedOut)
    }
}

/// An in-memory store that refuses to read when told to: all records, or one account's.
final class RefusingStore: CredentialStore {
    private let inner = InMemoryCredentialStore()
    let refusal = Lock<SessionError?>(nil)
    let refusedAccount = Lock<Account?>(nil)
    let refusesListing = Lock(false)

    func save(_ record: CredentialRecord) async throws { await inner.save(record) }

    func load(for account: Account) async throws -> CredentialRecord? {
        if let refusal = refusal.withLock({ $0 }), refusedAccount.withLock({ $0 == nil || $0 == account }) {
            throw refusal
        }
        return await inner.load(for: account)
    }

    func delete(for account: Account) async throws { await inner.delete(for: account) }
    func deleteAll() async throws { await inner.deleteAll() }

    func accounts() async throws -> [Account] {
        if refusesListing.withLock({ $0 }), let refusal = refusal.withLock({ $0 }) { throw refusal }
        return await inner.accounts()
    }
}
