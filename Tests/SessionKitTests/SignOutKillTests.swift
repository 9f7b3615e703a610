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

/// Kills a process with SIGKILL at random instants of `signOut()`, with and without a data directory, while
/// revocation answers or hangs; then launches again over the same directories.
///
/// Once the child has seen `current` leave alice (`begin sign-out`: sign-out was called and has detached her),
/// no launch may find her signed in or anything of hers left: record, account directory and outbox, registered
/// resource, purge intent; and her refresh token is never presented. A kill before that instant may leave her
/// signed in, but only whole: restored with her record, or purged with nothing left.
///
/// The child is `SessionKitCrashChild sign-out` (see its header). `SESSIONKIT_KILLS` sets the number of kills per
/// configuration (200 by default) and `SESSIONKIT_CRASH_SEED` the seed of their timing.
@Suite(.timeLimit(.minutes(10))) struct SignOutKillTests {
    private static let alice = Account(issuer: "https://crash.sessionkit.invalid", subject: "alice")

    /// Records which refresh tokens a restore presented.
    private final class RecordingEndpoint: TokenEndpoint {
        let presented = Lock<[String]>([])

        func refresh(using refreshToken: String) async throws -> TokenSet {
            presented.withLock { $0.append(refreshToken) }
            return TokenSet(accessToken: "at-restored", refreshToken: "rt-restored", lifetime: .seconds(3600))
        }
    }

    @Test(arguments: [true, false])
    func aKillAfterSignOutWasCalledNeverBringsTheUserBack(withDataDirectory: Bool) async throws {
        let (child, kills, seed) = try ChildProcess.killSettings(defaultSeed: 0x51_6E_0A_7)
        var generator = SeededGenerator(seed: seed &+ (withDataDirectory ? 1 : 0))
        var afterBegin = 0
        var duringHungRevocation = 0
        var signedInAfterEarlyKill = 0
        for round in 1...kills {
            // A third of the rounds revoke through a server that never answers.
            let hangs = Int.random(in: 0..<3, using: &generator) == 0
            let revocation = hangs ? 0 : UInt64.random(in: 1...3_000, using: &generator)
            // Most kills land after sign-out was called, some just before it.
            let early = Int.random(in: 0..<5, using: &generator) == 0
            let delay = UInt32.random(in: 0...(hangs && !early ? 150_000 : 3_000), using: &generator)
            try await TemporaryDirectory.with { root in
                let lines = try await Self.runRound(
                    child, root: root.path, withData: withDataDirectory, revocation: revocation, early: early,
                    delay: delay)
                let context = "round \(round) (seed \(seed), data directory: \(withDataDirectory))"
                let begun = lines.contains("begin sign-out")
                if begun { afterBegin += 1 }
                if begun && hangs && !lines.contains("end sign-out") { duringHungRevocation += 1 }
                let restored = try await Self.check(
                    root: root, withData: withDataDirectory, signOutBegun: begun, context: context)
                if restored { signedInAfterEarlyKill += 1 }
            }
        }
        print(
            "SignOutKillTests (data directory: \(withDataDirectory)): \(kills) kills (seed \(seed)), \(afterBegin) "
                + "after sign-out was called (\(duringHungRevocation) while revocation hung), "
                + "\(signedInAfterEarlyKill) earlier kills left alice signed in")
        #expect(afterBegin >= kills / 2, "too few kills landed after sign-out was called")
        #expect(duringHungRevocation > 0, "no kill landed while revocation hung")
    }

    /// Restores over the round's directories and checks what is left of alice; returns whether she was restored.
    private static func check(root: URL, withData: Bool, signOutBegun: Bool, context: String) async throws -> Bool {
        let fileManager = FileManager.default
        let credentials = root.appendingPathComponent("credentials")
        let data = root.appendingPathComponent("data")
        let marker = root.appendingPathComponent("markers").appendingPathComponent(alice.storageKey)
        let endpoint = RecordingEndpoint()
        let manager = SessionManager(
            configuration: .init(
                store: try FileCredentialStore(directory: credentials), tokenEndpoint: endpoint,
                dataDirectory: withData ? data : nil))
        manager.register(
            PurgeStep("marker") { account in
                let marker = root.appendingPathComponent("markers").appendingPathComponent(account.storageKey)
                if fileManager.fileExists(atPath: marker.path) { try fileManager.removeItem(at: marker) }
            })
        await manager.restore()
        defer { for session in manager.sessions { session.end() } }

        let record = try await FileCredentialStore(directory: credentials).load(for: alice)
        let directory = data.appendingPathComponent("accounts").appendingPathComponent(alice.storageKey)
        let restored = manager.sessions.contains { $0.account == alice }
        let journals = [
            data.appendingPathComponent("purge-pending"), credentials.appendingPathComponent(".purge-pending"),
        ]
        let intents = journals.flatMap { (try? fileManager.contentsOfDirectory(atPath: $0.path)) ?? [] }
        #expect(intents.isEmpty, "\(context): purge intents remain after restore: \(intents)")
        if signOutBegun || !restored {
            let why = signOutBegun ? "sign-out was called" : "she was not restored"
            #expect(!restored, "\(context): alice was restored after \(why)")
            #expect(record == nil, "\(context): alice's record remains after \(why)")
            #expect(endpoint.presented.withLock { $0 }.isEmpty, "\(context): her refresh token was presented")
            #expect(!fileManager.fileExists(atPath: marker.path), "\(context): her resource remains after \(why)")
            #expect(!fileManager.fileExists(atPath: directory.path), "\(context): her directory remains after \(why)")
            return false
        }
        #expect(record != nil, "\(context): alice was restored without a record")
        #expect(fileManager.fileExists(atPath: marker.path), "\(context): alice restored, her resource half purged")
        if withData {
            #expect(
                fileManager.fileExists(atPath: directory.appendingPathComponent("notes.txt").path),
                "\(context): alice restored, her directory half purged")
        }
        return true
    }

    /// Starts the child, waits for `ready` (and, unless `early`, for `begin sign-out`), sleeps `delay` microseconds
    /// to move the kill to a random instant, kills it, and returns every line it printed.
    private static func runRound(
        _ child: URL, root: String, withData: Bool, revocation: UInt64, early: Bool, delay: UInt32
    ) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        let process = try ChildProcess(
                            child, ["sign-out", root, withData ? "with-data" : "without-data", String(revocation)])
                        var lines: [String] = []
                        let awaited = early ? "ready" : "begin sign-out"
                        while let line = process.readLine() {
                            lines.append(line)
                            if line == awaited { break }
                        }
                        if delay > 0 { usleep(delay) }
                        let killed = process.kill()
                        let (rest, _) = process.finish()
                        lines += rest.split(separator: "\n").map(String.init)
                        guard killed, lines.contains("ready") else {
                            throw SessionError(
                                .invalidInput, "the crash child exited before it was killed: \(lines.last ?? "")")
                        }
                        return lines
                    })
            }
        }
    }
}
