// A process that SessionKit's tests start, drive through stdout, and kill with SIGKILL at random points, to
// check what a crash leaves on disk. Each mode prints `ready …` once set up, then one line per completed step,
// flushing after every line so the parent can count them through the pipe.
//
//   SessionKitCrashChild save-loop <directory>
//       Saves records of one account into a FileCredentialStore, forever. Record n is derived from n alone
//       (see `saveLoopRecord`), so a reader can tell a whole record from a mix of two. Prints `ready <n>`
//       where n is the counter of the record already there (0 for none), then `saved <n>` after each save.
//   SessionKitCrashChild lifecycle <root> <seed>
//       Signs alice and bob in through a SessionManager over a FileCredentialStore in <root>/credentials, with its
//       data directory in <root>/data, then refreshes, signs out and signs in again at random (seeded), forever.
//       Tokens come from an in-process endpoint and are numbered: generation n of a user is `rt-<user>-<n>` with
//       scope `scope-<user>-<n>`, so a reader can tell which record a file holds and whether it is whole, and no
//       token ever crosses the pipe. Prints `begin <op> <user> <n>` before and `end <op> <user> <n>` after each
//       operation (op: sign-in, refresh, sign-out; n: the generation it writes, or holds for a sign-out), and
//       `ready` once both are signed in.
//   SessionKitCrashChild sign-out <root> <with-data|without-data> <revocation-µs>
//       Signs alice in through a SessionManager over a FileCredentialStore in <root>/credentials (with its data
//       directory in <root>/data for `with-data`, none for `without-data`), writes files in her directory and a marker
//       that a registered purge step deletes, prints `ready`, then signs her out with revocation through a revoker
//       that answers after <revocation-µs> microseconds (0: never, so revocation hangs until the server timeout).
//       Prints `begin sign-out` once `current` is no longer alice (the intent is durable from that instant on) and
//       `end sign-out` when sign-out returns, then waits to be killed.
//   SessionKitCrashChild refresh-burst <credentials-directory> <token-endpoint> <client-id> <resource-url> <requests>
//       Restores through a SessionManager over a FileCredentialStore as it opens by default (coordinating processes) in
//       <credentials-directory>, refreshing through an OAuthClient of <token-endpoint> and <client-id>, prints
//       `ready`, waits for a line `go` on stdin (the parent's barrier), then sends <requests> concurrent GETs of
//       <resource-url> and prints `done <succeeded> <failed>` (and `failed <code>` once per failure before it),
//       then exits. No token crosses the pipe.
//   SessionKitCrashChild cross-process <signer|follower> <credentials-directory> <resource-url> <loops>
//       Restores through a SessionManager over a FileCredentialStore in <credentials-directory> as it opens by
//       default (shared between processes), prints `ready`, waits for `go` on stdin, then runs <loops> request loops,
//       each sending GETs of <resource-url> one after another with the headers `X-Process: <pid>` and
//       `X-Asked-At: <ns>` (CLOCK_MONOTONIC, which every process on the machine shares, taken when the app asks)
//       until the session refuses them. A follower prints `learned <ns>` the instant its session ends. A signer waits
//       for a line on stdin, prints `signing-out <ns>`, ends the current account there (no revocation) as the line
//       says: `sign-out` signs it out, `switch` switches to another stored account signing the others out, `reject`
//       refreshes with a refresh token the endpoint rejects; then prints `signed-out <ns>`. Both print
//       `done <requests>` once every loop has stopped, and exit.
//   SessionKitCrashChild locked-launch <credentials-directory> <accounts>
//       Restores through a SessionManager over a FileCredentialStore in <credentials-directory> (retrying a store it
//       cannot read every 5 ms), prints `restored <state>` when restore returns, then waits up to 10 s for every one of
//       <accounts> accounts to have a live session and the state to be active, prints `final <state> <sessions>`, and
//       exits. The parent makes records unreadable (mode 000, this process without CAP_DAC_OVERRIDE) and readable
//       again at an instant it picks.
//   SessionKitCrashChild unreadable-store <credentials-directory> <issuer> <subject>
//       Opens a FileCredentialStore in <credentials-directory> and a SessionManager over it (retrying a store it
//       cannot read every 5 ms), prints `ready`, and waits for `go` on stdin: the parent has made the directory
//       unreadable by then (mode 000, this process without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH). Prints
//       `load <outcome>` for the account <issuer> <subject>, `accounts <outcome>` (each `record`/`<count>`, `none`,
//       or the error's code), `restored <state>` when restore returns, and `sessions <count>`; then waits for
//       `readable` on stdin, waits up to 10 s for the retried restore to make one session live and the state active,
//       prints `final <state> <sessions>` and exits.
//   SessionKitCrashChild proofs-then-exit <proofs>
//       Makes a DPoP key and <proofs> proofs with it, one after another (each proof that leaves the key's nonce pool at
//       half asks the background thread to fill it again), prints `made <proofs>` and exits with status 0 at once,
//       so the exit often lands while a nonce is being prepared.
//   SessionKitCrashChild fork-signatures
//       Makes an ES256 key, fills its nonce pool, forks, and signs seven messages in the parent and seven in the
//       child (fewer than would ask for a refill), each printing `r <pid> <hex of r>`; the parent waits for the
//       child and prints `done`. A nonce used on both sides of the fork shows as one r printed by two pids.
//   SessionKitCrashChild secret-service-check <service>
//       Prints `available`, or `unavailable <code>: <message>` when the Secret Service cannot be used.
//   SessionKitCrashChild exit-after <scenario> <credentials-directory> <token-endpoint> <client-id> <resource-url>
//       Restores through a SessionManager over a FileCredentialStore in <credentials-directory> whose deletions
//       take 300 ms (a slow disk, a busy keychain: long enough that an exit not waiting for one beats it), refreshing
//       through an OAuthClient of <token-endpoint> and <client-id>, then plays <scenario> and exits with status 0 at
//       once, the way a command-line tool ends:
//         restore-rejected  prints `state <state>` after restore (whose refresh the provider rejects);
//         restore-rejected-unlocked  the same over a store with no cross-process lock (the refresher then
//                           leaves the rejected record's deletion to the vault's queue, which restore waits for);
//         request-rejected  GETs <resource-url> (answered 401; the refresh is rejected), then prints `left <work>`
//                           from finishPendingWork(within: 5 s);
//         sign-out-slow     signs the current account out without waiting for the server, through a revoker that
//                           answers after 200 ms and prints `revoked` then, then prints `left <work>` from
//                           finishPendingWork(within: 2 s);
//         sign-out-hung     the same with a revoker that never answers and finishPendingWork(within: 500 ms).
//       No token crosses the pipe.
//   SessionKitCrashChild vault-fleet <token-endpoint> <client-id> <resource-url> <requests-per-account> <window> <seed>
//       One instance of a server fleet (issue 51): connects to the PostgresCredentialStore whose connection string is
//       in the environment variable SESSIONKIT_VAULT_DATABASE (never on the command line: it holds a password), makes
//       a SessionManager over it refreshing through an OAuthClient of <token-endpoint> and <client-id>, lists the
//       stored accounts and shuffles them with <seed>, prints `ready <accounts>`, waits for `go` on stdin, then goes
//       through the accounts <window> at a time: loads each one's session (`session(for:)`), sends
//       <requests-per-account> concurrent GETs of <resource-url> with it, and ends it here (not a sign-out: the
//       record stays). Prints `failed <code> <count>` for each kind of failure, then `done <succeeded> <failed>`, and
//       exits. No token crosses the pipe.
//   SessionKitCrashChild vault-follower <resource-url> <token-endpoint> <client-id>
//       Another instance: connects as vault-fleet does, loads every stored account's session (refreshing, when it
//       must, through <token-endpoint> as <client-id>), prints `learned <subject> <ns>` (CLOCK_MONOTONIC) the instant
//       one ends, and `ready <sessions>` once all are loaded. Then reads stdin: `watch <subject>` starts a loop of
//       GETs of <resource-url> with that account's session, one after another with the headers `X-Process: <pid>`
//       and `X-Asked-At: <ns>` (taken when the app asks), until the session refuses with sessionEnded (a refused
//       request is tried again after 500 ms), and prints `watching <subject>` once its first request was answered;
//       `quit` prints `done` and exits.
import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The account every save-loop record belongs to.
let saveLoopAccount = Account(issuer: "https://crash.sessionkit.invalid", subject: "crash-child")

/// Record `n` of the save loop: sizes vary with `n`, so a truncated or mixed record cannot pass for a whole one.
func saveLoopRecord(_ n: Int) -> CredentialRecord {
    let filler = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(n % 26)))
    return CredentialRecord(
        account: saveLoopAccount,
        refreshToken: "refresh-\(n)-" + String(repeating: filler, count: (n * 7919) % 3000),
        accessToken: "access-\(n)",
        accessTokenExpiresAt: Date(timeIntervalSince1970: Double(n)),
        scope: "scope-\(n)",
        savedAt: Date(timeIntervalSince1970: Double(n) + 0.5)
    )
}

/// Writes one line straight to file descriptor 1: unbuffered, so the parent sees each line as it happens.
func emit(_ line: String) {
    var bytes = Array("\(line)\n".utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { exit(2) }
        offset += written
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("SessionKitCrashChild: \(message)\n".utf8))
    exit(1)
}

func saveLoop(directory: String) async {
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        var n = 0
        if let existing = try await store.load(for: saveLoopAccount) {
            guard let access = existing.accessToken, let counter = Int(access.dropFirst("access-".count)) else {
                fail("the existing record has no counter")
            }
            n = counter
        }
        emit("ready \(n)")
        while true {
            n += 1
            try await store.save(saveLoopRecord(n))
            emit("saved \(n)")
        }
    } catch {
        fail("\(error)")
    }
}

func secretServiceCheck(service: String) async {
    #if os(Linux)
        do {
            try await SecretServiceCredentialStore(service: service).checkAvailability()
            emit("available")
        } catch let error as SessionError {
            emit("unavailable \(error.code): \(error.message)")
        } catch {
            fail("\(error)")
        }
    #else
        emit("unavailable storeUnavailable: the Secret Service store exists on Linux only")
    #endif
}

/// The numbered tokens of generation `n` of `user`.
func lifecycleTokens(_ user: String, _ n: Int) -> TokenSet {
    TokenSet(
        accessToken: "at-\(user)-\(n)", refreshToken: "rt-\(user)-\(n)", scope: "scope-\(user)-\(n)",
        lifetime: .seconds(3600))
}

/// Answers a refresh with the next generation of the presenting user's tokens.
struct CountingTokenEndpoint: TokenEndpoint {
    func refresh(using refreshToken: String) async throws -> TokenSet {
        let parts = refreshToken.split(separator: "-")
        guard parts.count == 3, parts[0] == "rt", let n = Int(parts[2]) else {
            throw SessionError(.refreshRejected, "unknown refresh token", statusCode: 400, oauthError: "invalid_grant")
        }
        return lifecycleTokens(String(parts[1]), n + 1)
    }
}

/// Registers a purge step that deletes the account's marker file in `<root>/markers`, which the child writes at
/// sign-in: a test reads the marker to know whether a registered resource was purged.
///
/// - Returns: The markers' folder.
func registerMarkerPurge(with manager: SessionManager, root: URL) throws -> URL {
    let markers = root.appendingPathComponent("markers")
    try FileManager.default.createDirectory(at: markers, withIntermediateDirectories: true)
    manager.register(
        PurgeStep("marker") { account in
            let marker = markers.appendingPathComponent(account.storageKey)
            if FileManager.default.fileExists(atPath: marker.path) {
                try FileManager.default.removeItem(at: marker)
            }
        })
    return markers
}

func lifecycle(root: String, seed: UInt64) async {
    let rootURL = URL(fileURLWithPath: root)
    do {
        let store = try FileCredentialStore(directory: rootURL.appendingPathComponent("credentials"))
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: CountingTokenEndpoint(),
                // Refreshing in a tight loop is the point here, not a loop to stop.
                refreshPolicy: RefreshPolicy(maximumRefreshes: .max),
                dataDirectory: rootURL.appendingPathComponent("data")))
        let markers = try registerMarkerPurge(with: manager, root: rootURL)
        var generation = ["alice": 0, "bob": 0]
        var sessions: [String: UserSession] = [:]
        var state = seed
        func random(_ bound: UInt64) -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return (mixed ^ (mixed >> 31)) % bound
        }
        func signIn(_ user: String) async throws {
            let n = generation[user, default: 0] + 1
            emit("begin sign-in \(user) \(n)")
            let account = Account(issuer: "https://crash.sessionkit.invalid", subject: user)
            sessions[user] = try await manager.signIn(account, tokens: lifecycleTokens(user, n), makeCurrent: true)
            generation[user] = n
            if let directory = manager.directory(for: account) {
                for name in ["notes.txt", "cache.db", "outbox.json"] {
                    try Data("\(user)'s \(name)".utf8).write(to: directory.appendingPathComponent(name))
                }
            }
            try Data(user.utf8).write(to: markers.appendingPathComponent(account.storageKey))
            emit("end sign-in \(user) \(n)")
        }
        try await signIn("alice")
        try await signIn("bob")
        emit("ready")
        while true {
            let user = random(2) == 0 ? "alice" : "bob"
            guard let session = sessions[user] else {
                try await signIn(user)
                continue
            }
            let n = generation[user, default: 0]
            if random(3) == 0 {
                emit("begin sign-out \(user) \(n)")
                await manager.signOut(session, options: .localOnly)
                sessions[user] = nil
                emit("end sign-out \(user) \(n)")
            } else {
                emit("begin refresh \(user) \(n + 1)")
                try await session.refreshTokens()
                generation[user] = n + 1
                emit("end refresh \(user) \(n + 1)")
            }
        }
    } catch {
        fail("\(error)")
    }
}

/// A revoker that answers after a fixed delay, or never.
struct DelayedRevoker: TokenRevoker {
    let microseconds: UInt64

    func revoke(_ token: String, hint: TokenTypeHint) async throws {
        if microseconds == 0 {
            try await Task.sleep(for: .seconds(3600))
        } else {
            try await Task.sleep(for: .microseconds(microseconds))
        }
    }
}

func signOut(root: String, withData: Bool, revocationDelay: UInt64) async {
    let rootURL = URL(fileURLWithPath: root)
    do {
        let store = try FileCredentialStore(directory: rootURL.appendingPathComponent("credentials"))
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: CountingTokenEndpoint(),
                revoker: DelayedRevoker(microseconds: revocationDelay),
                dataDirectory: withData ? rootURL.appendingPathComponent("data") : nil))
        let markers = try registerMarkerPurge(with: manager, root: rootURL)
        let account = Account(issuer: "https://crash.sessionkit.invalid", subject: "alice")
        try await manager.signIn(account, tokens: lifecycleTokens("alice", 1))
        if let directory = manager.directory(for: account) {
            for name in ["notes.txt", "cache.db"] {
                try Data("alice's \(name)".utf8).write(to: directory.appendingPathComponent(name))
            }
        }
        try manager.outbox(for: account).enqueue(URLRequest(url: URL(string: "https://api.invalid/comments")!))
        try Data("alice".utf8).write(to: markers.appendingPathComponent(account.storageKey))
        emit("ready")
        var options = SignOutOptions()
        options.serverTimeout = .seconds(2)
        let signingOut = Task { await manager.signOut(options: options) }
        while manager.current != nil { await Task.yield() }
        emit("begin sign-out")
        _ = await signingOut.value
        emit("end sign-out")
        while true { try await Task.sleep(for: .seconds(3600)) }
    } catch {
        fail("\(error)")
    }
}

func refreshBurst(directory: String, tokenEndpoint: URL, clientID: String, resource: URL, requests: Int) async {
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        let client = OAuthClient(configuration: .init(tokenEndpoint: tokenEndpoint, clientID: clientID))
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client))
        await manager.restore()
        guard let session = manager.current else { fail("nothing to restore in \(directory)") }
        emit("ready")
        guard readLine() == "go" else { fail("the parent did not say go") }
        let codes = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<requests {
                group.addTask {
                    do {
                        let (_, response) = try await session.data(for: URLRequest(url: resource))
                        return response.statusCode == 200 ? nil : "status-\(response.statusCode)"
                    } catch let error as SessionError {
                        return "\(error.code)"
                    } catch {
                        return "\(type(of: error))"
                    }
                }
            }
            var codes: [String] = []
            for await code in group { if let code { codes.append(code) } }
            return codes
        }
        for code in codes { emit("failed \(code)") }
        emit("done \(requests - codes.count) \(codes.count)")
    } catch {
        fail("\(error)")
    }
}

func exitAfter(scenario: String, directory: String, tokenEndpoint: URL, clientID: String, resource: URL) async {
    do {
        let store = SlowDeletingStore(
            inner: try FileCredentialStore(directory: URL(fileURLWithPath: directory)),
            sharedWithOtherProcesses: scenario != "restore-rejected-unlocked")
        let client = OAuthClient(configuration: .init(tokenEndpoint: tokenEndpoint, clientID: clientID))
        let revoker: (any TokenRevoker)? =
            switch scenario {
            case "sign-out-slow": AnnouncingRevoker(delay: .milliseconds(200))
            case "sign-out-hung": AnnouncingRevoker(delay: nil)
            default: nil
            }
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client, revoker: revoker))
        let state = await manager.restore()
        switch scenario {
        case "restore-rejected", "restore-rejected-unlocked":
            emit("state \(state)")
        case "request-rejected":
            guard let session = manager.current else { fail("nothing to restore in \(directory)") }
            _ = try? await session.data(for: URLRequest(url: resource))
            emit("left \(await manager.finishPendingWork(within: .seconds(5)))")
        case "sign-out-slow", "sign-out-hung":
            var options = SignOutOptions()
            options.waitForServer = false
            options.serverTimeout = .seconds(10)
            await manager.signOut(options: options)
            let within: Duration = scenario == "sign-out-slow" ? .seconds(2) : .milliseconds(500)
            emit("left \(await manager.finishPendingWork(within: within))")
        default:
            fail("unknown scenario \(scenario)")
        }
        exit(0)
    } catch {
        fail("\(error)")
    }
}

/// A store whose deletions take 300 ms, so that a process exiting without waiting for one loses it every time.
struct SlowDeletingStore: CredentialStore {
    let inner: FileCredentialStore
    /// Whether it offers the file store's cross-process lock: without it, no refresh deletes a rejected record
    /// itself.
    let sharedWithOtherProcesses: Bool

    func save(_ record: CredentialRecord) async throws { try await inner.save(record) }
    func load(for account: Account) async throws -> CredentialRecord? { try await inner.load(for: account) }
    func delete(for account: Account) async throws {
        try await Task.sleep(for: .milliseconds(300))
        try await inner.delete(for: account)
    }
    func deleteAll() async throws { try await inner.deleteAll() }
    func accounts() async throws -> [Account] { try await inner.accounts() }
    var refreshLock: CrossProcessLock? { sharedWithOtherProcesses ? inner.refreshLock : nil }
}

/// A revoker that answers after `delay` (never, for `nil`) and prints `revoked` when it has.
struct AnnouncingRevoker: TokenRevoker {
    let delay: Duration?

    func revoke(_ token: String, hint: TokenTypeHint) async throws {
        try await Task.sleep(for: delay ?? .seconds(3600))
        emit("revoked")
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so a test can order what each saw.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

func crossProcess(signer: Bool, directory: String, resource: URL, loops: Int) async {
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: CountingTokenEndpoint()))
        await manager.restore()
        guard let session = manager.current else { fail("nothing to restore in \(directory)") }
        // The end handlers run just after the session stops admitting requests, possibly after a loop saw that:
        // `done` waits for `learned`, so the parent reads them in that order.
        let learned = DispatchSemaphore(value: 0)
        if !signer {
            session.onEnd {
                emit("learned \(monotonicNanoseconds())")
                learned.signal()
            }
        }
        emit("ready")
        guard readLine() == "go" else { fail("the parent did not say go") }
        let pid = getpid()
        let sent = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<loops {
                group.addTask {
                    var count = 0
                    while true {
                        var request = URLRequest(url: resource)
                        request.setValue("\(pid)", forHTTPHeaderField: "X-Process")
                        request.setValue("\(monotonicNanoseconds())", forHTTPHeaderField: "X-Asked-At")
                        do {
                            _ = try await session.data(for: request)
                            count += 1
                        } catch let error as SessionError where error.code == .sessionEnded {
                            return count
                        } catch {
                            if !session.isActive { return count }
                        }
                    }
                }
            }
            if signer {
                let action = readLine()
                emit("signing-out \(monotonicNanoseconds())")
                switch action {
                case "sign-out":
                    await manager.signOut(session)
                case "switch":
                    // Another account of the store becomes current and every other is signed out.
                    guard let other = manager.sessions.first(where: { $0.account != session.account }) else {
                        fail("no other account to switch to")
                    }
                    do {
                        _ = try await manager.switchTo(other, endingOthers: true)
                    } catch {
                        fail("the switch failed: \(error)")
                    }
                case "reject":
                    // The seed's refresh token is one the endpoint rejects: the grant is dead.
                    try? await session.refreshTokens()
                default:
                    fail("the parent said \(action ?? "nothing"), not sign-out, switch or reject")
                }
                emit("signed-out \(monotonicNanoseconds())")
            }
            var total = 0
            for await count in group { total += count }
            return total
        }
        if !signer, learned.wait(timeout: .now() + 5) == .timedOut { fail("the session ended without its end handler") }
        emit("done \(sent)")
        exit(0)
    } catch {
        fail("\(error)")
    }
}

/// `back-channel`: restores every account of the store and prints `ended <subject> <issuer> <monotonic ns>` when a
/// session ends (another process ended its account); on `quit`, prints `live <subject>@<issuer>,…` and exits.
func backChannel(directory: String) async {
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: CountingTokenEndpoint()))
        await manager.restore()
        for session in manager.sessions {
            let account = session.account
            session.onEnd { emit("ended \(account.subject) \(account.issuer) \(monotonicNanoseconds())") }
        }
        emit("ready \(manager.sessions.count)")
        guard readLine() == "quit" else { fail("the parent did not say quit") }
        let live = manager.sessions.filter(\.isActive).map { "\($0.account.subject)@\($0.account.issuer)" }
        emit("live " + live.sorted().joined(separator: ","))
        exit(0)
    } catch {
        fail("\(error)")
    }
}

func lockedLaunch(directory: String, accounts: Int) async {
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: CountingTokenEndpoint(), storeRetryInterval: .milliseconds(5)))
        emit("restored \(await manager.restore())")
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        // Every account live, and restore settled: a retried restore installs the sessions a moment before it
        // leaves `restoring`.
        func settled() -> Bool {
            guard manager.sessions.count >= accounts, case .active = manager.state else { return false }
            return true
        }
        while !settled(), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        emit("final \(manager.state) \(manager.sessions.count)")
        exit(0)
    } catch {
        fail("\(error)")
    }
}

/// `unreadable-store`: reads and restores from a directory the parent made unreadable after the store opened.
func unreadableStore(directory: String, account: Account) async {
    func outcome<T>(_ read: () async throws -> T, _ describe: (T) -> String) async -> String {
        do {
            return describe(try await read())
        } catch let error as SessionError {
            return "\(error.code)"
        } catch {
            return "\(type(of: error))"
        }
    }
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: CountingTokenEndpoint(), storeRetryInterval: .milliseconds(5)))
        emit("ready")
        guard readLine() == "go" else { fail("the parent did not say go") }
        emit("load " + (await outcome({ try await store.load(for: account) }) { $0 == nil ? "none" : "record" }))
        emit("accounts " + (await outcome({ try await store.accounts() }) { "\($0.count)" }))
        emit("restored \(await manager.restore())")
        emit("sessions \(manager.sessions.count)")
        guard readLine() == "readable" else { fail("the parent did not say readable") }
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        func settled() -> Bool {
            guard manager.sessions.count == 1, case .active = manager.state else { return false }
            return true
        }
        while !settled(), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(2))
        }
        emit("final \(manager.state) \(manager.sessions.count)")
        exit(0)
    } catch {
        fail("\(error)")
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch (arguments.first, arguments.count) {
case ("save-loop", 2):
    await saveLoop(directory: arguments[1])
case ("lifecycle", 3):
    guard let seed = UInt64(arguments[2]) else { fail("the seed must be an unsigned integer") }
    await lifecycle(root: arguments[1], seed: seed)
case ("sign-out", 4):
    guard let delay = UInt64(arguments[3]), ["with-data", "without-data"].contains(arguments[2]) else {
        fail("usage: SessionKitCrashChild sign-out <root> <with-data|without-data> <revocation-µs>")
    }
    await signOut(root: arguments[1], withData: arguments[2] == "with-data", revocationDelay: delay)
case ("refresh-burst", 6):
    guard let tokenEndpoint = URL(string: arguments[2]), let resource = URL(string: arguments[4]),
        let requests = Int(arguments[5]), requests > 0
    else {
        fail("usage: SessionKitCrashChild refresh-burst <directory> <token-endpoint> <client-id> <resource> <requests>")
    }
    await refreshBurst(
        directory: arguments[1], tokenEndpoint: tokenEndpoint, clientID: arguments[3], resource: resource,
        requests: requests)
case ("exit-after", 6):
    guard let tokenEndpoint = URL(string: arguments[3]), let resource = URL(string: arguments[5]) else {
        fail("usage: exit-after <scenario> <credentials-directory> <token-endpoint> <client-id> <resource-url>")
    }
    await exitAfter(
        scenario: arguments[1], directory: arguments[2], tokenEndpoint: tokenEndpoint, clientID: arguments[4],
        resource: resource)
case ("cross-process", 5):
    guard ["signer", "follower"].contains(arguments[1]), let resource = URL(string: arguments[3]),
        let loops = Int(arguments[4]), loops > 0
    else { fail("usage: cross-process <signer|follower> <credentials-directory> <resource-url> <loops>") }
    await crossProcess(signer: arguments[1] == "signer", directory: arguments[2], resource: resource, loops: loops)
case ("back-channel", 2):
    await backChannel(directory: arguments[1])
case ("locked-launch", 3):
    guard let accounts = Int(arguments[2]) else { fail("usage: locked-launch <credentials-directory> <accounts>") }
    await lockedLaunch(directory: arguments[1], accounts: accounts)
case ("unreadable-store", 4):
    await unreadableStore(directory: arguments[1], account: Account(issuer: arguments[2], subject: arguments[3]))
case ("proofs-then-exit", 2):
    guard let proofs = Int(arguments[1]), proofs > 0 else { fail("usage: proofs-then-exit <proofs>") }
    do {
        let key = try DPoPKey.generate()
        let url = URL(string: "https://api.example/items")!
        for _ in 0..<proofs {
            _ = try DPoPProof.make(key: key, method: "GET", url: url, accessToken: "at", nonce: nil, now: Date())
        }
        emit("made \(proofs)")
        exit(0)
    } catch {
        fail("\(error)")
    }
#if !canImport(CryptoKit)
    case ("fork-signatures", 1):
        do {
            let key = try P256SigningKey()
            key.prepareNonces()
            let child = fork()
            guard child >= 0 else { fail("fork failed") }
            let pid = getpid()
            for index in 0..<7 {
                let signature = try key.sign(Array("message \(pid) \(index)".utf8))
                emit("r \(pid) " + signature.prefix(32).map { String(format: "%02x", $0) }.joined())
            }
            if child == 0 { _exit(0) }
            var status: Int32 = 0
            _ = waitpid(child, &status, 0)
            emit("done")
            exit(0)
        } catch {
            fail("\(error)")
        }
#endif
case ("vault-fleet", 7):
    guard let tokenEndpoint = URL(string: arguments[1]), let resource = URL(string: arguments[3]),
        let requests = Int(arguments[4]), requests > 0, let window = Int(arguments[5]), window > 0,
        let seed = UInt64(arguments[6])
    else {
        fail("usage: vault-fleet <token-endpoint> <client-id> <resource-url> <requests-per-account> <window> <seed>")
    }
    await vaultFleet(
        tokenEndpoint: tokenEndpoint, clientID: arguments[2], resource: resource, requests: requests, window: window,
        seed: seed)
case ("vault-follower", 4):
    guard let resource = URL(string: arguments[1]), let tokenEndpoint = URL(string: arguments[2]) else {
        fail("usage: vault-follower <resource-url> <token-endpoint> <client-id>")
    }
    await vaultFollower(resource: resource, tokenEndpoint: tokenEndpoint, clientID: arguments[3])
case ("secret-service-check", 2):
    await secretServiceCheck(service: arguments[1])
default:
    fail(
        "usage: SessionKitCrashChild save-loop <directory> | lifecycle <root> <seed> | "
            + "sign-out <root> <with-data|without-data> <revocation-µs> | "
            + "refresh-burst <directory> <token-endpoint> <client-id> <resource> <requests> | "
            + "cross-process <signer|follower> <credentials-directory> <resource-url> <loops> | "
            + "locked-launch <credentials-directory> <accounts> | back-channel <credentials-directory> | "
            + "unreadable-store <credentials-directory> <issuer> <subject> | proofs-then-exit <proofs> | fork-signatures | "
            + "secret-service-check <service> | "
            + "vault-fleet <token-endpoint> <client-id> <resource-url> <requests-per-account> <window> <seed> | "
            + "vault-follower <resource-url> <token-endpoint> <client-id>")
}
