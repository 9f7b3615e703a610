import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// A sign-out in one process ends the account's sessions in every other process on the store (issue 35), through
/// the store's change notice, with no request asked after a process learned of it reaching the server.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct CrossProcessSignOutTests {
    static let account = Account(issuer: "https://cross.sessionkit.invalid", subject: "alice")

    /// CLOCK_MONOTONIC in nanoseconds, the clock the children stamp with.
    static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    /// One request as the server saw it.
    struct Arrival: Sendable {
        let process: String
        let askedAt: UInt64
        let arrivedAt: UInt64
    }

    /// Another account on the store, for the switch.
    static let other = Account(issuer: "https://cross.sessionkit.invalid", subject: "bob")

    /// How the signing process ends alice's sessions.
    enum Ending: String, CaseIterable, Sendable {
        case signOut = "sign-out"
        case switchAway = "switch"
        case rejectedGrant = "reject"
    }

    /// Stores alice's record with an hour-long access token, as a sign-in in a shared store leaves it, current;
    /// and bob's, selected earlier. Alice's refresh token is one the children's endpoint rejects (it names no
    /// generation), which only the rejected-grant case presents.
    static func seed(_ directory: URL) async throws {
        let now = Date()
        let store = try FileCredentialStore(directory: directory)
        try await store.save(
            CredentialRecord(
                account: account, refreshToken: "dead-alice", accessToken: "at-alice-1",
                accessTokenExpiresAt: now.addingTimeInterval(3600), scope: "scope-alice-1", savedAt: now,
                selectedAt: now))
        try await store.save(
            CredentialRecord(
                account: other, refreshToken: "rt-bob-1", accessToken: "at-bob-1",
                accessTokenExpiresAt: now.addingTimeInterval(3600), scope: "scope-bob-1", savedAt: now,
                selectedAt: now.addingTimeInterval(-60)))
    }

    @Test(arguments: Ending.allCases)
    func endingAnAccountInOneProcessEndsItInEveryOtherWithNoRequestAfter(_ ending: Ending) async throws {
        let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        let followers = 3
        let loops = 4
        try await TemporaryDirectory.with { root in
            let arrivals = Lock<[Arrival]>([])
            try await LocalServer.withRunning(handler: { request async in
                let arrivedAt = Self.monotonicNanoseconds()
                if let process = request.header("X-Process"),
                    let asked = request.header("X-Asked-At").flatMap(UInt64.init)
                {
                    arrivals.withLock { $0.append(Arrival(process: process, askedAt: asked, arrivedAt: arrivedAt)) }
                }
                return .json(#"{"ok":true}"#)
            }) { server async throws in
                let directory = root.appendingPathComponent("credentials")
                try await Self.seed(directory)
                let resource = server.url("/items").absoluteString
                var children: [ChildProcess] = []
                for role in ["signer"] + Array(repeating: "follower", count: followers) {
                    children.append(
                        try ChildProcess(
                            executable, ["cross-process", role, directory.path, resource, "\(loops)"],
                            writableInput: true))
                }
                for (index, child) in children.enumerated() {
                    #expect(child.readLine() == "ready", "child \(index) did not restore")
                }
                for child in children { child.send("go") }
                // Requests in flight in every process before anyone signs out.
                let pids = children.map { "\($0.process.processIdentifier)" }
                let deadline = ContinuousClock.now.advanced(by: .seconds(20))
                while ContinuousClock.now < deadline {
                    let seen = arrivals.withLock { list in
                        Set(pids.filter { pid in list.filter { $0.process == pid }.count >= 20 })
                    }
                    if seen.count == pids.count { break }
                    try await Task.sleep(for: .milliseconds(5))
                }
                // A process that never learns is killed after 3 s, so the test fails by name instead of hanging.
                let processIDs = children.map(\.process.processIdentifier)
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(3))
                    for pid in processIDs { _ = kill(pid, SIGKILL) }
                }
                defer { watchdog.cancel() }
                children[0].send(ending.rawValue)
                let signingOut = try #require(Self.stamp(children[0].readLine(), after: "signing-out "))
                var learned: [String: UInt64] = [:]
                for (index, child) in children.enumerated().dropFirst() {
                    let line = child.readLine()
                    let instant: UInt64 = try #require(
                        Self.stamp(line, after: "learned "), "\(String(describing: line))")
                    learned[pids[index]] = instant
                }
                for (index, child) in children.enumerated() {
                    let (output, status) = child.finish()
                    #expect(status == 0, "child \(index) exited with \(status): \(output)")
                }
                let slowest = learned.values.map { Double($0 - min($0, signingOut)) / 1_000_000 }.max() ?? .infinity
                // A request counts as after when its process asked for it after it learned, or when it reached the
                // server more than 50 ms after that: one already on the wire at that instant arrives just after.
                let after = arrivals.withLock { list in
                    list.filter { arrival in
                        guard let instant = learned[arrival.process] else { return false }
                        return arrival.askedAt > instant || arrival.arrivedAt > instant + 50_000_000
                    }.count
                }
                let processes = children.count
                print("CrossProcessSignOutTests: \(ending.rawValue)")
                print(
                    "cross-process sign-out: processes: \(processes), slowest: \(Int(slowest.rounded(.up))) ms, "
                        + "requests after: \(after)")
                #expect(processes >= 3)
                #expect(slowest <= 250)
                #expect(after == 0)
                #expect(try await FileCredentialStore(directory: directory).load(for: Self.account) == nil)
            }
        }
    }

    /// The number after `prefix` on `line`, or `nil` when the line is missing or says something else.
    static func stamp(_ line: String?, after prefix: String) -> UInt64? {
        guard let line, line.hasPrefix(prefix) else { return nil }
        return UInt64(line.dropFirst(prefix.count))
    }
}
