import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// A model of the notification center: identifiers pending and delivered, and the calls made.
final class NotificationCenterModel: UserNotificationCenter {
    let pending: Lock<[String]>
    let delivered: Lock<[String]>
    let calls: Lock<[String]>

    init(pending: [String], delivered: [String], calls: Lock<[String]> = Lock([])) {
        self.pending = Lock(pending)
        self.delivered = Lock(delivered)
        self.calls = calls
    }

    func pendingIdentifiers() async -> [String] { pending.withLock { $0 } }
    func deliveredIdentifiers() async -> [String] { delivered.withLock { $0 } }
    func removePending(_ identifiers: [String]) async {
        calls.withLock { $0.append("notifications") }
        pending.withLock { list in list.removeAll { identifiers.contains($0) } }
    }
    func removeDelivered(_ identifiers: [String]) async {
        delivered.withLock { list in list.removeAll { identifiers.contains($0) } }
    }
}

/// A model of `BGTaskScheduler` and background sessions: what was cancelled.
final class BackgroundWorkModel: BackgroundWorkScheduler {
    let cancelled = Lock<[String]>([])
    let calls: Lock<[String]>

    init(calls: Lock<[String]> = Lock([])) { self.calls = calls }

    func cancelTaskRequests(_ identifiers: [String]) async {
        calls.withLock { $0.append("background work") }
        cancelled.withLock { $0 += identifiers.map { "task:\($0)" } }
    }
    func cancelTransfers(sessionIdentifier: String) async {
        cancelled.withLock { $0.append("session:\(sessionIdentifier)") }
    }
}

/// A model of the app's entitlement cache: entitlements per `appAccountToken`.
final class EntitlementCacheModel: EntitlementCache {
    let cached: Lock<[UUID: [String]]>
    let calls: Lock<[String]>

    init(_ cached: [UUID: [String]], calls: Lock<[String]> = Lock([])) {
        self.cached = Lock(cached)
        self.calls = calls
    }

    func removeEntitlements(appAccountToken: UUID) async throws {
        calls.withLock { $0.append("purchase entitlements") }
        _ = cached.withLock { $0.removeValue(forKey: appAccountToken) }
    }
}

/// The seed's clearing list as built-in resources (issue 50): each purges only the ending account's part, each is a
/// named entry of the report, and they run in the seed's order whatever order they were registered in.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct BuiltInResourcesTests {
    /// Registered in reverse, purged in the seed's order: the identity reset inside the detach, then background
    /// work, purchase entitlements, notifications, the push registration, then the app's own.
    @Test func theReportListsEachResourceByNameInTheSeedsOrder() async throws {
        let calls = Lock<[String]>([])
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        manager.registerPurge(named: "app cache") { _ in calls.withLock { $0.append("app cache") } }
        manager.register(PushRegistrationResource { _ in calls.withLock { $0.append("push registration") } })
        let tag = UserNotificationsResource.identifier("reminder", for: alice)
        manager.register(
            UserNotificationsResource(center: NotificationCenterModel(pending: [tag], delivered: [], calls: calls)))
        manager.register(PurchaseEntitlementsResource(cache: EntitlementCacheModel([:], calls: calls)))
        manager.register(
            BackgroundWorkResource(scheduler: BackgroundWorkModel(calls: calls), taskIdentifiers: ["refresh"]))
        manager.registerIdentityReset(named: "analytics identity") { _ in
            calls.withLock { $0.append("analytics identity") }
        }
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut(options: .localOnly))
        let order = [
            "analytics identity", "background work", "purchase entitlements", "notifications", "push registration",
            "app cache",
        ]
        #expect(report.resourcePurges.map(\.resource) == order)
        #expect(report.resourcePurges.allSatisfy { $0.outcome == .succeeded })
        #expect(calls.withLock { $0 } == order)
        #expect(report.description.contains("background work succeeded"))
    }

    /// Each resource touches the ending account's part only: Bob's notifications, transfers and entitlements, and
    /// what no account tagged, stay.
    @Test func eachResourcePurgesTheEndingAccountsPartOnly() async throws {
        let notifications = NotificationCenterModel(
            pending: [
                UserNotificationsResource.identifier("a1", for: alice),
                UserNotificationsResource.identifier("b1", for: bob), "untagged",
            ],
            delivered: [
                UserNotificationsResource.identifier("a2", for: alice),
                UserNotificationsResource.identifier("b2", for: bob),
            ])
        let aliceToken = PurchaseEntitlementsResource.appAccountToken(for: alice)
        let bobToken = PurchaseEntitlementsResource.appAccountToken(for: bob)
        let entitlements = EntitlementCacheModel([aliceToken: ["pro"], bobToken: ["pro", "extra"]])
        let background = BackgroundWorkModel()
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        manager.register(UserNotificationsResource(center: notifications))
        manager.register(PurchaseEntitlementsResource(cache: entitlements))
        manager.register(
            BackgroundWorkResource(scheduler: background, taskIdentifiers: ["com.example.sync"], sessionBase: "dl"))
        try await manager.signIn(bob, tokens: tokens("bob"))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut(options: .localOnly))
        #expect(report.isPurgeComplete)
        #expect(
            notifications.pending.withLock { $0 } == [UserNotificationsResource.identifier("b1", for: bob), "untagged"])
        #expect(notifications.delivered.withLock { $0 } == [UserNotificationsResource.identifier("b2", for: bob)])
        #expect(entitlements.cached.withLock { $0 } == [bobToken: ["pro", "extra"]])
        #expect(
            background.cancelled.withLock { $0 } == [
                "task:com.example.sync", "session:" + BackgroundWorkResource.sessionIdentifier("dl", for: alice),
            ])
        #expect(manager.current?.account == bob)
    }

    /// The tags and tokens name the account without spelling it, are the same for the same account and differ
    /// between accounts; the `appAccountToken` is a version 8 UUID.
    @Test func tagsAndTokensNameTheAccountWithoutSpellingIt() {
        #expect(alice.resourceTag == Account(issuer: alice.issuer, subject: alice.subject).resourceTag)
        #expect(alice.resourceTag != bob.resourceTag && alice.resourceTag.count == 22)
        #expect(!UserNotificationsResource.identifier("x", for: alice).contains(alice.subject))
        let token = PurchaseEntitlementsResource.appAccountToken(for: alice)
        #expect(token == PurchaseEntitlementsResource.appAccountToken(for: alice))
        #expect(token != PurchaseEntitlementsResource.appAccountToken(for: bob))
        let text = token.uuidString
        let version = text[text.index(text.startIndex, offsetBy: 14)]
        #expect(version == "8", "\(text)")
    }

    /// The push registration is a server step with its own bound: a server that never answers is `failed
    /// (timedOut)` past it, the purge is incomplete, and the next launch runs it again and it succeeds.
    @Test func aHungPushUnregistrationIsBoundedAndRetriedAtTheNextLaunch() async throws {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = InMemoryCredentialStore()
        let hung = Lock(true)
        let unregistered = Counter()
        func makeManager() -> SessionManager {
            let manager = SessionManager(configuration: .init(store: store, dataDirectory: root))
            manager.register(
                PushRegistrationResource(timeout: .milliseconds(100)) { _ in
                    if hung.withLock({ $0 }) { try await Task.sleep(for: .seconds(3600)) }
                    unregistered.increment()
                })
            return manager
        }
        let manager = makeManager()
        try await manager.signIn(alice, tokens: tokens("alice"))
        let report = try #require(await manager.signOut(options: .localOnly))
        #expect(report.resourcePurges.map(\.outcome) == [.failed(.timedOut)])
        #expect(!report.isPurgeComplete)
        hung.withLock { $0 = false }
        _ = await makeManager().restore()
        #expect(unregistered.value == 1)
    }

    /// The identity reset runs inside the step that detaches the current account: before any observer is told of
    /// the account that follows, and only when the account leaving was current.
    @Test func theIdentityResetRunsBeforeTheStateChangeIsToldAndOnlyForTheCurrentAccount() async throws {
        let seen = Lock<[String]>([])
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        manager.registerIdentityReset(named: "analytics identity") { account in
            seen.withLock { $0.append("reset \(account.subject)") }
        }
        let bobSession = try await manager.signIn(bob, tokens: tokens("bob"))
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        var states = manager.states.makeAsyncIterator()
        #expect(await states.next() == .active(alice, offline: false))
        let report = try #require(await manager.signOut(session, options: .localOnly))
        let next = await states.next()
        seen.withLock { $0.append("told \(next.map { "\($0)" } ?? "nothing")") }
        #expect(seen.withLock { $0 } == ["reset alice", "told active(\(bob))"])
        #expect(report.resourcePurges.map(\.resource) == ["analytics identity"])
        // Bob is current now; a session that is not current leaves without a reset.
        let third = try await manager.signIn(alice, tokens: tokens("alice"), makeCurrent: false)
        let notCurrent = try #require(await manager.signOut(third, options: .localOnly))
        #expect(notCurrent.resourcePurges.isEmpty)
        #expect(seen.withLock { $0 }.count == 2)
        #expect(manager.current === bobSession)
    }
}
