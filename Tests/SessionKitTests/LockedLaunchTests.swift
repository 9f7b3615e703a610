import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(Glibc)
    import Glibc
#endif

/// Launches against a store that cannot be read yet (issue 35): a device before its first unlock (the Keychain
/// model, answering "interaction not allowed" or, as some iOS versions do, "not found"), records this process may not
/// read (the file store, run without CAP_DAC_OVERRIDE), and the GNOME Keyring with its collection locked. Each launch
/// locks at a random instant and unlocks at another; none may sign anyone out or lose a record, and every account
/// comes back by itself once the store opens.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct LockedLaunchTests {
    /// What the launches came to.
    struct Tally: CustomStringConvertible {
        var launches = 0
        var signedOut = 0
        var lost = 0
        var description: String { "locked launches: \(launches), signed out: \(signedOut), records lost: \(lost)" }
    }

    static let keychainLaunches = 64
    static let fileLaunches = 24
    static let keyringLaunches = 24

    static func account(_ index: Int) -> Account {
        Account(issuer: "https://locked.sessionkit.invalid", subject: "user-\(index)")
    }

    /// A record with an hour-long access token as of `now`, so restore needs no refresh.
    static func record(_ index: Int, launch: Int, now: Date) -> CredentialRecord {
        CredentialRecord(
            account: account(index), refreshToken: "rt-\(launch)-\(index)", accessToken: "at-\(launch)-\(index)",
            accessTokenExpiresAt: now.addingTimeInterval(3600), scope: "scope", savedAt: now, selectedAt: now)
    }

    /// An endpoint no launch should reach: a refresh here would be a launch that lost its access token.
    static let unreachable = ScriptedTokenEndpoint { _, _ in
        throw SessionError(.networkUnavailable, "no refresh is expected during a locked launch")
    }

    @Test func lockedLaunchesSignNobodyOutAndLoseNoRecord() async throws {
        var tally = Tally()
        var random = SplitMix64(state: 0x10C4_ED00)
        var start = ContinuousClock.now
        try await Self.keychain(Self.keychainLaunches, &tally, &random)
        print("LockedLaunchTests: the Keychain model: \(tally), \(ContinuousClock.now - start)")
        start = ContinuousClock.now
        try await Self.fileStore(Self.fileLaunches, &tally, &random)
        print("LockedLaunchTests: with the file store: \(tally), \(ContinuousClock.now - start)")
        start = ContinuousClock.now
        let keyring = try await Self.keyring(Self.keyringLaunches, &tally, &random)
        print("LockedLaunchTests: with the Secret Service: \(tally), \(ContinuousClock.now - start)")
        print(tally)
        if keyring { #expect(tally.launches >= 100) }
        #expect(tally.signedOut == 0)
        #expect(tally.lost == 0)
    }

    /// The device locks in the middle of a refresh: the rotated refresh token cannot be written. The session keeps
    /// it and presents only it; it reaches the store once the device unlocks; the next launch presents it. The
    /// endpoint refuses a retired token, as a server with reuse detection does (revoking the grant).
    @Test func aRotationALockedStoreRefusedIsKeptWrittenWhenItOpensAndPresentedNextLaunch() async throws {
        let keychain = FakeKeychain()
        let clock = ManualClock()
        let store = KeychainCredentialStore(
            service: "locked-refresh", accessibility: .whenUnlockedThisDeviceOnly, calls: keychain)
        try await store.save(Self.record(0, launch: 0, now: clock.wallNow))
        let valid = Lock("rt-0-0")
        let endpoint = ScriptedTokenEndpoint { presented, call in
            guard valid.withLock({ $0 }) == presented else {
                throw SessionError(.refreshRejected, "reused", statusCode: 400, oauthError: "invalid_grant")
            }
            // The screen locks while the token request is out.
            keychain.withState { $0.deviceLocked = true }
            let next = "rt-\(call)"
            valid.withLock { $0 = next }
            return TokenSet(accessToken: "at-\(call)", refreshToken: next, lifetime: .seconds(3600))
        }
        let configuration = SessionManager.Configuration(
            store: store, tokenEndpoint: endpoint, sessionConfiguration: .init(clock: clock),
            storeRetryInterval: .seconds(1))
        let manager = SessionManager(configuration: configuration)
        #expect(await manager.restore() == .active(Self.account(0), offline: false))
        let session = try #require(manager.current)

        try await session.refreshTokens()
        #expect(manager.storageFailures[Self.account(0)]?.code == .storeUnavailable)
        // Still locked: the next refresh presents the rotated token it holds, never the stored, retired one.
        try await session.refreshTokens()
        #expect(endpoint.presented == ["rt-0-0", "rt-1"])
        #expect(keychain.withState { state in !state.items.isEmpty })

        keychain.withState { $0.deviceLocked = false }
        for _ in 0..<64 where manager.storageFailures[Self.account(0)] != nil {
            for _ in 0..<10_000 where clock.sleepers == 0 { await Task.yield() }
            clock.advance(by: .seconds(16))
            for _ in 0..<50 { await Task.yield() }
        }
        #expect(manager.storageFailures.isEmpty)
        #expect(try await store.load(for: Self.account(0))?.refreshToken == "rt-2")

        // The next launch: the store does not keep the access token, so restore refreshes, with the newest token.
        let relaunched = SessionManager(configuration: configuration)
        #expect(await relaunched.restore() == .active(Self.account(0), offline: false))
        #expect(endpoint.presented == ["rt-0-0", "rt-1", "rt-2"])
    }

    /// The device unlocks (Apple: the protected data became available): the manager restores at once, without
    /// waiting for its next retry.
    @Test func theDeviceUnlockingRestoresAtOnce() async throws {
        let keychain = FakeKeychain()
        let clock = ManualClock()
        let store = KeychainCredentialStore(service: "unlock-now", calls: keychain)
        try await store.save(Self.record(0, launch: 0, now: clock.wallNow))
        keychain.withState {
            $0.unlockedSinceBoot = false
            $0.answersNotFoundWhileLocked = true
        }
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: Self.unreachable, sessionConfiguration: .init(clock: clock),
                storeRetryInterval: .seconds(3600)))
        let restored = await manager.restore()
        guard case .failed(let error) = restored, error.code == .storeUnavailable else {
            Issue.record("a locked launch restored as \(restored)")
            return
        }
        keychain.withState { $0.unlockedSinceBoot = true }
        manager.protectedDataBecameAvailable()
        for _ in 0..<100_000 where manager.current == nil { await Task.yield() }
        #expect(manager.state == .active(Self.account(0), offline: false))
    }

    // MARK: - The Keychain model

    /// Before the first unlock after a restart (`afterFirstUnlock` items unreadable), the device unlocking after a
    /// random number of Keychain calls: during restore, or during one of its retries.
    static func keychain(_ count: Int, _ tally: inout Tally, _ random: inout SplitMix64) async throws {
        for launch in 0..<count {
            let keychain = FakeKeychain()
            let clock = ManualClock()
            let store = KeychainCredentialStore(service: "locked-launch", calls: keychain)
            let accounts = Int.random(in: 1...3, using: &random)
            for index in 0..<accounts {
                try await store.save(record(index, launch: launch, now: clock.wallNow))
            }
            let notFound = Bool.random(using: &random)
            let unlockAfter = Int.random(in: 1...12, using: &random)
            keychain.withState { state in
                state.unlockedSinceBoot = false
                state.answersNotFoundWhileLocked = notFound
                state.calls = []
                state.before = { _, state in
                    if state.calls.count >= unlockAfter { state.unlockedSinceBoot = true }
                    return nil
                }
            }
            let manager = SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: unreachable,
                    sessionConfiguration: .init(clock: clock), storeRetryInterval: .seconds(1)))
            let restored = await manager.restore()
            let final = await settle(manager, accounts: accounts, clock: clock)
            tally.launches += 1
            if !final || restored == .signedOut { tally.signedOut += 1 }
            keychain.withState { $0.before = nil }
            for index in 0..<accounts where try await store.load(for: account(index)) == nil { tally.lost += 1 }
        }
    }

    /// Advances the clock past each retry until every account has a live session and the state is active, or
    /// 64 retries have passed; whether it got there.
    static func settle(_ manager: SessionManager, accounts: Int, clock: ManualClock) async -> Bool {
        for _ in 0..<64 {
            if manager.sessions.count == accounts, case .active = manager.state { return true }
            // Wait for the retry to reach its sleep, then let it run.
            for _ in 0..<10_000 where clock.sleepers == 0 { await Task.yield() }
            clock.advance(by: .seconds(16))
            for _ in 0..<50 { await Task.yield() }
        }
        return manager.sessions.count == accounts
    }

    // MARK: - The file store

    /// Records made unreadable (mode 000; the launch runs without CAP_DAC_OVERRIDE, so root obeys it too), made
    /// readable again at a random instant: before the child's restore reads them, during it, or after it returned.
    static func fileStore(_ count: Int, _ tally: inout Tally, _ random: inout SplitMix64) async throws {
        let child = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        let setpriv = try #require(ChildProcess.tool("setpriv"), "setpriv (util-linux) is needed")
        try await TemporaryDirectory.with { root in
            for launch in 0..<count {
                let directory = root.appendingPathComponent("launch-\(launch)")
                let store = try FileCredentialStore(directory: directory)
                let accounts = Int.random(in: 1...3, using: &random)
                for index in 0..<accounts { try await store.save(record(index, launch: launch, now: Date())) }
                let files = (0..<accounts).map { directory.appendingPathComponent(account($0).storageKey).path }
                for file in files where Bool.random(using: &random) || file == files[0] { chmod(file, 0) }
                let unlockBeforeRestore = Int.random(in: 0..<4, using: &random) == 0
                let process = try ChildProcess(
                    setpriv,
                    [
                        "--bounding-set", "-dac_override,-dac_read_search", child.path, "locked-launch", directory.path,
                        "\(accounts)",
                    ])
                if unlockBeforeRestore { for file in files { chmod(file, 0o600) } }
                let restored = process.readLine() ?? ""
                if !unlockBeforeRestore { for file in files { chmod(file, 0o600) } }
                let final = process.readLine() ?? ""
                let (rest, status) = process.finish()
                tally.launches += 1
                let active = final.hasPrefix("final active(") && final.hasSuffix(" \(accounts)")
                if restored.hasPrefix("restored signedOut") || !active {
                    tally.signedOut += 1
                    print(
                        "LockedLaunchTests: file launch \(launch) (\(accounts) accounts, unlocked "
                            + "\(unlockBeforeRestore ? "before" : "after") restore): \(restored) / \(final) / \(rest), "
                            + "status \(status)")
                }
                for index in 0..<accounts where try await store.load(for: account(index)) == nil { tally.lost += 1 }
            }
        }
    }

    // MARK: - The Secret Service

    /// The GNOME Keyring's login collection locked (as a screen lock does) before launch, unlocked at a random
    /// instant; `false` when there is no keyring to lock here.
    static func keyring(_ count: Int, _ tally: inout Tally, _ random: inout SplitMix64) async throws -> Bool {
        #if os(Linux)
            let environment = ProcessInfo.processInfo.environment
            guard let password = environment["SESSIONKIT_KEYRING_PASSWORD"], await SecretServiceTestGate.shouldRun()
            else {
                #expect(
                    environment["SESSIONKIT_REQUIRE_SECRET_SERVICE"] != "1",
                    "scripts/test runs with-keyring, which exports SESSIONKIT_KEYRING_PASSWORD")
                print("LockedLaunchTests: the Secret Service part skipped, no keyring to lock (scripts/test has one)")
                return false
            }
            for launch in 0..<count {
                let service = "dev.sessionkit.tests.locked.\(UUID().uuidString)"
                let store = SecretServiceCredentialStore(service: service)
                let accounts = Int.random(in: 1...2, using: &random)
                for index in 0..<accounts { try await store.save(record(index, launch: launch, now: Date())) }
                #expect(try lockKeyring(["lock"]) == "locked")
                let unlockAfterRestore = Bool.random(using: &random)
                let manager = SessionManager(
                    configuration: .init(
                        store: store, tokenEndpoint: unreachable, storeRetryInterval: .milliseconds(5)))
                if !unlockAfterRestore {
                    // Unlocked while restore runs: the instant falls wherever the keyring's answer does.
                    async let unlocked = lockKeyring(["unlock", password])
                    let restored = await manager.restore()
                    #expect(try await unlocked == "unlocked")
                    if restored == .signedOut { tally.signedOut += 1 }
                } else {
                    let restored = await manager.restore()
                    if restored == .signedOut { tally.signedOut += 1 }
                    #expect(try lockKeyring(["unlock", password]) == "unlocked")
                }
                let deadline = ContinuousClock.now.advanced(by: .seconds(10))
                while manager.sessions.count < accounts, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(2))
                }
                tally.launches += 1
                if manager.sessions.count < accounts { tally.signedOut += 1 }
                for index in 0..<accounts where try await store.load(for: account(index)) == nil { tally.lost += 1 }
                try await store.deleteAll()
            }
            return true
        #else
            return false
        #endif
    }

    /// Runs Tests/AuthorizationServer/keyring_lock.py; its answer, `locked` or `unlocked`.
    static func lockKeyring(_ arguments: [String]) throws -> String {
        let output = try PythonTools.run("keyring_lock.py", arguments)
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
