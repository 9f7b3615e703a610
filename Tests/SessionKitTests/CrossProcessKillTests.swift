import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Kills the process holding the refresh lock with SIGKILL at random instants of its hold (seeded, repeatable), while
/// three others wait for it, against the mock authorization server with rotation and reuse detection.
///
/// The kernel drops a dead holder's lock, so the others always finish within the bound. What they find depends on
/// where the kill landed:
/// - before the holder's refresh reached the server, or after it stored the result: one refresh in all, nothing
///   presented twice, every survivor's requests succeed, and the store holds the live refresh token;
/// - after its refresh request left and before it stored the answer: the server rotates the token (a server finishes
///   a request whose client died) and the rotation dies with the holder, so the stored token is one the server
///   retires. Presenting it is the only way on, and the server's reuse detection revokes the grant: the survivors
///   fail with a typed error, the rejected record is not written back, and the round is counted. Only a server-side
///   grace period closes that window (see the Several Accounts article).
///
/// Linux only: the holder is found in `/proc/locks`. `SESSIONKIT_KILLS` sets the number of rounds times 4 (200 by
/// default: 50 rounds of four processes), `SESSIONKIT_CRASH_SEED` the seed of their timing.
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(if: FileManager.default.fileExists(atPath: "/proc/locks"), "needs /proc/locks to find the lock holder")
)
struct CrossProcessKillTests {
    @Test func aKilledLockHolderNeverBlocksTheOthersNorMakesThemPresentItsTokenAgain() async throws {
        let (child, kills, seed) = try ChildProcess.killSettings(defaultSeed: 0x17_C0_55)
        var generator = SeededGenerator(seed: seed)
        let rounds = max(1, kills / 4)
        var clean = 0
        var lostRotations = 0
        var secondRefreshes = 0
        var notHeld = 0
        for round in 1...rounds {
            let delay = UInt32.random(in: 0...4_000, using: &generator)
            let context = "round \(round) of \(rounds) (seed \(seed), kill \(delay) µs into the hold)"
            let outcome = try await Self.runRound(child, delay: delay, context: context)
            switch outcome {
            case .clean: clean += 1
            case .secondRefresh: secondRefreshes += 1
            case .lostRotation: lostRotations += 1
            case .notHeld: notHeld += 1
            }
        }
        print(
            "CrossProcessKillTests: \(rounds) rounds (seed \(seed)): \(clean) clean, \(secondRefreshes) clean with a "
                + "second refresh, \(lostRotations) killed between the server's rotation and the store, \(notHeld) "
                + "finished before the lock holder was seen")
        #expect(clean > 0, "no round ended clean")
        #expect(secondRefreshes * 10 <= rounds, "a second refresh in \(secondRefreshes) of \(rounds) rounds")
    }

    enum RoundOutcome {
        /// Nothing presented twice, one refresh.
        case clean
        /// Nothing presented twice, but two refreshes: the second with the token the first issued.
        case secondRefresh
        /// The holder died between the server's rotation and its store.
        case lostRotation
        /// The children finished before the test saw anyone hold the lock.
        case notHeld
    }

    private static func runRound(_ executable: URL, delay: UInt32, context: String) async throws -> RoundOutcome {
        try await TemporaryDirectory.with { root in
            try await MockAuthorizationServer.withRunning { mock in
                let directory = root.appendingPathComponent("credentials")
                let account = try await CrossProcessRefreshTests.seed(mock, directory: directory)
                let original = try await FileCredentialStore(directory: directory).load(for: account)?.refreshToken
                let lockFile = directory.appendingPathComponent(FileCredentialStore.lockFileName)
                _ = FileManager.default.createFile(atPath: lockFile.path, contents: nil)
                let inode = try #require(
                    (try FileManager.default.attributesOfItem(atPath: lockFile.path)[.systemFileNumber] as? NSNumber)?
                        .uint64Value)
                mock.invalidateAccessTokens(for: "alice")
                let burst = try await RefreshBurst.start(
                    executable, count: 4, directory: directory, tokenEndpoint: mock.tokenEndpoint,
                    clientID: MockAuthorizationServer.Configuration().clientID, resource: mock.userInfoEndpoint,
                    requests: CrossProcessRefreshTests.requestsEach)
                let children = Set(burst.processIdentifiers)
                burst.go()
                let holder = await offPool { () -> Int32? in
                    let deadline = ContinuousClock.now.advanced(by: .seconds(20))
                    while ContinuousClock.now < deadline, burst.isRunning {
                        if let pid = Self.holder(ofInode: inode), children.contains(pid) {
                            if delay > 0 { usleep(delay) }
                            burst.kill(pid)
                            return pid
                        }
                        usleep(100)
                    }
                    return nil
                }
                let killedAt = ContinuousClock.now
                let outcomes = await burst.outcomes()
                guard let holder else { return .notHeld }
                // The kernel dropped the dead holder's lock: nobody waited out the bound (30 s by default).
                let waited = ContinuousClock.now - killedAt
                #expect(waited < .seconds(30), "\(context): the survivors took \(waited) after the kill")
                let survivors = zip(burst.processIdentifiers, outcomes).filter { $0.0 != holder }.map(\.1)
                for survivor in survivors {
                    #expect(survivor.status == 0, "\(context): a survivor exited with \(survivor.status)")
                    #expect(survivor.done != nil, "\(context): a survivor did not finish: \(survivor.lines)")
                }
                let record = try await FileCredentialStore(directory: directory).load(for: account)
                let refreshes = mock.tokenRequestCount(grant: .refreshToken)
                if mock.repeatedRefreshTokenCount == 0 {
                    // Nothing presented twice: each refresh presented the newest token there was. One refresh is
                    // the rule; a second (seen once in about 600 CI rounds, cause not yet found) presented the
                    // token the first issued, which is safe but not single-flight: it is counted and described.
                    #expect(refreshes <= 2, "\(context): \(refreshes) refreshes reached the server")
                    for survivor in survivors {
                        #expect(
                            survivor.done?.succeeded == CrossProcessRefreshTests.requestsEach,
                            "\(context): \(survivor.lines)")
                    }
                    let stored = try #require(record?.refreshToken, "\(context): the store lost the record")
                    #expect(mock.isActive(token: stored), "\(context): the stored refresh token is not usable")
                    if refreshes == 2 {
                        print(
                            "CrossProcessKillTests: \(context): a second refresh, with the token the first issued "
                                + "(holder \(holder); survivors: \(survivors.map(\.lines)))")
                        return .secondRefresh
                    }
                    return .clean
                }
                // The holder's refresh reached the server and rotated the token; it died before storing the new
                // one. That token was presented again once, by the survivor that found it stored; it deleted the
                // record before releasing the lock, so the others found it gone and presented nothing.
                #expect(mock.repeatedRefreshTokenCount == 1, "\(context)")
                #expect(refreshes == 2, "\(context): \(refreshes) refreshes reached the server")
                for survivor in survivors where survivor.done?.failed ?? 0 > 0 {
                    let codes = Set(survivor.lines.filter { $0.hasPrefix("failed ") })
                    #expect(
                        codes.isSubset(of: ["failed refreshRejected", "failed sessionEnded", "failed sessionRevoked"]),
                        "\(context): \(codes)")
                }
                // Gone, or (when a survivor's refresh reached the server before the dead holder's, which the server
                // then processed as a reuse) holding the token that refresh issued: never the rejected one.
                #expect(
                    record == nil || record?.refreshToken != original,
                    "\(context): a rejected grant's record was written back")
                return .lostRotation
            }
        }
    }

    /// The process holding an `flock` on the file with `inode`, from `/proc/locks`.
    private static func holder(ofInode inode: UInt64) -> Int32? {
        guard let table = try? String(contentsOfFile: "/proc/locks", encoding: .utf8) else { return nil }
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE",
                let file = fields[5].split(separator: ":").last, UInt64(file) == inode
            else { continue }
            return Int32(fields[4])
        }
        return nil
    }
}
