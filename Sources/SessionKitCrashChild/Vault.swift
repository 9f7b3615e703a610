import Foundation
import SessionKit
import SessionKitPostgres

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The modes that play one instance of a server fleet on a PostgresCredentialStore (issue 51): `vault-fleet` and
// `vault-follower`, documented in main.swift's header.

/// The store named by `SESSIONKIT_VAULT_DATABASE`: a connection string holds a password, so it comes through the
/// environment, never the command line, and is never printed.
func vaultStore() async -> PostgresCredentialStore {
    guard let database = ProcessInfo.processInfo.environment["SESSIONKIT_VAULT_DATABASE"] else {
        fail("SESSIONKIT_VAULT_DATABASE is not set")
    }
    do {
        // Three connections for records and three for locks (and one listener): four processes stay well inside a
        // test cluster's connection limit.
        return try await PostgresCredentialStore.connect(to: database, poolSize: 3)
    } catch {
        // PostgresStoreError never spells the connection string.
        fail("\(error)")
    }
}

/// SplitMix64, so a shuffle is the same for the same seed.
struct VaultShuffle: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// What one GET came to: `nil` for a 200, else the status or the error's code.
func vaultOutcome(of session: UserSession, _ request: URLRequest) async -> String? {
    do {
        let (_, response) = try await session.data(for: request)
        return response.statusCode == 200 ? nil : "status-\(response.statusCode)"
    } catch let error as SessionError {
        return "\(error.code)"
    } catch {
        return "\(type(of: error))"
    }
}

/// `vault-fleet`: every stored account in turn, `window` at a time, `requests` concurrent GETs each.
func vaultFleet(
    tokenEndpoint: URL, clientID: String, resource: URL, requests: Int, window: Int, seed: UInt64
) async {
    let store = await vaultStore()
    let client = OAuthClient(configuration: .init(tokenEndpoint: tokenEndpoint, clientID: clientID))
    let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client))
    let accounts: [Account]
    do {
        var generator = VaultShuffle(state: seed)
        accounts = try await store.accounts().sorted { $0.storageKey < $1.storageKey }.shuffled(using: &generator)
    } catch {
        fail("cannot list the accounts: \(error)")
    }
    emit("ready \(accounts.count)")
    guard readLine() == "go" else { fail("the parent did not say go") }
    // The codes of the failed requests, each account's in one array.
    let failures = await withTaskGroup(of: [String].self) { group in
        var next = accounts.startIndex
        var failures: [String] = []
        func visit(_ account: Account) {
            group.addTask {
                let session: UserSession
                do {
                    guard let loaded = try await manager.session(for: account) else {
                        return Array(repeating: "noSession", count: requests)
                    }
                    session = loaded
                } catch let error as SessionError {
                    return Array(repeating: "\(error.code)", count: requests)
                } catch {
                    return Array(repeating: "\(type(of: error))", count: requests)
                }
                let codes = await withTaskGroup(of: String?.self) { requestGroup in
                    for _ in 0..<requests {
                        requestGroup.addTask { await vaultOutcome(of: session, URLRequest(url: resource)) }
                    }
                    var codes: [String] = []
                    for await code in requestGroup { if let code { codes.append(code) } }
                    return codes
                }
                // Ended here only (the record stays): a process visiting every account keeps few sessions open.
                session.end()
                return codes
            }
        }
        while next < accounts.endIndex && next - accounts.startIndex < window {
            visit(accounts[next])
            next += 1
        }
        for await codes in group {
            failures += codes
            if next < accounts.endIndex {
                visit(accounts[next])
                next += 1
            }
        }
        return failures
    }
    _ = await manager.finishPendingWork(within: .seconds(5))
    store.close()
    var counted: [String: Int] = [:]
    for code in failures { counted[code, default: 0] += 1 }
    for (code, count) in counted.sorted(by: { $0.key < $1.key }) { emit("failed \(code) \(count)") }
    let total = accounts.count * requests
    emit("done \(total - failures.count) \(failures.count)")
    exitAtOnce()
}

/// The lines of stdin, read on a thread of its own so no cooperative thread blocks in `read`.
func standardInputLines() -> AsyncStream<String> {
    let (stream, continuation) = AsyncStream.makeStream(of: String.self)
    let reader = Thread {
        while let line = readLine() { continuation.yield(line) }
        continuation.finish()
    }
    reader.start()
    return stream
}

/// `vault-follower`: every stored account's session, request loops on demand, and a line the instant each ends.
func vaultFollower(resource: URL, tokenEndpoint: URL, clientID: String) async {
    let store = await vaultStore()
    let client = OAuthClient(configuration: .init(tokenEndpoint: tokenEndpoint, clientID: clientID))
    let manager = SessionManager(
        configuration: .init(store: store, tokenEndpoint: client, storeRetryInterval: .milliseconds(50)))
    var sessions: [String: UserSession] = [:]
    do {
        for account in try await store.accounts() {
            guard let session = try await manager.session(for: account) else { continue }
            let subject = account.subject
            session.onEnd { emit("learned \(subject) \(monotonicNanoseconds())") }
            sessions[subject] = session
        }
    } catch {
        fail("cannot load the sessions: \(error)")
    }
    emit("ready \(sessions.count)")
    let pid = getpid()
    for await line in standardInputLines() {
        if line == "quit" {
            _ = await manager.finishPendingWork(within: .seconds(5))
            emit("done")
            exitAtOnce()
        }
        guard line.hasPrefix("watch "), let session = sessions[String(line.dropFirst("watch ".count))] else {
            fail("the parent said \(line), not watch <subject> or quit")
        }
        let subject = session.account.subject
        Task {
            var answered = false
            while true {
                var request = URLRequest(url: resource)
                request.setValue("\(pid)", forHTTPHeaderField: "X-Process")
                request.setValue("\(monotonicNanoseconds())", forHTTPHeaderField: "X-Asked-At")
                let outcome: String?
                do {
                    let (_, response) = try await session.data(for: request)
                    outcome = response.statusCode == 200 ? nil : "status-\(response.statusCode)"
                } catch let error as SessionError where error.code == .sessionEnded {
                    return
                } catch {
                    outcome = "\(error)"
                }
                if !answered {
                    answered = true
                    emit("watching \(subject)")
                }
                // A refused request (a database away, a refresh that cannot take the lock) is tried again at once,
                // as a busy server's requests are: a refresh that never reached the provider does not count toward
                // the loop guard, so the accounts are served again as soon as the database is back.
                if outcome != nil { try? await Task.sleep(for: .milliseconds(20)) }
            }
        }
    }
    fail("stdin closed before quit")
}

/// Ends the process without running `exit`'s handlers: OpenSSL's (libpq's TLS and SCRAM) tear its state down there
/// while a pool thread may still be opening a connection (a rejected grant's notice, a store read of an ended session),
/// which now and then crashed a survivor of the kill test. Every line was written unbuffered already.
func exitAtOnce() -> Never {
    _exit(0)
}
