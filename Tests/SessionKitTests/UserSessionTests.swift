import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct UserSessionTests {
    /// The article's sequence: Alice's load has its response in hand but has not committed it yet; she signs
    /// out and Bob signs in; her commit, made after that, is refused and never reaches Bob's state. The commit is
    /// held at a gate after `data(for:)` returned, so it is the check at commit that is tested, not `data(for:)`
    /// refusing a late response.
    @Test func lateResponseNeverReachesTheNextUsersState() async throws {
        let beforeCommit = Gate()
        try await LocalServer.withRunning { server in
            server.route("GET", "/me/loans") { request in .json(#"["\#(user(of: request))'s loan"]"#) }
            let loans = SessionScoped<[String]>(empty: [])
            let aliceSession = UserSession(account: alice, tokens: tokens("alice"))
            loans.bind(to: aliceSession)
            let load = Task {
                let (data, _) = try await aliceSession.data(for: get(server, "/me/loans"))
                let decoded = try JSONDecoder().decode([String].self, from: data)
                await beforeCommit.wait()  // the response is in hand; the commit waits for the switch
                return loans.commit(decoded, from: aliceSession)
            }
            await beforeCommit.waitForArrivals(1)  // Alice's response arrived while her session was active

            aliceSession.end()
            let bobSession = UserSession(account: bob, tokens: tokens("bob"))
            loans.bind(to: bobSession)
            beforeCommit.open()

            #expect(try await load.value == false, "Alice's commit after her sign-out is refused")
            #expect(loans.value.isEmpty)
            #expect(loans.discardedCommits == 1)

            let (data, _) = try await bobSession.data(for: get(server, "/me/loans"))
            #expect(loans.commit(try JSONDecoder().decode([String].self, from: data), from: bobSession))
            #expect(loans.value == ["bob's loan"])
            bobSession.end()
        }
    }

    @Test func responseCompletedBeforeEndButCommittedAfterIsRefused() async throws {
        try await LocalServer.withRunning(handler: nameHandler) { server in
            let profile = SessionScoped<String>(empty: "")
            let session = UserSession(account: alice, tokens: tokens("alice"))
            profile.bind(to: session)
            let (early, _) = try await session.data(for: get(server, "/me/profile"))
            session.end()
            #expect(!profile.commit(text(early), from: session))
            #expect(profile.value == "")
            #expect(profile.discardedCommits == 1)
        }
    }

    @Test func reloginOfTheSameUserRefusesTheOldSessionsResponse() async throws {
        try await LocalServer.withRunning(handler: nameHandler) { server in
            let profile = SessionScoped<String>(empty: "")
            let first = UserSession(account: alice, tokens: tokens("alice"))
            profile.bind(to: first)
            let (old, _) = try await first.data(for: get(server, "/me/profile"))
            first.end()
            let second = UserSession(account: alice, tokens: tokens("alice"))
            profile.bind(to: second)
            #expect(first.account == second.account)
            #expect(first.id != second.id)
            #expect(!profile.commit(text(old), from: first), "same account, different session: refused")
            #expect(profile.commit("fresh", from: second))
            second.end()
        }
    }

    @Test func requestAfterEndIsRefusedWithATypedError() async throws {
        try await LocalServer.withRunning { server in
            let session = UserSession(account: alice, tokens: tokens("alice"))
            session.end()
            let error = await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/x")) }
            #expect(error?.code == .sessionEnded)
            let write = await #expect(throws: SessionError.self) {
                try await session.write(post(server, "/x"), policy: .discard)
            }
            #expect(write?.code == .sessionEnded)
            #expect(server.requests.isEmpty)
        }
    }

    @Test func endIsIdempotentAndForgetsEverything() async throws {
        let session = UserSession(account: alice, tokens: tokens("alice"))
        let ended = Counter()
        session.onEnd { ended.increment() }
        #expect(session.isActive)
        #expect(session.tokens?.accessToken == "token-alice")
        #expect(session.finish()?.cancelledRequests == 0)
        session.end()
        #expect(session.finish() == nil, "only the first end does anything")
        #expect(!session.isActive)
        #expect(session.tokens == nil)
        #expect(ended.value == 1)
        session.onEnd { ended.increment() }  // registered after the end: runs at once
        #expect(ended.value == 2)
    }

    @Test func everyRequestCarriesTheTokenOfTheSessionThatMadeIt() async throws {
        try await LocalServer.withRunning(handler: nameHandler) { server in
            let sessions = [
                UserSession(account: alice, tokens: tokens("alice")),
                UserSession(account: bob, tokens: tokens("bob")),
                UserSession(account: carol, tokens: tokens("carol")),
            ]
            try await withThrowingTaskGroup(of: (String, String).self) { group in
                for session in sessions {
                    for index in 0..<40 {
                        group.addTask {
                            let (data, _) = try await session.data(for: get(server, "/me/profile?i=\(index)"))
                            return (session.account.subject, text(data))
                        }
                    }
                }
                for try await (subject, body) in group {
                    #expect(body == #"{"name":"\#(subject)"}"#)
                }
            }
            #expect(server.requests.count == 120)
            for request in server.requests {
                #expect(["token-alice", "token-bob", "token-carol"].contains(request.bearerToken ?? ""))
            }
            for session in sessions { session.end() }
        }
    }

    @Test func thousandRequestsInFlightAtEndAllFailWithSessionEnded() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("/slow") { _ in
                await gate.wait()
                return .json("{}")
            }
            // No request may end on its own before `end()`: under Thread Sanitizer on a loaded machine, starting a
            // thousand took longer than the default 30-second deadline once, and the first ones timed out.
            let session = UserSession(
                account: alice, tokens: tokens("alice"), configuration: .init(requestTimeout: .seconds(3600)))
            let committed = SessionScoped<Int>(empty: 0)
            committed.bind(to: session)
            let results = Task {
                await withTaskGroup(of: SessionError.Code?.self) { group in
                    for _ in 0..<1000 {
                        group.addTask {
                            do {
                                _ = try await session.data(for: get(server, "/slow"))
                                committed.update(from: session) { $0 += 1 }
                                return nil
                            } catch {
                                return SessionError.Code.of(error)
                            }
                        }
                    }
                    var codes: [SessionError.Code?] = []
                    for await code in group { codes.append(code) }
                    return codes
                }
            }
            await eventually { session.requestsInFlight == 1000 }
            await gate.waitForArrivals(1)
            #expect(session.finish()?.cancelledRequests == 1000)
            gate.open()
            let codes = await results.value
            #expect(codes.count == 1000)
            #expect(codes.allSatisfy { $0 == .sessionEnded })
            #expect(committed.value == 0)
        }
    }

    @Test func noRequestLeavesAfterEndReturns() async throws {
        try await LocalServer.withRunning(handler: emptyJSONHandler) { server in
            for round in 0..<20 {
                let session = UserSession(account: alice, tokens: tokens("alice-\(round)"))
                let token = "token-alice-\(round)"
                let racers = Task {
                    await withTaskGroup(of: Void.self) { group in
                        for _ in 0..<200 {
                            group.addTask { _ = try? await session.data(for: get(server, "/r")) }
                        }
                    }
                }
                await eventually { session.requestsInFlight > 10 || server.requests.count > round * 200 }
                let cancelled = session.finish()?.cancelledRequests ?? 0
                let endReturned = ContinuousClock.now
                await racers.value
                // Requests that reach the server after end() returned must be ones already on the wire
                // when it was called; none may be created afterwards.
                let ours = server.requests.filter { $0.bearerToken == token }
                let late = ours.filter { $0.arrivedAt > endReturned }
                #expect(late.count <= cancelled, "round \(round): \(late.count) late, \(cancelled) in flight")
                #expect(session.requestsInFlight == 0)
            }
        }
    }

    @Test func networkFailureIsTellableFromSessionEnd() async throws {
        // A port with nothing listening: stop a server and reuse its URL.
        let server = try await LocalServer.start()
        let url = server.url("/gone")
        await server.stop()
        let session = UserSession(
            account: alice,
            tokens: tokens("alice"),
            configuration: UserSession.Configuration(retryPolicy: .never)
        )
        let error = await #expect(throws: SessionError.self) { try await session.data(for: URLRequest(url: url)) }
        #expect(error?.code == .networkUnavailable)
        session.end()
    }

    @Test func cancellingTheCallerCancelsTheRequestButNotTheSession() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("/slow") { _ in
                await gate.wait()
                return .json("{}")
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            let task = Task { try await session.data(for: get(server, "/slow")) }
            await gate.waitForArrivals(1)
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(session.isActive)
            gate.open()
            session.end()
        }
    }

    @Test func sessionsHaveTheirOwnCookies() async throws {
        try await LocalServer.withRunning { server in
            server.route("/login") { request in
                LocalServer.Response(status: 200, headers: [("Set-Cookie", "sid=\(user(of: request)); Path=/")])
            }
            server.route("/whoami") { request in .text(request.header("Cookie") ?? "none") }
            let a = UserSession(account: alice, tokens: tokens("alice"))
            let b = UserSession(account: bob, tokens: tokens("bob"))
            _ = try await a.data(for: get(server, "/login"))
            let (mine, _) = try await a.data(for: get(server, "/whoami"))
            let (theirs, _) = try await b.data(for: get(server, "/whoami"))
            #expect(text(mine) == "sid=alice")
            #expect(text(theirs) == "none")
            a.end()
            b.end()
        }
    }
}
