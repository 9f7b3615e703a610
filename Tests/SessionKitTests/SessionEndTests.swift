import Dispatch
import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What `end()` promises (README promises 2, 3 and 4), each checked so that breaking it fails a test: requests in
/// flight are cancelled on the wire, a request created but not started never leaves, the cache is empty, and a
/// request carries this session's token whatever header it came with.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SessionEndTests {
    /// A request held by a server handler that is never released can only finish if `end()` cancels it: the
    /// handler sees its connection closed (its task is cancelled), and the caller gets `sessionEnded`. A response
    /// dropped after it arrives cannot pass for a cancellation here, because no response is ever sent.
    @Test func endCancelsARequestTheServerIsHolding() async throws {
        let never = Gate()  // never opened
        let connectionClosed = Gate()
        try await LocalServer.withRunning { server in
            server.route("/held") { _ in
                await never.wait()  // returns only when the handler is cancelled: its client closed the connection
                await connectionClosed.wait()  // cancelled already, so this returns at once and counts an arrival
                return .json("{}")
            }
            // A request timeout far beyond the wait below: only a cancellation can close the connection in time.
            let session = UserSession(
                account: alice,
                tokens: tokens("alice"),
                configuration: UserSession.Configuration(requestTimeout: .seconds(3600), retryPolicy: .never)
            )
            let load = Task { try await session.data(for: get(server, "/held")) }
            await never.waitForArrivals(1)

            #expect(session.finish()?.cancelledRequests == 1)
            let closed = await eventually(within: .seconds(60)) { connectionClosed.arrivals == 1 }
            #expect(closed, "end() returned, but the server still holds the request's connection open")
            if !closed { load.cancel() }  // so that a failure ends the test instead of hanging it
            let error = await #expect(throws: SessionError.self) { try await load.value }
            #expect(error?.code == .sessionEnded)
            #expect(!never.isOpen)
            #expect(session.requestsInFlight == 0)
        }
    }

    #if canImport(FoundationNetworking)
        /// An answer that arrives after `end()` is never handed over, even one that arrives before `end()`'s
        /// cancellation reaches its task: the queue that cancellation runs on (the session's `endings`) is held,
        /// then the server answers; the caller gets `sessionEnded`, not the answer.
        @Test func anAnswerThatArrivesAfterEndIsNeverReturned() async throws {
            let answer = Gate()
            try await LocalServer.withRunning { server in
                server.route("/held") { _ in
                    await answer.wait()
                    return .json(#"{"user":"alice"}"#)
                }
                let session = UserSession(
                    account: alice, tokens: tokens("alice"),
                    configuration: UserSession.Configuration(retryPolicy: .never).onURLSession)
                let load = Task { try await session.data(for: get(server, "/held")) }
                await answer.waitForArrivals(1)

                let endingsHeld = DispatchSemaphore(value: 0)
                defer { endingsHeld.signal() }
                try #require(session.urlSession?.endings).async { endingsHeld.wait() }
                session.end()
                answer.open()
                let error = await #expect(throws: SessionError.self) { try await load.value }
                #expect(error?.code == .sessionEnded)
                #expect(session.requestsInFlight == 0)
            }
        }
    #endif

    /// `end()` lands between a request's task creation and its start (the seam runs it there): the request must
    /// be refused with `sessionEnded` and never reach the server. Where `end()` cancels the session's tasks (its
    /// delegate queue, or on Linux the queue that ends it) is held until the server sees a request, so a task
    /// started after `end()` would reach the server before `end()`'s cancellation could stop it, and `data(for:)`
    /// could not return before it did.
    @Test func aRequestCreatedBeforeEndButNotStartedNeverLeaves() async throws {
        let delegateQueueHeld = DispatchSemaphore(value: 0)
        try await LocalServer.withRunning { server in
            server.route("/r") { _ in
                delegateQueueHeld.signal()
                return .json("{}")
            }
            var configuration = UserSession.Configuration(retryPolicy: .never)
            configuration.beforeStart = { session in
                // On libcurl there is no URLSession to hold: the transfer is never handed to the loop.
                if let endings = session.urlSession?.endings {
                    endings.async { delegateQueueHeld.wait() }
                } else {
                    session.urlSession?.delegateQueue.addOperation { delegateQueueHeld.wait() }
                }
                session.end()
            }
            let session = UserSession(account: alice, tokens: tokens("alice"), configuration: configuration)
            let error = await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/r")) }
            #expect(error?.code == .sessionEnded)
            #expect(server.requests.isEmpty, "a request started after end() returned")
            #expect(!session.isActive)
            #expect(session.requestsInFlight == 0)
            if server.requests.isEmpty { delegateQueueHeld.signal() }  // release the held delegate queue
        }
    }

    /// The same for a transfer: an upload or a download whose task was created when `end()` came, and not yet
    /// started, never starts. The transfer session's delegate queue, where `end()`'s cancellation of its tasks runs,
    /// is held meanwhile, so only the start flag that `end()` lowers can keep the task from reaching the server.
    @Test(arguments: ["upload", "download"])
    func aTransferCreatedBeforeEndButNotStartedNeverLeaves(kind: String) async throws {
        let delegateQueueHeld = DispatchSemaphore(value: 0)
        try await LocalServer.withRunning { server in
            server.route("/t") { _ in
                delegateQueueHeld.signal()
                return .json("{}")
            }
            var configuration = UserSession.Configuration(retryPolicy: .never)
            configuration.beforeStart = { session in
                let transfers = session.madeTransferSession
                transfers?.urlSession.delegateQueue.addOperation { delegateQueueHeld.wait() }
                session.end()
            }
            let session = UserSession(account: alice, tokens: tokens("alice"), configuration: configuration)
            do {
                if kind == "upload" {
                    var request = get(server, "/t")
                    request.httpMethod = "PUT"
                    _ = try await session.upload(for: request, from: Data("body".utf8))
                } else {
                    _ = try await session.download(for: get(server, "/t"))
                }
                Issue.record("a \(kind) created before end() was answered")
            } catch {
                #expect(SessionError.Code.of(error) == .sessionEnded, "\(error)")
            }
            #expect(server.requests.isEmpty, "a \(kind) started after end() returned")
            #expect(!session.isActive)
            if server.requests.isEmpty { delegateQueueHeld.signal() }  // release the held delegate queue
        }
    }

    /// A response the session cached is gone once `end()` returns: the cache holds nothing and answers nothing.
    @Test func endEmptiesTheSessionsCache() async throws {
        try await LocalServer.withRunning { server in
            server.route("/profile") { request in
                .json(#"{"name":"\#(user(of: request))"}"#, headers: [("Cache-Control", "private, max-age=3600")])
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            _ = try await session.data(for: get(server, "/profile"))
            var cachedRequest = get(server, "/profile")
            cachedRequest.setValue("Bearer token-alice", forHTTPHeaderField: "Authorization")
            guard case .fresh = session.cache.lookup(for: cachedRequest) else {
                Issue.record("the response was not cached; the test cannot check that end() empties the cache")
                session.end()
                return
            }
            #expect(session.cache.count == 1)

            session.end()
            #expect(session.cache.count == 0)
            #expect(session.cache.totalBytes == 0)
            guard case .miss = session.cache.lookup(for: cachedRequest) else {
                Issue.record("the ended session's cache still answers")
                return
            }
        }
    }

    /// A container bound to the session holds its data until `end()`, which empties it, by whatever route the
    /// session ends (the manager's sign-out rebinds its containers itself; a session ended directly must too).
    @Test func endEmptiesTheContainersBoundToTheSession() {
        let session = UserSession(account: alice, tokens: tokens("alice"))
        let profile = SessionScoped<String>(empty: "")
        profile.bind(to: session)
        #expect(profile.commit("alice's profile", from: session))
        session.end()
        #expect(profile.value == "")
        #expect(profile.session === session, "still bound: only its contents are gone")
    }

    /// Each session keeps its cookies in a storage of its own, never the process's shared one: a cookie one
    /// session holds is invisible to another. Checked on the storages themselves, because a behavioural check
    /// through requests races every other test's `end()`, which empties its session's storage (the shared one, if
    /// sessions used it).
    @Test func sessionsDoNotShareACookieStorage() throws {
        let a = UserSession(account: alice, tokens: tokens("alice"))
        let b = UserSession(account: bob, tokens: tokens("bob"))
        defer {
            a.end()
            b.end()
        }
        let storageA = try #require(a.cookies)
        let storageB = try #require(b.cookies)
        #expect(storageA !== storageB)
        #expect(storageA !== HTTPCookieStorage.shared)
        // On the URLSession route the session's URLSession keeps its cookies in that same jar, which `end()` empties.
        let routed = UserSession(
            account: carol, tokens: tokens("carol"), configuration: UserSession.Configuration().onURLSession)
        defer { routed.end() }
        #expect(try #require(routed.urlSession).configuration.httpCookieStorage === routed.cookies)
        #expect(routed.cookies != nil && routed.cookies !== storageA)
        let cookie = try #require(
            HTTPCookie(properties: [.domain: "127.0.0.1", .path: "/", .name: "sid", .value: "alice"]))
        storageA.setCookie(cookie)
        #expect(storageA.cookies?.map(\.value) == ["alice"])
        #expect(storageB.cookies?.isEmpty ?? true)
    }

    /// A request that arrives with an `Authorization` header of its own (another account's token, copied from
    /// elsewhere) reaches the server with this session's token: the header is replaced, never kept.
    @Test func aRequestCarryingAnotherTokenReachesTheServerWithThisSessionsToken() async throws {
        try await LocalServer.withRunning(handler: tokenEchoHandler) { server in
            let session = UserSession(account: alice, tokens: tokens("alice"))
            for header in ["Authorization", "authorization"] {
                var request = get(server, "/me?header=\(header)")
                request.setValue("Bearer token-mallory", forHTTPHeaderField: header)
                let (data, _) = try await session.data(for: request)
                #expect(text(data) == #"{"t":"token-alice"}"#)
            }
            #expect(server.requests.map(\.bearerToken) == ["token-alice", "token-alice"])
            #expect(server.requests.allSatisfy { $0.headers(named: "Authorization").count == 1 })
            session.end()
        }
    }
}
