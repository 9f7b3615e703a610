import Dispatch
import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Kills a process that is saving records, with SIGKILL, at random points, many times, and checks after each
/// kill that the record on disk is one the process was saving, whole.
///
/// The child (`SessionKitCrashChild save-loop`) saves record 1, 2, 3, … of one account in a tight loop and
/// reports each completed save on stdout. Record n is a function of n alone, with a size that changes with n,
/// so a torn or mixed record cannot match any record. `SESSIONKIT_KILLS` sets the number of kills (200 by
/// default) and `SESSIONKIT_CRASH_SEED` the seed that picks the kill points.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(30, by: "SESSIONKIT_KILLS", reference: 200))))
struct FileCredentialStoreCrashTests {
    private let account = Account(issuer: "https://crash.sessionkit.invalid", subject: "crash-child")

    /// Record n, exactly as the child builds it.
    private func expectedRecord(_ n: Int) -> CredentialRecord {
        let filler = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(n % 26)))
        return CredentialRecord(
            account: account,
            refreshToken: "refresh-\(n)-" + String(repeating: filler, count: (n * 7919) % 3000),
            accessToken: "access-\(n)",
            accessTokenExpiresAt: Date(timeIntervalSince1970: Double(n)),
            scope: "scope-\(n)",
            savedAt: Date(timeIntervalSince1970: Double(n) + 0.5)
        )
    }

    /// What one run of the child did before it was killed.
    private struct Round: Sendable {
        /// The counter of the record the child found at start.
        var start: Int
        /// The last save the child reported complete before the kill.
        var acknowledged: Int
        /// Whether SIGKILL ended it (rather than the child exiting on its own).
        var killed: Bool
    }

    @Test func aKilledSaveLeavesTheOldRecordOrTheNewOneWhole() async throws {
        let (child, kills, seed) = try ChildProcess.killSettings(defaultSeed: 0x5E55_C0DE)
        var generator = SeededGenerator(seed: seed)
        let started = ContinuousClock.now

        try await TemporaryDirectory.with { directory in
            var current = 0
            var killedMidSave = 0
            for round in 1...kills {
                // Kill after 0–5 completed saves, half the time at once, half after up to 1.5 ms more, so the
                // kill lands anywhere in a save: before the temporary file, while writing or flushing it, around
                // the rename, or while flushing the directory.
                let saves = Int.random(in: 0...5, using: &generator)
                let delay = Bool.random(using: &generator) ? 0 : UInt32.random(in: 1...1_500, using: &generator)
                let outcome = try await Self.runRound(child, directory: directory.path, saves: saves, delay: delay)

                #expect(outcome.killed, "round \(round) (seed \(seed)): the child exited before it was killed")
                #expect(outcome.start == current, "round \(round) (seed \(seed)): the child read another record")
                let store = try FileCredentialStore(directory: directory)
                let loaded = try #require(
                    try await store.load(for: account),
                    "round \(round) (seed \(seed)): no record after \(outcome.acknowledged) saves"
                )
                let access = try #require(loaded.accessToken)
                let counter = try #require(Int(access.dropFirst("access-".count)))
                #expect(loaded == expectedRecord(counter), "round \(round) (seed \(seed)): record \(counter) is torn")
                // Every save the child reported before the kill is there (a later one may be too).
                #expect(counter >= outcome.acknowledged, "round \(round) (seed \(seed)): a completed save is lost")
                current = counter
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
                    .filter { $0.contains(".tmp-") }.count
                if leftovers > killedMidSave { killedMidSave = leftovers }
            }

            // The kills left temporary files behind (proof that some landed mid-save); none is mistaken for a
            // record, and deleting the account removes them all.
            let store = try FileCredentialStore(directory: directory)
            #expect(try await store.accounts() == [account])
            try await store.delete(for: account)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
            print(
                "FileCredentialStoreCrashTests: \(kills) kills (seed \(seed)), last record \(current), "
                    + "\(killedMidSave) temporary files left by kills mid-save, \(ContinuousClock.now - started)"
            )
            #expect(killedMidSave > 0, "no kill landed inside a save; the test exercised nothing")
        }
    }

    /// Starts the child, waits for it to report `saves` completed saves (plus `delay` microseconds), kills it.
    ///
    /// Runs on a dispatch queue: reading the child's pipe blocks, and must not block the cooperative pool.
    private static func runRound(_ child: URL, directory: String, saves: Int, delay: UInt32) async throws -> Round {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try round(child, directory: directory, saves: saves, delay: delay) })
            }
        }
    }

    private static func round(_ child: URL, directory: String, saves: Int, delay: UInt32) throws -> Round {
        let process = try ChildProcess(child, ["save-loop", directory])
        guard let ready = process.readLine(), ready.hasPrefix("ready "), let start = Int(ready.dropFirst(6)) else {
            _ = process.kill()
            throw SessionError(.invalidInput, "the crash child did not report ready")
        }
        var acknowledged = start
        while acknowledged < start + saves {
            guard let line = process.readLine(), line.hasPrefix("saved "), let counter = Int(line.dropFirst(6)) else {
                break
            }
            acknowledged = counter
        }
        // Not ordering anything: only moving the kill to a random point inside the next save.
        if delay > 0 { usleep(delay) }
        return Round(start: start, acknowledged: acknowledged, killed: process.kill())
    }
}
