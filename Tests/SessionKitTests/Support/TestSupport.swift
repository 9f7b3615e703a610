import Foundation
import SessionKitTesting

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let issuer = "https://id.sessionkit.test"
let alice = Account(issuer: issuer, subject: "alice", displayName: "Alice")
let bob = Account(issuer: issuer, subject: "bob", displayName: "Bob")
let carol = Account(issuer: issuer, subject: "carol", displayName: "Carol")

/// A server whose routes answer with the user named by the bearer token `token-<user>[-<n>]`.
func user(of request: LocalServer.Request) -> String {
    guard let token = request.bearerToken, token.hasPrefix("token-") else { return "nobody" }
    return String(token.dropFirst("token-".count).prefix { $0 != "-" })
}

func tokens(_ user: String, refresh: String? = nil, lifetime: Duration? = nil, clock: any SessionClock = SystemClock())
    -> TokenSet
{
    TokenSet(
        accessToken: "token-\(user)",
        refreshToken: refresh ?? "refresh-\(user)",
        lifetime: lifetime,
        receivedAt: clock.now,
        receivedAtWall: clock.wallNow
    )
}

extension UserSession.Configuration {
    /// This configuration on the `URLSession` route, whatever the process's transport: for tests of what only that
    /// route has (its task creation lock, its `endings` queue, its delegate queue).
    var onURLSession: Self {
        var configuration = self
        configuration.transport = .urlSession
        return configuration
    }
}

func get(_ server: LocalServer, _ path: String) -> URLRequest {
    URLRequest(url: server.url(path))
}

func post(_ server: LocalServer, _ path: String, body: String = "{}") -> URLRequest {
    var request = URLRequest(url: server.url(path))
    request.httpMethod = "POST"
    request.httpBody = Data(body.utf8)
    return request
}

func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

/// Awaits `condition` by yielding, for state that changes on other threads without a signal to wait on.
///
/// Stops when the test's task is cancelled, as it is when its time limit passes (which fails the test), so a
/// condition that never comes does not spin on after the test has failed.
func eventually(_ condition: @Sendable () -> Bool) async {
    while !condition() && !Task.isCancelled { await Task.yield() }
}

/// Awaits `condition` by yielding for at most `limit` of wall-clock time, so that a condition that never comes
/// fails the test with a name instead of hanging it.
///
/// - Returns: Whether `condition` became true in time.
func eventually(within limit: Duration, _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now.advanced(by: limit)
    while !condition() {
        if ContinuousClock.now >= deadline || Task.isCancelled { return false }
        await Task.yield()
    }
    return true
}

/// Whether `operation` returns within `bound` on the wall clock; one that does not is left running. For a wait on
/// work that may never answer, where ``eventually(within:_:)`` would spin a core for the whole bound: it suspends.
func returns(within bound: Duration, _ operation: @escaping @Sendable () async -> Void) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let waiting = Locked<CheckedContinuation<Bool, Never>?>(continuation)
        let take: @Sendable () -> CheckedContinuation<Bool, Never>? = {
            waiting.withLock { waiting in
                defer { waiting = nil }
                return waiting
            }
        }
        let timer = Task {
            try? await Task.sleep(for: bound)
            take()?.resume(returning: false)
        }
        Task {
            await operation()
            // Taken before the timer is cancelled: a cancelled timer wakes at once and would take it first.
            take()?.resume(returning: true)
            timer.cancel()
        }
    }
}

/// Waits, at most a minute, until no transfer of `session` runs, on whichever transport it uses.
func transfersStop(in session: UserSession) async -> Bool {
    #if os(Linux)
        if let curl = session.curl {
            let deadline = ContinuousClock.now.advanced(by: .seconds(60))
            while await curl.running() > 0 {
                if ContinuousClock.now >= deadline || Task.isCancelled { return false }
                await Task.yield()
            }
            return true
        }
    #endif
    guard let transfers = session.madeTransferSession else { return true }
    return await eventually(within: .seconds(60)) { transfers.inFlight == 0 }
}

extension SessionError.Code {
    static func of(_ error: any Error) -> SessionError.Code? { (error as? SessionError)?.code }
}

/// A thread-safe counter for tests.
final class Counter: Sendable {
    private let storage = Lock(0)
    var value: Int { storage.withLock { $0 } }
    func increment() { storage.withLock { $0 += 1 } }
}

/// Answers `{"name":"<user>"}` for the user named by the bearer token.
let nameHandler: LocalServer.Handler = { request in .json(#"{"name":"\#(user(of: request))"}"#) }
/// Answers `{"t":"<token>"}` with the bearer token the request carried.
let tokenEchoHandler: LocalServer.Handler = { request in .json(#"{"t":"\#(request.bearerToken ?? "")"}"#) }
/// Answers `{}`.
let emptyJSONHandler: LocalServer.Handler = { _ in .json("{}") }
/// Answers 401.
let unauthorizedHandler: LocalServer.Handler = { _ in LocalServer.Response(status: 401) }

/// Per-test time limits, in whole minutes (Swift Testing's unit; a suite's limit applies to each of its tests and
/// each case of a parameterized test), so a test that hangs fails with its name instead of stalling the run.
///
/// Generous on purpose: `scripts/test` runs the suites one after another on a shared 2-core machine, then again
/// under Thread Sanitizer, which makes them about ten times slower (with fewer randomized inputs).
enum TimeLimit {
    /// A suite of tests that each take seconds.
    static let ordinary = 5
    /// A suite of tests that drive many sockets, sessions or a real server; seconds each, up to a minute under TSan.
    static let heavy = 10

    /// A limit for a test whose work is a count read from the environment: `minutes` for up to `reference` of it,
    /// and proportionally more for a larger count (`SESSIONKIT_SCHEDULES=200000` gets twenty times the limit).
    ///
    /// - Parameters:
    ///   - minutes: The limit for `reference` units of work.
    ///   - variable: The environment variable that sets the count.
    ///   - reference: The count `scripts/test` runs.
    /// - Returns: The limit in minutes.
    static func scaled(_ minutes: Int, by variable: String, reference: Int) -> Int {
        let count = ProcessInfo.processInfo.environment[variable].flatMap { Int($0) } ?? reference
        return minutes * max(1, (count + reference - 1) / reference)
    }
}

/// Runs `body`, which blocks, on a thread of its own (never one of Swift's cooperative pool) and returns what it
/// returned.
func onThreadOfItsOwn<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { (done: CheckedContinuation<Result, Never>) in
        Thread { done.resume(returning: body()) }.start()
    }
}

/// Whether this test process runs under ThreadSanitizer (`swift test --sanitize=thread`): its runtime is linked in.
/// Timing margins widen under it, and its allocator keeps freed memory aside, so a freed block's address is not
/// handed out again at once.
let runsUnderThreadSanitizer = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

/// A wait that fails with the test's own words instead of running into the suite's time limit: a regression that
/// hangs then fails in seconds, with a name.
enum Bounded {
    struct TimedOut: Error, CustomStringConvertible {
        let what: String
        var description: String { "\(what) did not happen within the bound" }
    }

    /// The first value of `stream`, or `nil` when none came within `limit`.
    static func first<T: Sendable>(of stream: AsyncStream<T>, within limit: Duration) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask {
                var iterator = stream.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// What `body` returns, or ``TimedOut`` when it has not returned within `limit` (it is then cancelled).
    static func run<T: Sendable>(
        _ what: String, within limit: Duration, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() ?? nil else { throw TimedOut(what: what) }
            return value
        }
    }
}
