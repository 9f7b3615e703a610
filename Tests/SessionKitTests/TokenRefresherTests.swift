import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A resource server that accepts exactly one access token at a time, as a server that rotates does.
final class RotatingResource: Sendable {
    let valid = Lock<String>("token-alice")

    func install(on server: LocalServer) {
        server.route("/me") { request in
            guard request.bearerToken == self.valid.withLock({ $0 }) else {
                return LocalServer.Response(
                    status: 401,
                    headers: [("WWW-Authenticate", #"Bearer error="invalid_token""#)]
                )
            }
            return .json(#"{"token":"\#(request.bearerToken ?? "")"}"#)
        }
    }
}

@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct TokenRefresherTests {
    func makeEndpoint(_ resource: RotatingResource, gate: Gate? = nil) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint(gate: gate) { refreshToken, n in
            let access = "token-alice-\(n)"
            resource.valid.withLock { $0 = access }
            return TokenSet(accessToken: access, refreshToken: "refresh-\(n)", lifetime: .seconds(3600))
        }
    }

    @Test(arguments: [2, 8, 64])
    func concurrentUnauthorizedResponsesMakeOneRefresh(k: Int) async throws {
        let resource = RotatingResource()
        try await LocalServer.withRunning { server in
            resource.install(on: server)
            resource.valid.withLock { $0 = "revoked-by-server" }  // every request in flight gets 401
            let gate = Gate()
            let endpoint = makeEndpoint(resource, gate: gate)
            let store: any CredentialStore = InMemoryCredentialStore()
            // Every caller waiting on a refresh sets a timer for its wait on the session's clock: on a manual
            // clock, its sleepers are the callers waiting (and the timers never fire).
            let clock = ManualClock()
            let session = UserSession(
                account: alice,
                tokens: tokens("alice", clock: clock),
                configuration: UserSession.Configuration(clock: clock),
                vault: CredentialVault(store: store),
                tokenEndpoint: endpoint
            )
            let finished = Counter()
            let results = Task {
                try await withThrowingTaskGroup(of: String.self) { group in
                    for _ in 0..<k {
                        group.addTask {
                            defer { finished.increment() }
                            return text(try await session.data(for: get(server, "/me")).0)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
            }
            // The token request is held until all k callers wait on a refresh: without single flight, each of
            // them would have sent a token request of its own by then.
            // A caller that fails meanwhile (the loop guard refusing the sixth token request) counts too, so a
            // broken single flight fails here instead of hanging.
            await gate.waitForArrivals(1)
            await eventually { clock.sleepers + finished.value >= k }
            #expect(finished.value == 0, "a caller gave up before the one refresh finished")
            #expect(clock.sleepers == k)
            gate.open()
            let bodies = try await results.value
            #expect(endpoint.count == 1)
            #expect(bodies.count == k)
            #expect(bodies.allSatisfy { $0 == #"{"token":"token-alice-1"}"# })
            // Rotation: the new refresh token was stored before any waiter resumed.
            #expect(try await store.load(for: alice)?.refreshToken == "refresh-1")
            session.end()
        }
    }

    @Test func unauthorizedForAReplacedTokenIsReplayedWithoutRefreshing() async throws {
        let resource = RotatingResource()
        try await LocalServer.withRunning { server in
            resource.install(on: server)
            let held = Gate()
            server.route("/held") { request in
                if request.bearerToken == "token-alice" {
                    await held.wait()
                    return LocalServer.Response(status: 401)  // the old token, rejected after the rotation
                }
                return .json(#"{"token":"\#(request.bearerToken ?? "")"}"#)
            }
            let endpoint = makeEndpoint(resource)
            let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
            let stale = Task { try await session.data(for: get(server, "/held")) }
            await held.waitForArrivals(1)
            try await session.refreshTokens()  // another caller rotates: token-alice → token-alice-1
            held.open()
            let (body, response) = try await stale.value
            #expect(response.statusCode == 200)
            #expect(text(body) == #"{"token":"token-alice-1"}"#)
            #expect(endpoint.count == 1, "the 401 was for a replaced token: no second refresh")
            session.end()
        }
    }

    /// The article's exercise: a slow refresh in flight at logout. When it completes, its token is stored
    /// nowhere and no request carries it.
    @Test func refreshCompletingAfterEndIsDead() async throws {
        let resource = RotatingResource()
        try await LocalServer.withRunning { server in
            resource.install(on: server)
            let gate = Gate()
            let endpoint = ScriptedTokenEndpoint(gate: gate) { _, _ in
                TokenSet(accessToken: "token-alice-new", refreshToken: "refresh-new", lifetime: .seconds(3600))
            }
            let store: any CredentialStore = InMemoryCredentialStore()
            let vault = CredentialVault(store: store)
            try await vault.save(CredentialRecord(account: alice, refreshToken: "refresh-alice"))
            let session = UserSession(account: alice, tokens: tokens("alice"), vault: vault, tokenEndpoint: endpoint)
            let refresh = Task { try await session.refreshTokens() }
            await gate.waitForArrivals(1)
            session.end()
            // The purge, queued behind any admitted write and behind the refresh `end()` released (its request was
            // out): it runs once the answer is in.
            let purge = Task { try await vault.delete(for: alice) }
            let error = await #expect(throws: SessionError.self) { try await refresh.value }
            #expect(error?.code == .sessionEnded, "the caller is answered at the end, not at the answer")
            gate.open()
            try await purge.value
            #expect(try await store.load(for: alice) == nil)
            #expect(session.tokens == nil)
            await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/me")) }
            #expect(!server.requests.contains { $0.bearerToken == "token-alice-new" })
        }
    }

    /// A token endpoint of the app's own that throws something other than a `SessionError` fails the refresh as
    /// `networkUnavailable`, once: it is not presented again in a loop.
    @Test func anEndpointsOwnErrorFailsTheRefreshOnce() async throws {
        struct Unplugged: Error {}
        let endpoint = ScriptedTokenEndpoint { _, _ in throw Unplugged() }
        let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
        defer { session.end() }
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .networkUnavailable)
        #expect(endpoint.count == 1)
    }

    @Test func invalidGrantIsTerminalAndNotRetried() async throws {
        try await LocalServer.withRunning { server in
            RotatingResource().install(on: server)
            let endpoint = ScriptedTokenEndpoint { _, _ in
                throw SessionError(.refreshRejected, "invalid_grant", statusCode: 400, oauthError: "invalid_grant")
            }
            let session = UserSession(account: alice, tokens: tokens("wrong"), tokenEndpoint: endpoint)
            let error = await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/me")) }
            #expect(error?.code == .refreshRejected)
            #expect(endpoint.count == 1)
            session.end()
        }
    }

    @Test func transientFailuresAreRetriedWithBackoffThenSucceed() async throws {
        let clock = ManualClock()
        let endpoint = ScriptedTokenEndpoint { _, n in
            if n < 3 { throw SessionError(.providerOutage, "503", statusCode: 503, retryAfter: .seconds(2)) }
            return TokenSet(accessToken: "token-alice-\(n)", refreshToken: "refresh-\(n)", lifetime: .seconds(3600))
        }
        let session = UserSession(
            account: alice,
            tokens: tokens("alice"),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint
        )
        let refresh = Task { try await session.refreshTokens() }
        // Two sleepers: the waiter's deadline and the backoff before the second attempt.
        await eventually { clock.sleepers == 2 && endpoint.count == 1 }
        clock.advance(by: .milliseconds(1999))
        #expect(endpoint.count == 1, "Retry-After is honoured: nothing is sent before 2 s")
        // The retry is spread over the 2 s after Retry-After.
        clock.advance(by: .milliseconds(2001))
        await eventually { clock.sleepers == 2 && endpoint.count == 2 }
        clock.advance(by: .seconds(10))
        try await refresh.value
        #expect(endpoint.count == 3)
        #expect(session.tokens?.accessToken == "token-alice-3")
        session.end()
    }

    @Test func transientFailureKeepsTheCredentials() async throws {
        let endpoint = ScriptedTokenEndpoint { _, _ in throw SessionError(.networkUnavailable, "offline") }
        let policy = RefreshPolicy(retryPolicy: .never)
        let session = UserSession(
            account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint, refreshPolicy: policy)
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .networkUnavailable)
        #expect(session.isActive)
        #expect(session.tokens?.refreshToken == "refresh-alice")
        session.end()
    }

    @Test func loopGuardStopsExcessiveRefreshes() async throws {
        let clock = ManualClock()
        let endpoint = ScriptedTokenEndpoint { _, n in
            TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(3600))
        }
        let session = UserSession(
            account: alice,
            tokens: tokens("alice"),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint,
            refreshPolicy: RefreshPolicy(maximumRefreshes: 5, window: .seconds(30))
        )
        for _ in 0..<5 { try await session.refreshTokens() }
        let error = await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(error?.code == .excessiveRefresh)
        #expect(endpoint.count == 5)
        clock.advance(by: .seconds(31))
        try await session.refreshTokens()
        #expect(endpoint.count == 6)
        session.end()
    }

    @Test func waitingForARefreshIsBoundedAndOneWaiterLeavingDoesNotCancelIt() async throws {
        let clock = ManualClock()
        let gate = Gate()
        let endpoint = ScriptedTokenEndpoint(gate: gate) { _, n in
            TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(3600))
        }
        let session = UserSession(
            account: alice,
            tokens: tokens("alice"),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint,
            refreshPolicy: RefreshPolicy(waitTimeout: .seconds(10))
        )
        let patient = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)
        let impatient = Task { try await session.refreshTokens() }
        let cancelled = Task { try await session.refreshTokens() }
        await eventually { clock.sleepers == 3 }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        clock.advance(by: .seconds(10))
        let timedOut = await #expect(throws: SessionError.self) { try await impatient.value }
        #expect(timedOut?.code == .refreshTimedOut)
        _ = patient
        gate.open()
        // The refresh itself went on; the first waiter's deadline also passed, so read the session instead. Any
        // refresh's result ends the wait (without single flight, three would run and the last would win).
        await eventually { session.tokens?.accessToken != "token-alice" }
        #expect(session.tokens?.accessToken == "t1")
        #expect(endpoint.count == 1)
        session.end()
    }

    @Test func proactiveRefreshHappensWithinTheLeeway() async throws {
        let clock = ManualClock()
        try await LocalServer.withRunning { server in
            let resource = RotatingResource()
            resource.install(on: server)
            let endpoint = makeEndpoint(resource)
            let session = UserSession(
                account: alice,
                tokens: tokens("alice", lifetime: .seconds(300), clock: clock),
                configuration: UserSession.Configuration(clock: clock),
                tokenEndpoint: endpoint,
                refreshPolicy: RefreshPolicy(leeway: .seconds(60), jitter: .zero)
            )
            _ = try await session.data(for: get(server, "/me"))
            #expect(endpoint.count == 0)
            clock.advance(by: .seconds(239))
            _ = try await session.data(for: get(server, "/me"))
            #expect(endpoint.count == 0)
            clock.advance(by: .seconds(2))  // 59 s left: inside the leeway
            _ = try await session.data(for: get(server, "/me"))
            #expect(endpoint.count == 1)
            #expect(server.requests.count == 3, "refreshed before sending: no request was rejected")
            #expect(server.requests.last?.bearerToken == "token-alice-1")
            // The new token is judged by its own expiry: the next requests send it without refreshing again.
            for _ in 0..<2 { _ = try await session.data(for: get(server, "/me")) }
            #expect(endpoint.count == 1)
            #expect(server.requests.last?.bearerToken == "token-alice-1")
            session.end()
        }
    }

    @Test func wallClockSkewNeverChangesARefreshDecision() async throws {
        let clock = ManualClock()
        let endpoint = ScriptedTokenEndpoint { _, n in
            TokenSet(accessToken: "t\(n)", refreshToken: "r\(n)", lifetime: .seconds(3600))
        }
        let session = UserSession(
            account: alice,
            tokens: tokens("alice", lifetime: .seconds(3600), clock: clock),
            configuration: UserSession.Configuration(clock: clock),
            tokenEndpoint: endpoint,
            refreshPolicy: RefreshPolicy(jitter: .zero)
        )
        for shift in [24.0 * 3600, -48.0 * 3600] {
            clock.shiftWallClock(by: shift)
            #expect(session.tokens?.isExpired(at: clock.now, leeway: .seconds(60)) == false)
        }
        clock.advance(by: .seconds(3600))
        #expect(session.tokens?.isExpired(at: clock.now) == true)
        session.end()
    }

    @Test func nonIdempotentRequestIsNotReplayedAfterRefresh() async throws {
        let resource = RotatingResource()
        try await LocalServer.withRunning { server in
            resource.install(on: server)
            server.route("POST", "/orders") { request in
                request.bearerToken == resource.valid.withLock({ $0 })
                    ? .json("{}") : LocalServer.Response(status: 401)
            }
            resource.valid.withLock { $0 = "rotated" }
            let endpoint = makeEndpoint(resource)
            let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
            let error = await #expect(throws: SessionError.self) {
                try await session.data(for: post(server, "/orders"))
            }
            #expect(error?.code == .accessExpired)
            #expect(server.requests.filter { $0.path == "/orders" }.count == 1)
            var keyed = post(server, "/orders")
            keyed.setValue("key-1", forHTTPHeaderField: "Idempotency-Key")
            resource.valid.withLock { $0 = "rotated-again" }
            let (_, response) = try await session.data(for: keyed)
            #expect(response.statusCode == 200)
            session.end()
        }
    }

    @Test func insufficientScopeAndForbiddenTriggerNoRefresh() async throws {
        try await LocalServer.withRunning { server in
            server.route("/admin") { _ in
                LocalServer.Response(
                    status: 401, headers: [("WWW-Authenticate", #"Bearer error="insufficient_scope""#)])
            }
            server.route("/forbidden") { _ in LocalServer.Response(status: 403) }
            let endpoint = ScriptedTokenEndpoint { _, n in TokenSet(accessToken: "t\(n)") }
            let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
            let error = await #expect(throws: SessionError.self) { try await session.data(for: get(server, "/admin")) }
            #expect(error?.code == .backendDenied)
            #expect(error?.statusCode == 401, "the status the resource answered")
            let (_, response) = try await session.data(for: get(server, "/forbidden"))
            #expect(response.statusCode == 403)
            #expect(endpoint.count == 0)
            session.end()
        }
    }
}
