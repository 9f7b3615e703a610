import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A model of Apple's credential states and signals: the test sets a user's state and sends the signals.
final class AppleIDModel: AppleIDCredentialSource {
    let states = Lock<[String: AppleIDCredentialState]>([:])
    /// Users whose state cannot be read (no network, no Apple ID).
    let unreadable = Lock<Set<String>>([])
    let asked = Counter()
    private let stream: AsyncStream<AppleIDSignal>
    private let continuation: AsyncStream<AppleIDSignal>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream() }

    func set(_ user: String, _ state: AppleIDCredentialState) { states.withLock { $0[user] = state } }
    func send(_ signal: AppleIDSignal) { continuation.yield(signal) }

    func credentialState(forUserID userID: String) async throws -> AppleIDCredentialState {
        asked.increment()
        if unreadable.withLock({ $0.contains(userID) }) { throw SessionError(.networkUnavailable, "offline") }
        return states.withLock { $0[userID] ?? .authorized }
    }

    func signals() -> AsyncStream<AppleIDSignal> { stream }
}

/// Every way the provider ends an account (issue 50): ``SessionManager/endAccount(_:because:)`` and the Sign in with
/// Apple monitor that feeds it.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct AccountEndingTests {
    static let appleAlice = Account(issuer: AppleIDCredentialMonitor.issuer, subject: "001234.alice")
    static let appleBob = Account(issuer: AppleIDCredentialMonitor.issuer, subject: "005678.bob")

    struct Harness {
        let store = InMemoryCredentialStore()
        let revoker = ScriptedRevoker()
        let events = Lock<[DiagnosticEvent]>([])
        let manager: SessionManager

        init() {
            let events = self.events
            manager = SessionManager(
                configuration: .init(
                    store: store, revoker: revoker,
                    sessionConfiguration: .init(
                        diagnostics: Diagnostics(level: .debug) { event in events.withLock { $0.append(event) } })))
        }

        /// The events of `kind` emitted so far (the sink hands them over on its own queue: flushed first).
        func events(_ kind: DiagnosticEvent.Kind) -> [DiagnosticEvent] {
            manager.configuration.sessionConfiguration.diagnostics?.flush()
            return events.withLock { $0.filter { $0.kind == kind } }
        }
    }

    /// The current account ended by the provider, with nobody else live: its session ends, its record goes, no
    /// server hears of it, a request in flight is answered `sessionEnded`, and the state, the report and a
    /// diagnostics event say why.
    @Test func anEndedCurrentAccountEndsLocallyAndEverythingSaysWhy() async throws {
        let harness = Harness()
        let gate = Gate()
        let handler: LocalServer.Handler = { _ async in
            await gate.wait()
            return .json(#"{"ok":true}"#)
        }
        try await LocalServer.withRunning(handler: handler) { server in
            let session = try await harness.manager.signIn(alice, tokens: tokens("alice"))
            let inFlight = Task { try await session.data(for: URLRequest(url: server.url("/items"))) }
            await gate.waitForArrivals(1)
            let report = try #require(await harness.manager.endAccount(alice, because: .appleIDRevoked))
            gate.open()
            #expect(report.endedBy == .appleIDRevoked)
            #expect(report.description.contains("ended by the provider: apple_id_revoked"))
            #expect(report.credentialDeletion == .succeeded)
            #expect(report.refreshTokenRevocation == .notRequested)
            #expect(report.cancelledRequests == 1)
            await #expect(throws: SessionError.self) { _ = try await inFlight.value }
            #expect(harness.revoker.revoked.withLock { $0 }.isEmpty, "the provider ended it: nothing is revoked")
            #expect(harness.manager.state == .accountEnded(alice, .appleIDRevoked))
            #expect(harness.manager.current == nil && !session.isActive)
            #expect(await harness.store.load(for: alice) == nil)
            let told = harness.events(.accountEnded)
            #expect(told.count == 1 && told.first?.fields["reason"] == "apple_id_revoked")
            #expect(told.first?.fields["sessions"] == "1" && told.first?.account == alice)
            let states = harness.events(.stateChanged).compactMap { $0.fields["to"] }
            #expect(states.last == "accountEnded(apple_id_revoked)")
        }
    }

    /// With another account live, the one current most recently follows, as after a sign-out; only the report and
    /// the event tell of the ending.
    @Test func withAnotherAccountLiveItBecomesCurrent() async throws {
        let harness = Harness()
        try await harness.manager.signIn(bob, tokens: tokens("bob"))
        try await harness.manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await harness.manager.endAccount(alice, because: .backChannelLogout))
        #expect(report.endedBy == .backChannelLogout)
        #expect(harness.manager.current?.account == bob)
        #expect(harness.manager.state == .active(bob, offline: false))
        #expect(await harness.store.load(for: bob) != nil)
    }

    /// An account with a record and no session here has its record deleted (the other processes' sessions follow
    /// it); one with neither is nothing to end.
    @Test func anAccountWithOnlyARecordHereHasItsRecordDeleted() async throws {
        let harness = Harness()
        await harness.store.save(CredentialRecord(account: bob, refreshToken: "refresh-bob"))
        let report = try #require(await harness.manager.endAccount(bob, because: AccountEnding("admin_disabled")))
        #expect(report.endedBy == AccountEnding("admin_disabled") && report.credentialDeletion == .succeeded)
        #expect(await harness.store.load(for: bob) == nil)
        #expect(await harness.manager.endAccount(bob, because: .backChannelLogout) == nil)
        #expect(harness.events(.accountEnded).map { $0.fields["record"] } == ["succeeded", "not found"])
        #expect(harness.manager.state == .signedOut)
    }

    /// A session keeps the `sid` of its ID token and its record stores it, so a restored session (whose record keeps
    /// no ID token) is found by it too.
    @Test func theProviderSessionIDIsKeptThroughTheRecordAndRestore() async throws {
        let harness = Harness()
        let idToken = try CompactJWS.signed(
            header: ["alg": .string("ES256")],
            claims: ["iss": .string(issuer), "sub": .string("alice"), "sid": .string("sid-42")],
            with: P256SigningKey())
        var signedIn = tokens("alice")
        signedIn.idToken = idToken
        let session = try await harness.manager.signIn(alice, tokens: signedIn)
        #expect(session.providerSessionID == "sid-42")
        let record = try #require(await harness.store.load(for: alice))
        #expect(record.providerSessionID == "sid-42" && record.idToken == nil)
        let later = SessionManager(configuration: .init(store: harness.store))
        await later.restore()
        #expect(later.current?.providerSessionID == "sid-42")
        later.current?.end()
    }

    // MARK: - Sign in with Apple

    /// Two Apple accounts and one of another provider live; Apple revokes Alice while the app runs: the revocation
    /// signal ends her (and only her) with `appleIDRevoked`; Bob is then transferred (reported, not ended), and a
    /// state that cannot be read ends nobody.
    @Test func aRevocationWhileRunningEndsOnlyThatAppleAccount() async throws {
        let harness = Harness()
        let model = AppleIDModel()
        try await harness.manager.signIn(Self.appleBob, tokens: tokens("bob"))
        try await harness.manager.signIn(bob, tokens: tokens("other"), makeCurrent: false)
        try await harness.manager.signIn(Self.appleAlice, tokens: tokens("alice"))
        let monitor = AppleIDCredentialMonitor(manager: harness.manager, source: model)
        let running = Task { await monitor.run() }
        defer { running.cancel() }
        #expect(await eventually(within: .seconds(5)) { model.asked.value == 2 }, "the launch check asked for both")
        #expect(harness.manager.sessions.count == 3)

        model.set(Self.appleAlice.subject, .revoked)
        model.send(.credentialRevoked)
        // The ending has finished once its event is told (the record's deletion comes before it).
        #expect(await eventually(within: .seconds(5)) { !harness.events(.accountEnded).isEmpty })
        #expect(harness.manager.sessions.count == 2)
        #expect(!harness.manager.sessions.contains { $0.account == Self.appleAlice })
        #expect(harness.manager.current?.account == Self.appleBob)
        #expect(await harness.store.load(for: Self.appleAlice) == nil)
        #expect(harness.events(.accountEnded).first?.fields["reason"] == "apple_id_revoked")
        #expect(harness.revoker.revoked.withLock { $0 }.isEmpty)

        model.set(Self.appleBob.subject, .transferred)
        let checks = await monitor.check()
        #expect(checks == [.init(account: Self.appleBob, state: .transferred, ended: false)])
        model.unreadable.withLock { _ = $0.insert(Self.appleBob.subject) }
        #expect(await monitor.check() == [.init(account: Self.appleBob, state: nil, ended: false)])
        #expect(harness.manager.sessions.count == 2)
        let states = harness.events(.appleIDChecked).compactMap { $0.fields["state"] }
        #expect(states.contains("transferred") && states.contains("unknown (networkUnavailable)"))
    }

    /// Revoked while the app was not running: the check at launch finds it, after restore, and the state says why.
    /// A return to the foreground checks again.
    @Test func aRevocationWhileNotRunningIsFoundAtLaunchAndOnReturningToTheForeground() async throws {
        let harness = Harness()
        for account in [Self.appleAlice, Self.appleBob] {
            await harness.store.save(CredentialRecord(account: account, refreshToken: "refresh-\(account.subject)"))
        }
        let model = AppleIDModel()
        model.set(Self.appleAlice.subject, .notFound)
        model.set(Self.appleBob.subject, .notFound)
        await harness.manager.restore()
        #expect(harness.manager.sessions.count == 2)
        let monitor = AppleIDCredentialMonitor(manager: harness.manager, source: model)
        let checks = await monitor.check()
        #expect(checks.allSatisfy { $0.state == .notFound && $0.ended })
        #expect(harness.manager.sessions.isEmpty)
        guard case .accountEnded(_, .appleIDNotFound) = harness.manager.state else {
            Issue.record("state \(harness.manager.state)")
            return
        }
        #expect(await harness.store.accounts().isEmpty)

        // Signed in again; revoked while in the background; the return to the foreground finds it.
        try await harness.manager.signIn(Self.appleAlice, tokens: tokens("alice"))
        model.set(Self.appleAlice.subject, .authorized)
        let running = Task { await monitor.run() }
        defer { running.cancel() }
        #expect(await eventually(within: .seconds(5)) { model.asked.value >= 3 })
        #expect(harness.manager.sessions.count == 1)
        model.set(Self.appleAlice.subject, .revoked)
        model.send(.foreground)
        #expect(await eventually(within: .seconds(5)) { harness.manager.sessions.isEmpty })
        #expect(harness.manager.state == .accountEnded(Self.appleAlice, .appleIDRevoked))
    }
}
