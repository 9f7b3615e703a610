import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The loopback redirect listener (RFC 8252 §7.3) with the test playing the browser over raw sockets: one callback,
/// the state check, the deadline, cancellation, bounded connections, and no descriptor left open.
///
/// Serialized: the descriptor count of the process is compared before and after.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary)), .serialized) struct LoopbackRedirectListenerTests {
    typealias Raw = RawHTTPClient

    /// A client whose endpoints are never contacted: the test plays the authorization server too.
    static let oauth = OAuthClient(
        configuration: .init(
            tokenEndpoint: URL(string: "https://id.example.com/token")!,
            authorizationEndpoint: URL(string: "https://id.example.com/authorize")!, clientID: "cli"))

    struct Fixture {
        let listener: LoopbackRedirectListener
        let request: AuthorizationRequest
        var port: Int { listener.port }

        func callback(code: String = "the-code", state: String? = nil) -> String {
            Raw.get("/callback?code=\(code)&state=\(state ?? request.state)", port: port)
        }
    }

    static func fixture(_ configuration: LoopbackRedirectListener.Configuration = .init()) throws -> Fixture {
        let listener = try LoopbackRedirectListener(configuration: configuration)
        return Fixture(listener: listener, request: try oauth.authorizationRequest(redirectURI: listener.redirectURI))
    }

    /// Starts waiting; the task's value is the code or the error.
    static func wait(_ fixture: Fixture, timeout: Duration = .seconds(30)) -> Task<String, any Error> {
        Task { try await fixture.listener.authorizationCode(answering: fixture.request, timeout: timeout) }
    }

    /// The task's outcome, or `nil` when it did not end within `limit` (a hang, reported by the caller).
    static func outcome(of task: Task<String, any Error>, within limit: Duration = .seconds(10)) async
        -> Result<String, any Error>?
    {
        await withTaskGroup(of: Result<String, any Error>?.self) { group in
            group.addTask { await task.result }
            group.addTask {
                try? await Task.sleep(for: limit)  // a watchdog bound, not an ordering
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            if first == nil { task.cancel() }
            return first
        }
    }

    static func sessionError(_ result: Result<String, any Error>?) -> SessionError? {
        guard case .failure(let error) = result else { return nil }
        return error as? SessionError
    }

    // MARK: - Binding

    @Test func redirectURIIsTheIPv4LoopbackLiteralWithTheSystemsPort() throws {
        let listener = try LoopbackRedirectListener()
        #expect(listener.port > 0)
        #expect(listener.redirectURI == "http://127.0.0.1:\(listener.port)/callback")
        let custom = try LoopbackRedirectListener(configuration: .init(path: "/oauth2/done"))
        #expect(custom.redirectURI == "http://127.0.0.1:\(custom.port)/oauth2/done")
        #expect(custom.port != listener.port)
        #expect("\(custom)" == "LoopbackRedirectListener(\(custom.redirectURI))")
    }

    @Test func listensOn127001OnlyNotEveryAddress() throws {
        let listener = try LoopbackRedirectListener()
        #expect(!Raw.isRefused(port: listener.port), "127.0.0.1 answers")
        // Bound to 0.0.0.0, the socket would accept this (and connections from the network).
        #expect(Raw.isRefused(port: listener.port, address: "127.0.0.2"), "another loopback address is refused")
    }

    @Test(arguments: ["", "callback", "/call back", "/callback?x=1", "/%63allback", "/a#b"])
    func anUnacceptablePathIsRefused(_ path: String) {
        #expect(throws: SessionError.self) { try LoopbackRedirectListener(configuration: .init(path: path)) }
    }

    @Test func anUnacceptableBoundIsRefused() async throws {
        for bound in [Duration.zero, .seconds(-1), .seconds(301)] {
            let error = #expect(throws: SessionError.self) {
                try LoopbackRedirectListener(configuration: .init(connectionTimeout: bound))
            }
            #expect(error?.code == .invalidInput)
        }
        #expect(throws: SessionError.self) {
            try LoopbackRedirectListener.Page(html: String(repeating: "x", count: 65_537))
        }
        let fixture = try Self.fixture()
        let zero = await #expect(throws: SessionError.self) {
            try await fixture.listener.authorizationCode(answering: fixture.request, timeout: .zero)
        }
        #expect(zero?.code == .invalidInput)
        let other = try Self.oauth.authorizationRequest(redirectURI: "http://127.0.0.1/callback")
        let mismatch = await #expect(throws: SessionError.self) {
            try await fixture.listener.authorizationCode(answering: other)
        }
        #expect(mismatch?.code == .invalidInput, "a request with another redirect URI could never be answered here")
    }

    // MARK: - The one callback

    @Test func theCallbackDeliversTheCodeAndTheBrowserSeesTheSuccessPage() async throws {
        let fixture = try Self.fixture()
        let waiting = Self.wait(fixture)
        let page = try await Raw.exchange(port: fixture.port, fixture.callback(code: "c0de-42"))
        #expect(try await waiting.value == "c0de-42")
        #expect(page.status == 200)
        #expect(page.closed)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.headers["cache-control"] == "no-store")
        #expect(page.headers["connection"] == "close")
        #expect(page.headers["content-length"] == String(page.body.utf8.count))
        #expect(page.headers["referrer-policy"] == "no-referrer")
        #expect(page.body == LoopbackRedirectListener.Page.signedIn.html)
        #expect(page.body.contains("You can close this tab"))
        #expect(!page.body.contains("c0de-42"), "nothing from the query is echoed")
        #expect(Raw.isRefused(port: fixture.port), "the listener closed after the one callback")
    }

    @Test func aSecondCallbackIsRefused() async throws {
        let fixture = try Self.fixture()
        let waiting = Self.wait(fixture)
        _ = try await Raw.exchange(port: fixture.port, fixture.callback(code: "first"))
        #expect(try await waiting.value == "first")
        #expect(Raw.isRefused(port: fixture.port))
        await #expect(throws: (any Error).self) {
            try await Raw.exchange(port: fixture.port, fixture.callback(code: "second"))
        }
        let again = await #expect(throws: SessionError.self) {
            try await fixture.listener.authorizationCode(answering: fixture.request)
        }
        #expect(again?.code == .invalidInput, "a listener waits once")
    }

    @Test func aSecondCallbackThatRacesInIsAnsweredWithTheFailurePageAndNotDelivered() async throws {
        let fixture = try Self.fixture()
        // Both connect and send before the wait begins: they wait in the backlog and are read in one turn.
        let first = try Raw.open(port: fixture.port).get()
        let second = try Raw.open(port: fixture.port).get()
        defer {
            _ = close(first)
            _ = close(second)
        }
        Raw.sendAll(first, Array(fixture.callback(code: "one").utf8))
        Raw.sendAll(second, Array(fixture.callback(code: "two").utf8))
        let code = try await Self.wait(fixture).value
        let answers = try await Raw.blocking { [Raw.readResponse(first), Raw.readResponse(second)] }
        #expect(answers.map(\.status).filter { $0 == 200 }.count == 1, "exactly one callback is delivered")
        let delivered = try #require(answers.firstIndex { $0.status == 200 })
        #expect(code == ["one", "two"][delivered])
        let other = answers[1 - delivered]
        // Read in the same turn it gets 409 and the failure page; had the listener closed first, a reset.
        #expect(other.status == 409 || other.status == 0)
        if other.status == 409 { #expect(other.body == LoopbackRedirectListener.Page.signInFailed.html) }
    }

    @Test func aWrongStateIsRefusedAndThePageSaysSignInFailed() async throws {
        let fixture = try Self.fixture()
        let waiting = Self.wait(fixture)
        let page = try await Raw.exchange(
            port: fixture.port, fixture.callback(code: "stolen-c0de", state: "attacker-st4te"))
        let error = Self.sessionError(await Self.outcome(of: waiting))
        #expect(error?.code == .invalidInput)
        #expect(error?.message.contains("state") == true)
        #expect(error.map { !$0.message.contains("stolen-c0de") && !$0.message.contains("attacker-st4te") } == true)
        #expect(page.status == 400)
        #expect(page.body == LoopbackRedirectListener.Page.signInFailed.html)
        #expect(!page.body.contains("stolen-c0de") && !page.body.contains("attacker-st4te"))
        #expect(Raw.isRefused(port: fixture.port), "a refused callback is the one callback too")
    }

    @Test func accessDeniedGivesTheTypedErrorAndNoReflectedText() async throws {
        let fixture = try Self.fixture()
        let waiting = Self.wait(fixture)
        let target =
            "/callback?error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E&state="
            + fixture.request.state
        let page = try await Raw.exchange(port: fixture.port, Raw.get(target, port: fixture.port))
        let error = Self.sessionError(await Self.outcome(of: waiting))
        #expect(error?.code == .accessDenied)
        #expect(error?.oauthError == "access_denied")
        #expect(page.status == 400)
        #expect(page.body.contains("Sign-in failed"))
        #expect(!page.body.contains("script") && !page.body.contains("access_denied"))
    }

    @Test func customPagesAreServedEscaped() async throws {
        let success = LoopbackRedirectListener.Page(title: "Done <b>", message: "Back to \"tool\" & close")
        let failure = try LoopbackRedirectListener.Page(html: "<p>no</p>")
        let fixture = try Self.fixture(.init(successPage: success, failurePage: failure))
        let waiting = Self.wait(fixture)
        let page = try await Raw.exchange(port: fixture.port, fixture.callback())
        _ = try await waiting.value
        #expect(page.body.contains("<h1>Done &lt;b&gt;</h1>"))
        #expect(page.body.contains("Back to &quot;tool&quot; &amp; close"))
        #expect(page.body == success.html)
    }

    // MARK: - Other requests do not use up the callback

    @Test func otherPathsAnd405AndBadRequestsLeaveTheCallbackAwaited() async throws {
        let fixture = try Self.fixture()
        let port = fixture.port
        let waiting = Self.wait(fixture)
        let host = "Host: 127.0.0.1:\(port)\r\n"
        let answers: [(String, Int)] = [
            (Raw.get("/favicon.ico", port: port), 404),
            (Raw.get("/", port: port), 404),
            (Raw.get("/callback/extra?code=x&state=\(fixture.request.state)", port: port), 404),
            (
                "POST /callback?code=x&state=\(fixture.request.state) HTTP/1.1\r\n\(host)Content-Length: 5\r\n\r\nhello",
                405
            ),
            ("HEAD /callback HTTP/1.1\r\n\(host)\r\n", 405),
            ("GET /callback?code=x HTTP/1.1\r\nHost: rebound.example:\(port)\r\n\r\n", 421),
            ("GARBAGE\r\n\r\n", 400),
            ("GET /callback HTTP/1.1\r\n\r\n", 400),
            ("GET /callback HTTP/1.1\n\(host)\n", 400),
            ("GET /callback HTTP/9.9\r\n\(host)\r\n", 400),
            ("GET http://127.0.0.1:\(port)/callback HTTP/1.1\r\n\(host)\r\n", 400),
            ("GET /callback?a=\u{7F} HTTP/1.1\r\n\(host)\r\n", 400),
            ("\u{16}\u{03}\u{01}\u{02}\u{00}", 400),  // a TLS ClientHello's first bytes
        ]
        for (request, status) in answers {
            let answer = try await Raw.exchange(port: port, request)
            #expect(answer.status == status, "\(request.debugDescription)")
            #expect(answer.closed)
            #expect(answer.headers["connection"] == "close")
        }
        let oversize =
            "GET /callback?code=x HTTP/1.1\r\n\(host)X-Filler: \(String(repeating: "a", count: 9000))\r\n\r\n"
        #expect(try await Raw.exchange(port: port, oversize).status == 431)
        let binary: [UInt8] = [0x47, 0x45, 0x54, 0x20, 0x2F, 0xFF, 0xFE, 0x20] + Array(" HTTP/1.1\r\n\r\n".utf8)
        #expect(try await Raw.exchange(port: port, binary).status == 400)

        let page = try await Raw.exchange(port: port, fixture.callback(code: "after-all-that"))
        #expect(page.status == 200)
        #expect(try await waiting.value == "after-all-that")
    }

    // MARK: - Bounded connections

    @Test func aSilentConnectionDoesNotDelayTheCallback() async throws {
        // A minute's bound: if connections were served one at a time, the callback would wait all of it.
        let fixture = try Self.fixture(.init(connectionTimeout: .seconds(60)))
        let silent = try Raw.open(port: fixture.port).get()
        defer { _ = close(silent) }
        Raw.sendAll(silent, Array("GET /callback?code=slow".utf8))  // half a request line, then nothing
        let waiting = Self.wait(fixture)
        let started = ContinuousClock.now
        let page = try await Raw.exchange(port: fixture.port, fixture.callback(code: "prompt"))
        #expect(page.status == 200)
        #expect(try await waiting.value == "prompt")
        #expect(started.duration(to: .now) < .seconds(30))
        // The silent connection was still open: the wait's end closed it.
        let dropped = try await Raw.blocking { Raw.readResponse(silent, within: .seconds(10)) }
        #expect(dropped.closed && dropped.status == 0)
    }

    @Test func aSilentConnectionIsDroppedAfterItsBoundWhileTheListenerKeepsServing() async throws {
        let fixture = try Self.fixture(.init(connectionTimeout: .milliseconds(300)))
        let waiting = Self.wait(fixture)
        let silent = try Raw.open(port: fixture.port).get()
        defer { _ = close(silent) }
        #expect(try await Raw.exchange(port: fixture.port, Raw.get("/favicon.ico", port: fixture.port)).status == 404)
        let started = ContinuousClock.now
        let dropped = try await Raw.blocking { Raw.readResponse(silent, within: .seconds(10)) }
        #expect(dropped.closed, "the listener closed the silent connection")
        #expect(dropped.status == 0, "without an answer")
        #expect(started.duration(to: .now) < .seconds(10))
        let page = try await Raw.exchange(port: fixture.port, fixture.callback(code: "still-there"))
        #expect(page.status == 200)
        #expect(try await waiting.value == "still-there")
    }

    // MARK: - Deadline and cancellation

    @Test func theDeadlineEndsTheWaitAndClosesTheSocket() async throws {
        let fixture = try Self.fixture()
        let started = ContinuousClock.now
        let result = await Self.outcome(of: Self.wait(fixture, timeout: .milliseconds(200)))
        let error = try #require(Self.sessionError(result), "the deadline ended the wait with a SessionError")
        #expect(error.code == .timedOut)
        #expect(started.duration(to: .now) >= .milliseconds(200))
        #expect(Raw.isRefused(port: fixture.port), "a late callback finds nothing listening")
    }

    @Test func cancellingTheWaitingTaskClosesTheSocket() async throws {
        let fixture = try Self.fixture()
        let waiting = Self.wait(fixture, timeout: .seconds(120))
        // An answer proves the loop is in poll, so the cancellation has to wake it.
        #expect(try await Raw.exchange(port: fixture.port, Raw.get("/", port: fixture.port)).status == 404)
        waiting.cancel()
        let result = await Self.outcome(of: waiting)
        guard case .failure(let error) = result else {
            Issue.record("the cancelled wait returned \(String(describing: result))")
            return
        }
        #expect(error is CancellationError)
        #expect(Raw.isRefused(port: fixture.port))
    }

    @Test func aTaskCancelledBeforeItWaitsEndsAtOnce() async throws {
        let fixture = try Self.fixture()
        let waiting = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await fixture.listener.authorizationCode(answering: fixture.request, timeout: .seconds(120))
        }
        let result = await Self.outcome(of: waiting)
        guard case .failure(let error) = result else {
            Issue.record("the wait returned \(String(describing: result))")
            return
        }
        #expect(error is CancellationError)
        #expect(Raw.isRefused(port: fixture.port))
    }

    // MARK: - Descriptors

    @Test func noDescriptorIsLeftOpenHoweverTheWaitEnds() async throws {
        guard let before = Raw.openDescriptorCount() else { return }  // no /proc: not Linux
        do {
            _ = try LoopbackRedirectListener()  // released without a wait
            let delivered = try Self.fixture()
            let waiting = Self.wait(delivered)
            let idle = try Raw.open(port: delivered.port).get()  // left open by the browser
            _ = try await Raw.exchange(port: delivered.port, Raw.get("/favicon.ico", port: delivered.port))
            _ = try await Raw.exchange(port: delivered.port, delivered.callback())
            _ = try await waiting.value
            _ = close(idle)
            let refused = try Self.fixture()
            let wrong = Self.wait(refused)
            _ = try await Raw.exchange(port: refused.port, refused.callback(state: "wrong"))
            _ = await wrong.result
            _ = await Self.wait(try Self.fixture(), timeout: .milliseconds(50)).result
            let cancelled = Self.wait(try Self.fixture())
            cancelled.cancel()
            _ = await cancelled.result
        }
        #expect(Raw.openDescriptorCount() == before, "every socket and pipe the listeners made is closed")
    }
}
