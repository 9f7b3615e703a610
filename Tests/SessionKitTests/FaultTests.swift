import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Broken answers at the HTTP layer — from the resource server through `UserSession.data(for:)`, from the token
/// endpoint during a refresh, from the revocation endpoint during sign-out — each end in a typed `SessionError`
/// (or, for the resource's own statuses, the documented answer), never a crash, and a transient failure never
/// costs the user their credentials: the session stays live with the same tokens in memory and in the store.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct FaultTests {
    /// A signed-in session of `alice` at `mock`, its manager and store; the access token is valid for an hour.
    private struct Fixture {
        let mock: MockAuthorizationServer
        let clock: ManualClock
        let store: InMemoryCredentialStore
        let manager: SessionManager
        let session: UserSession
        let tokens: TokenSet

        init(
            _ mock: MockAuthorizationServer,
            clock: ManualClock = ManualClock(),
            sessionConfiguration: (ManualClock) -> UserSession.Configuration = {
                UserSession.Configuration(retryPolicy: .never, cacheMaximumBytes: 0, clock: $0)
            },
            refreshRetry: RetryPolicy = .never,
            clientTimeout: Duration = .seconds(30)
        ) async throws {
            self.mock = mock
            self.clock = clock
            try mock.addUser("alice")
            let client = mock.makeClient(clock: clock, requestTimeout: clientTimeout, revocationRetry: .never)
            store = InMemoryCredentialStore()
            manager = SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: client, revoker: client,
                    sessionConfiguration: sessionConfiguration(clock),
                    refreshPolicy: RefreshPolicy(jitter: .zero, retryPolicy: refreshRetry)))
            tokens = try mock.issueTokens(for: "alice", clock: clock)
            session = try await manager.signIn(Account(issuer: mock.issuer, subject: "alice"), tokens: tokens)
        }

        /// The session is live and current, with the tokens it had, in memory and in the store.
        func expectCredentialsKept(sourceLocation: SourceLocation = #_sourceLocation) async {
            #expect(session.isActive, sourceLocation: sourceLocation)
            #expect(manager.current === session, sourceLocation: sourceLocation)
            #expect(session.tokens?.accessToken == tokens.accessToken, sourceLocation: sourceLocation)
            #expect(session.tokens?.refreshToken == tokens.refreshToken, sourceLocation: sourceLocation)
            let stored = await store.load(for: session.account)
            #expect(stored?.refreshToken == tokens.refreshToken, sourceLocation: sourceLocation)
        }
    }

    // MARK: - The resource server, through data(for:)

    /// A broken answer from the resource server, the method that met it, and the code it must give.
    struct ResourceFault: Sendable, CustomTestStringConvertible {
        let fault: LocalServer.Fault
        let method: String
        let code: SessionError.Code

        var testDescription: String { "\(fault) answering a \(method) is \(code)" }
    }

    @Test(arguments: [
        ResourceFault(fault: .closeBeforeResponding, method: "GET", code: .networkUnavailable),
        ResourceFault(fault: .truncatedBody, method: "GET", code: .networkUnavailable),
        ResourceFault(fault: .garbage, method: "GET", code: .malformedResponse),
        // The server had the whole POST when it broke the answer: it may have applied it.
        ResourceFault(fault: .closeBeforeResponding, method: "POST", code: .outcomeUnknown),
        ResourceFault(fault: .truncatedBody, method: "POST", code: .outcomeUnknown),
        ResourceFault(fault: .garbage, method: "POST", code: .outcomeUnknown),
    ])
    func aBrokenAnswerIsATypedErrorAndKeepsTheCredentials(_ fault: ResourceFault) async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock)
            mock.protectedRoute(nil, "/broken") { _, _ in .json(#"{"items":[1,2,3]}"#).failing(with: fault.fault) }
            var request = URLRequest(url: mock.url("/broken"))
            request.httpMethod = fault.method
            if fault.method == "POST" { request.httpBody = Data("{}".utf8) }

            let error = await #expect(throws: SessionError.self) { try await fixture.session.data(for: request) }

            #expect(error?.code == fault.code, "\(error.map { "\($0)" } ?? "")")
            #expect(mock.requests.contains { $0.path == "/broken" })
            await fixture.expectCredentialsKept()
        }
    }

    @Test(arguments: ["GET", "POST"])
    func anAnswerLaterThanTheRequestTimeoutIsTimedOutOrOutcomeUnknown(_ method: String) async throws {
        let gate = Gate()
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock) { clock in
                UserSession.Configuration(
                    requestTimeout: .milliseconds(300), retryPolicy: .never, cacheMaximumBytes: 0, clock: clock)
            }
            mock.protectedRoute(nil, "/held") { _, _ in
                await gate.wait()
                return .json("{}")
            }
            var request = URLRequest(url: mock.url("/held"))
            request.httpMethod = method

            let error = await #expect(throws: SessionError.self) { try await fixture.session.data(for: request) }

            #expect(error?.code == (method == "GET" ? .timedOut : .outcomeUnknown))
            // A write's message says why its outcome is unknown, so a log tells it apart from "not sent".
            if method == "POST" {
                #expect(error?.message.contains("may have reached the server") == true, "\(String(describing: error))")
            }
            gate.open()
            await fixture.expectCredentialsKept()
        }
    }

    /// FoundationNetworking on Linux arms its timeout timer with whole seconds, truncated, and one under a second
    /// fails every request at once, however prompt the answer: such timeouts are rounded up for URLSession.
    @Test func aSubSecondTimeoutIsRoundedUpToWholeSecondsForURLSession() {
        let session = UserSession(
            account: alice, tokens: tokens("alice"),
            configuration: UserSession.Configuration(requestTimeout: .milliseconds(300)).onURLSession)
        defer { session.end() }
        #if canImport(FoundationNetworking)
            #expect(Duration.milliseconds(300).urlSessionTimeout == 1)
            #expect(Duration.milliseconds(1500).urlSessionTimeout == 2)
            #expect(Duration.seconds(30).urlSessionTimeout == 30)
            #expect(session.urlSession?.configuration.timeoutIntervalForRequest == 1)
        #else
            #expect(session.urlSession?.configuration.timeoutIntervalForRequest == 0.3)
        #endif
    }

    /// 5xx from the resource server is the resource's own answer: retried as the policy allows for idempotent
    /// requests, then returned as is, like every status other than 401.
    @Test func aServerErrorIsRetriedThenReturnedWithTheCredentialsKept() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock) { clock in
                UserSession.Configuration(
                    retryPolicy: RetryPolicy(maximumAttempts: 3, baseDelay: .zero), cacheMaximumBytes: 0, clock: clock)
            }
            mock.protectedRoute("GET", "/failing") { _, _ in .text("down", status: 503) }

            let (_, response) = try await fixture.session.data(for: URLRequest(url: mock.url("/failing")))

            #expect(response.statusCode == 503)
            #expect(mock.requests.filter { $0.path == "/failing" }.count == 3)
            await fixture.expectCredentialsKept()
        }
    }

    @Test func a429WaitsForItsRetryAfterOnTheSessionClock() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock) { clock in
                UserSession.Configuration(
                    retryPolicy: RetryPolicy(maximumAttempts: 2, baseDelay: .zero), cacheMaximumBytes: 0, clock: clock)
            }
            let attempts = Counter()
            mock.protectedRoute("GET", "/limited") { _, _ in
                attempts.increment()
                return attempts.value == 1
                    ? .json(#"{"error":"slow down"}"#, status: 429, headers: [("Retry-After", "7")]) : .json("{}")
            }

            let request = Task { try await fixture.session.data(for: URLRequest(url: mock.url("/limited"))) }
            await eventually { fixture.clock.sleepers > 0 }  // waiting out Retry-After
            #expect(attempts.value == 1)
            fixture.clock.advance(by: .seconds(6))
            #expect(attempts.value == 1, "retried before Retry-After had passed")
            // The retry lands somewhere in the 7 s after Retry-After (spread, so a fleet does not return at once).
            fixture.clock.advance(by: .seconds(8))
            let (_, response) = try await request.value

            #expect(response.statusCode == 200)
            #expect(attempts.value == 2)
            await fixture.expectCredentialsKept()
        }
    }

    /// A connection the server closed before answering a GET is retried, but only after the backoff, on the
    /// session clock: a dropped connection is often a server restarting, and an immediate retry meets it too.
    @Test func aDroppedConnectionIsRetriedOnlyAfterTheBackoffOnTheSessionClock() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock) { clock in
                UserSession.Configuration(
                    retryPolicy: RetryPolicy(maximumAttempts: 2, baseDelay: .seconds(4), usesJitter: false),
                    cacheMaximumBytes: 0, clock: clock)
            }
            let attempts = Counter()
            mock.protectedRoute("GET", "/restarting") { _, _ in
                attempts.increment()
                return attempts.value == 1 ? .json("{}").failing(with: .closeBeforeResponding) : .json("{}")
            }

            let request = Task { try await fixture.session.data(for: URLRequest(url: mock.url("/restarting"))) }
            let backingOff = await eventually(within: .seconds(30)) { fixture.clock.sleepers > 0 || attempts.value > 1 }
            #expect(backingOff)
            #expect(attempts.value == 1, "retried without waiting for the backoff")
            fixture.clock.advance(by: .seconds(4))
            let (_, response) = try await request.value

            #expect(response.statusCode == 200)
            #expect(attempts.value == 2)
            await fixture.expectCredentialsKept()
        }
    }

    /// A write carrying an `Idempotency-Key` that the server refuses as a conflict (409, or 422 for a key reused
    /// with another body) is `idempotencyConflict`, with the status; without the key, or with a neighbouring status,
    /// the answer is the caller's as it came.
    @Test(arguments: [
        (409, true, true), (422, true, true), (409, false, false), (422, false, false), (410, true, false),
        (423, true, false),
    ])
    func aConflictAnsweringAnIdempotencyKeyIsItsOwnError(_ status: Int, _ keyed: Bool, _ conflict: Bool)
        async throws
    {
        try await LocalServer.withRunning { server async throws in
            server.route("/orders") { _ in .text("conflict", status: status) }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            var request = post(server, "/orders")
            if keyed { request.setValue("key-1", forHTTPHeaderField: "Idempotency-Key") }
            if conflict {
                let error = await #expect(throws: SessionError.self) { try await session.data(for: request) }
                #expect(error?.code == .idempotencyConflict)
                #expect(error?.statusCode == status)
            } else {
                let (_, response) = try await session.data(for: request)
                #expect(response.statusCode == status)
            }
        }
    }

    /// A write broken off after the server had it (the connection closed before an answer) may have applied: for
    /// either write policy it is `outcomeUnknown`, never an error that reads as "not sent" and invites a resend.
    @Test(arguments: ["wait", "handOff"])
    func aWriteWhoseConnectionClosesBeforeTheAnswerIsOutcomeUnknown(_ policyName: String) async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/orders") { _ in LocalServer.Response(status: 200).failing(with: .closeBeforeResponding) }
            let session = UserSession(
                account: alice, tokens: tokens("alice"), configuration: UserSession.Configuration(retryPolicy: .never))
            defer { session.end() }
            let policy: WritePolicy = policyName == "wait" ? .wait(.seconds(5)) : .handOff
            let error = await #expect(throws: SessionError.self) {
                try await session.write(post(server, "/orders"), policy: policy)
            }
            #expect(error?.code == .outcomeUnknown, "\(error.map { "\($0)" } ?? "")")
            #expect(server.requests.filter { $0.path == "/orders" }.count == 1)
        }
    }

    // MARK: - The token endpoint, during a refresh a 401 started

    /// A broken answer from the token endpoint and the code the refresh must give.
    struct TokenFault: Sendable, CustomTestStringConvertible {
        let failure: MockAuthorizationServer.Failure
        let code: SessionError.Code

        var testDescription: String { "\(failure) is \(code)" }
    }

    @Test(arguments: [
        TokenFault(failure: .serviceUnavailable(retryAfter: .seconds(5)), code: .providerOutage),
        TokenFault(failure: .tooManyRequests(retryAfter: .seconds(2)), code: .providerOutage),
        TokenFault(failure: .internalServerError, code: .providerOutage),
        TokenFault(failure: .fault(.closeBeforeResponding), code: .networkUnavailable),
        TokenFault(failure: .fault(.truncatedBody), code: .networkUnavailable),
        TokenFault(failure: .fault(.garbage), code: .malformedResponse),
        TokenFault(failure: .malformedBody(.truncatedJSON), code: .malformedTokenResponse),
        TokenFault(failure: .neverAnswer, code: .timedOut),
    ])
    func aBrokenTokenEndpointFailsTheRequestAndKeepsTheCredentials(_ fault: TokenFault) async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            // The client's timeout is a deadline SessionKit enforces to the millisecond: long enough for an answer
            // on a machine running every suite at once, short enough for `neverAnswer` to time out quickly.
            let fixture = try await Fixture(mock, clientTimeout: .seconds(2))
            mock.invalidateAccessTokens(for: "alice")  // the next request gets 401 and refreshes
            mock.failNext(.token, with: fault.failure)

            let error = await #expect(throws: SessionError.self) {
                try await fixture.session.data(for: URLRequest(url: mock.userInfoEndpoint))
            }

            #expect(error?.code == fault.code, "\(error.map { "\($0)" } ?? "")")
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            await fixture.expectCredentialsKept()
            if fault.code == .providerOutage, case .serviceUnavailable(let after?) = fault.failure {
                #expect(error?.retryAfter == after)
            }
            let expected: SessionState = .active(fixture.session.account, offline: error?.isTransient == true)
            #expect(fixture.manager.state == expected)
        }
    }

    @Test func aTransientTokenEndpointFailureIsRetriedAfterItsRetryAfter() async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock, refreshRetry: RetryPolicy(maximumAttempts: 2, baseDelay: .zero))
            mock.invalidateAccessTokens(for: "alice")
            mock.failNext(.token, with: .serviceUnavailable(retryAfter: .seconds(3)))

            let request = Task { try await fixture.session.data(for: URLRequest(url: mock.userInfoEndpoint)) }
            await eventually { fixture.clock.sleepers > 1 }  // the refresh waits out Retry-After (and its callers)
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            await fixture.expectCredentialsKept()
            // Retry-After: 3, and the retry spread over the 3 s after it.
            fixture.clock.advance(by: .seconds(6))
            let (body, _) = try await request.value

            #expect(String(decoding: body, as: UTF8.self) == #"{"user":"alice"}"#)
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 2)
            let rotated = try #require(fixture.session.tokens?.refreshToken)
            #expect(rotated != fixture.tokens.refreshToken)
            #expect(await fixture.store.load(for: fixture.session.account)?.refreshToken == rotated)
        }
    }

    // MARK: - The revocation endpoint, during sign-out

    @Test(arguments: [
        (MockAuthorizationServer.Failure.neverAnswer, SignOutReport.StepOutcome.unanswered),
        (.fault(.closeBeforeResponding), .failed(.networkUnavailable)),
        (.fault(.garbage), .failed(.malformedResponse)),
        (.serviceUnavailable(retryAfter: nil), .failed(.providerOutage)),
    ])
    func signOutCompletesLocallyWhateverTheRevocationEndpointDoes(
        _ failure: MockAuthorizationServer.Failure, _ outcome: SignOutReport.StepOutcome
    ) async throws {
        try await MockAuthorizationServer.withRunning { mock async throws in
            let fixture = try await Fixture(mock)
            mock.failNext(.revocation, with: failure)

            // The local phases' deadline lies well past the server's: advancing the clock to end the unanswered
            // revocation must not also pass the deadline of a record deletion still under way (both were 5 s, and a
            // loaded machine's deletion lost that race: `credentialDeletion` timed out).
            let signOut = Task {
                await fixture.manager.signOut(
                    options: SignOutOptions(serverTimeout: .seconds(5), localTimeout: .seconds(60)))
            }
            if outcome == .unanswered {
                await eventually { mock.revocationRequestCount == 1 && fixture.clock.sleepers > 0 }
                fixture.clock.advance(by: .seconds(5))
            }
            let report = try #require(await signOut.value)

            #expect(report.refreshTokenRevocation == outcome)
            #expect(report.credentialDeletion == .succeeded)
            #expect(!fixture.session.isActive)
            #expect(fixture.manager.current == nil)
            #expect(await fixture.store.accounts().isEmpty)
        }
    }
}
