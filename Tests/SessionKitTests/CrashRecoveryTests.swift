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

/// Kills a process that signs in, refreshes and signs out through a `SessionManager` over a `FileCredentialStore`
/// with a data directory, with SIGKILL at random points, many times; after each kill a new manager over the same
/// directories restores, and the state must be consistent:
/// - each credential record is one the process was writing, whole (never a mix of two generations);
/// - a purge intent found on disk belongs to a sign-out that was in progress, and `restore()` finishes it before
///   anything authenticates: the token endpoint is never called for that account, and once restore returns
///   nothing of it remains (record, account directory, registered resource, intent);
/// - an account whose sign-out completed has nothing left either.
///
/// The child (`SessionKitCrashChild lifecycle`) numbers its tokens by generation and prints `begin`/`end` lines
/// around each operation, so the test knows what was in flight when it killed it. `SESSIONKIT_KILLS` sets the
/// number of kills (200 by default) and `SESSIONKIT_CRASH_SEED` the seed that picks the kill points and the
/// child's operations.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(30, by: "SESSIONKIT_KILLS", reference: 200)))) struct CrashRecoveryTests {
    private static let issuer = "https://crash.sessionkit.invalid"
    private static let users = ["alice", "bob"]

    /// What the child had done for one user when it was killed.
    private struct Progress: Sendable {
        /// The generation of the last completed sign-in or refresh, or nil when signed out.
        var signedIn: Int?
        /// The operation begun and not ended, with the generation it writes (or holds, for a sign-out).
        var inFlight: (operation: String, generation: Int)?

        /// The generations the record on disk may hold (nil: no record).
        var allowedRecords: Set<Int?> {
            switch inFlight {
            case ("refresh", let n)?: [n - 1, n]
            case ("sign-in", let n)?: [nil, n]
            case ("sign-out", let n)?: [n, nil]
            default: [signedIn]
            }
        }
    }

    /// Refreshes with the next generation, and records which users' tokens were presented.
    private final class RecordingEndpoint: TokenEndpoint {
        let presented = Lock<[String]>([])

        func refresh(using refreshToken: String) async throws -> TokenSet {
            let parts = refreshToken.split(separator: "-")
            guard parts.count == 3, let n = Int(parts[2]) else {
                throw SessionError(.refreshRejected, "unknown", statusCode: 400, oauthError: "invalid_grant")
            }
            presented.withLock { $0.append(String(parts[1])) }
            return TokenSet(
                accessToken: "at-\(parts[1])-\(n + 1)", refreshToken: "rt-\(parts[1])-\(n + 1)",
                scope: "scope-\(parts[1])-\(n + 1)", lifetime: .seconds(3600))
        }
    }

    @Test func aKilledSessionManagerRestoresToAConsistentState() async throws {
        let (child, kills, seed) = try ChildProcess.killSettings(defaultSeed: 0x5E55_10F7)
        var generator = SeededGenerator(seed: seed)
        var inFlightAtKill: [String: Int] = [:]
        var intentsFinished = 0

        for round in 1...kills {
            let ends = Int.random(in: 0...8, using: &generator)
            let delay = Bool.random(using: &generator) ? 0 : UInt32.random(in: 1...3_000, using: &generator)
            let childSeed = generator.next()
            try await TemporaryDirectory.with { root in
                let lines = try await Self.runRound(child, root: root.path, seed: childSeed, ends: ends, delay: delay)
                let context = "round \(round) (seed \(seed))"
                let progress = Self.progress(from: lines)
                for user in Self.users {
                    let key = inFlightKey(progress[user]?.inFlight?.operation)
                    inFlightAtKill[key, default: 0] += 1
                }
                intentsFinished += try await Self.check(root: root, progress: progress, context: context)
            }
        }
        print(
            "CrashRecoveryTests: \(kills) kills (seed \(seed)); operations in flight per account at the kill: "
                + inFlightAtKill.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                + "; \(intentsFinished) interrupted purges finished by restore")
        #expect(inFlightAtKill["sign-out", default: 0] > 0, "no kill landed inside a sign-out")
        #expect(inFlightAtKill["refresh", default: 0] > 0, "no kill landed inside a refresh")
        #expect(intentsFinished > 0, "no kill landed between a purge intent and the end of its purge")
    }

    private func inFlightKey(_ operation: String?) -> String { operation ?? "nothing" }

    private static func account(_ user: String) -> Account { Account(issuer: issuer, subject: user) }

    private static func progress(from lines: [String]) -> [String: Progress] {
        var progress: [String: Progress] = [:]
        for line in lines {
            let words = line.split(separator: " ").map(String.init)
            guard words.count == 4, let n = Int(words[3]) else { continue }
            let (phase, operation, user) = (words[0], words[1], words[2])
            var entry = progress[user] ?? Progress()
            if phase == "begin" {
                entry.inFlight = (operation, n)
            } else {
                entry.inFlight = nil
                entry.signedIn = operation == "sign-out" ? nil : n
            }
            progress[user] = entry
        }
        return progress
    }

    /// Checks the directories before and after a restore; returns how many purge intents restore finished.
    private static func check(root: URL, progress: [String: Progress], context: String) async throws -> Int {
        let credentials = root.appendingPathComponent("credentials")
        let data = root.appendingPathComponent("data")
        let journal = data.appendingPathComponent("purge-pending")
        let markers = root.appendingPathComponent("markers")
        let fileManager = FileManager.default
        var intents: Set<String> = []

        // Before restore: every record is whole and one the child was writing; every intent is a sign-out's.
        let before = try FileCredentialStore(directory: credentials)
        for user in users {
            let entry = progress[user] ?? Progress(signedIn: nil, inFlight: ("sign-in", 1))
            let record: CredentialRecord?
            do {
                record = try await before.load(for: account(user))
            } catch {
                Issue.record("\(context): \(user)'s record cannot be read: \(error)")
                continue
            }
            let generation = record.flatMap { record -> Int? in
                guard let token = record.refreshToken, let n = Int(token.split(separator: "-").last ?? "") else {
                    return -1
                }
                return token == "rt-\(user)-\(n)" && record.scope == "scope-\(user)-\(n)" ? n : -1
            }
            #expect(generation != -1, "\(context): \(user)'s record is not a whole record of one generation")
            let held = generation.map(String.init) ?? "none"
            let allowed = entry.allowedRecords.map { $0.map(String.init) ?? "none" }.sorted()
            #expect(
                entry.allowedRecords.contains(generation),
                "\(context): \(user)'s record holds generation \(held), expected one of \(allowed)")
            if fileManager.fileExists(atPath: journal.appendingPathComponent("\(account(user).storageKey).json").path) {
                intents.insert(user)
                #expect(
                    entry.inFlight?.operation == "sign-out",
                    "\(context): a purge intent for \(user), whose sign-out was not in progress")
            }
        }

        // Restore, with the same purge step the child registered.
        let endpoint = RecordingEndpoint()
        let manager = SessionManager(
            configuration: .init(
                store: try FileCredentialStore(directory: credentials), tokenEndpoint: endpoint, dataDirectory: data))
        manager.register(
            PurgeStep("marker") { account in
                let marker = markers.appendingPathComponent(account.storageKey)
                if fileManager.fileExists(atPath: marker.path) { try fileManager.removeItem(at: marker) }
            })
        await manager.restore()

        let after = try FileCredentialStore(directory: credentials)
        for user in users {
            let key = account(user).storageKey
            let signedOut = progress[user].map { $0.signedIn == nil && $0.inFlight == nil } ?? false
            guard intents.contains(user) || signedOut else {
                continue
            }
            let why = intents.contains(user) ? "its sign-out recorded its purge intent" : "it signed out"
            #expect(try await after.load(for: account(user)) == nil, "\(context): \(user)'s record remains; \(why)")
            #expect(
                !fileManager.fileExists(atPath: data.appendingPathComponent("accounts/\(key)").path),
                "\(context): \(user)'s directory remains; \(why)")
            #expect(
                !fileManager.fileExists(atPath: markers.appendingPathComponent(key).path),
                "\(context): \(user)'s registered resource was not purged; \(why)")
            #expect(!manager.sessions.contains { $0.account == account(user) }, "\(context): \(user) restored")
            #expect(
                !endpoint.presented.withLock { $0 }.contains(user),
                "\(context): \(user)'s refresh token was used after \(why)")
        }
        let pending = (try? fileManager.contentsOfDirectory(atPath: journal.path)) ?? []
        #expect(pending.isEmpty, "\(context): purge intents remain after restore: \(pending.count)")
        for session in manager.sessions { session.end() }
        return intents.count
    }

    /// Starts the child, waits for `ready` and then `ends` completed operations (plus `delay` microseconds), kills
    /// it, and returns every line it printed.
    ///
    /// Runs on a dispatch queue: reading the child's pipe blocks, and must not block the cooperative pool.
    private static func runRound(_ child: URL, root: String, seed: UInt64, ends: Int, delay: UInt32) async throws
        -> [String]
    {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        let process = try ChildProcess(child, ["lifecycle", root, String(seed)])
                        var lines: [String] = []
                        var seen = 0
                        var ready = false
                        while !ready || seen < ends, let line = process.readLine() {
                            lines.append(line)
                            if line == "ready" { ready = true } else if ready && line.hasPrefix("end ") { seen += 1 }
                        }
                        // Not ordering anything: only moving the kill to a random point inside the next operation.
                        if delay > 0 { usleep(delay) }
                        let killed = process.kill()
                        // Lines the child wrote before it died: the operation it had begun is in them.
                        let (rest, _) = process.finish()
                        lines += rest.split(separator: "\n").map(String.init)
                        guard killed else {
                            throw SessionError(
                                .invalidInput, "the crash child exited before it was killed: \(lines.last ?? "")")
                        }
                        return lines
                    })
            }
        }
    }
}
