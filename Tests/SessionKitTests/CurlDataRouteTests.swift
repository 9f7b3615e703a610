#if os(Linux)
    import Foundation
    import FoundationNetworking
    import SessionKitTesting
    import Testing

    @testable import SessionKit
    @testable import SessionKitOAuth

    /// A session's data route on the libcurl transport, chosen per session so that it runs in every pass of
    /// `scripts/test` (the whole suite runs on libcurl by default on Linux, and again on URLSession with `SESSIONKIT_TRANSPORT=urlsession`): the session's one
    /// cookie jar, its end, and its deadline.
    @Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CurlDataRouteTests {
        static let alice = Account(issuer: "https://curl.sessionkit.invalid", subject: "alice")

        static func session(requestTimeout: Duration = .seconds(30)) -> UserSession {
            var configuration = UserSession.Configuration(requestTimeout: requestTimeout, retryPolicy: .never)
            configuration.transport = .libcurl
            return UserSession(
                account: alice,
                tokens: TokenSet(accessToken: "token-alice", refreshToken: "refresh-alice", lifetime: .seconds(3600)),
                configuration: configuration)
        }

        @Test func theRouteIsLibcurl() {
            let session = Self.session()
            defer { session.end() }
            #expect(session.curl != nil)
        }

        /// A session on libcurl makes no `URLSession`: FoundationNetworking's would hold the two descriptors of its
        /// multi handle for as long as the session lives, 400 for these 200 (and the OAuth client's its own). The bound
        /// leaves room for what other tests open meanwhile in a parallel run.
        @Test func aSessionOnLibcurlHoldsNoURLSessionNorItsDescriptors() throws {
            let before = try #require(RawHTTPClient.openDescriptorCount())
            let sessions = (0..<200).map { _ in Self.session() }
            defer { for session in sessions { session.end() } }
            let after = try #require(RawHTTPClient.openDescriptorCount())
            #expect(sessions.allSatisfy { $0.urlSession == nil && $0.curl != nil })
            #expect(after - before < 100, "\(after - before) descriptors for 200 idle sessions")
            if TransportChoice.process == .libcurl {
                let client = OAuthClient(
                    configuration: .init(
                        tokenEndpoint: URL(string: "https://curl.sessionkit.invalid/token")!, clientID: "app"))
                #expect(client.transport.session == nil)
            }
        }

        /// The cookies a request carries follow RFC 6265, not FoundationNetworking's jar, which matches the host alone:
        /// a `Secure` cookie never goes over plain HTTP (it would leave in the clear to the same host), a cookie
        /// scoped to a path goes only at or below it, and one set `Secure` by a plain-HTTP answer is not kept.
        /// RFC 6265 §5.1.4, case by case: the same path, a path below the cookie's at a `/`, never a sibling that
        /// only shares its letters, and bytes, not canonically equivalent text.
        @Test func aPathMatchesItsOwnAndWhatLiesBelowItOnly() {
            let cases: [(request: String, cookie: String, matches: Bool)] = [
                ("/account", "/account", true), ("/account/x", "/account", true), ("/account/x", "/account/", true),
                ("/accounts", "/account", false), ("/acc", "/account", false), ("/", "/account", false),
                ("/anything", "/", true), ("/anything", "", true), ("/caf\u{E9}/x", "/caf\u{E9}", true),
                ("/cafe\u{301}/x", "/caf\u{E9}", false), ("/caf\u{E9}", "/cafe\u{301}", false),
            ]
            for (request, cookie, matches) in cases {
                #expect(UserSession.pathMatches(request, cookie) == matches, "\(request) against \(cookie)")
            }
        }

        @Test func cookiesGoOnlyWhereTheirSecureFlagAndPathAllow() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/account/set") { _ in
                    .text(
                        "set",
                        headers: [("Set-Cookie", "scoped=1; Path=/account"), ("Set-Cookie", "planted=1; Secure")])
                }
                for path in ["/account", "/account/x", "/accountant", "/other"] {
                    server.route("GET", path) { request in .text(request.header("Cookie") ?? "none") }
                }
                let session = Self.session()
                defer { session.end() }
                let jar = try #require(session.cookies)
                // As if an https answer of this host had set it: the jar then holds it for the host.
                let secure = try #require(
                    HTTPCookie(properties: [
                        .domain: "127.0.0.1", .path: "/", .name: "sid", .value: "secret", .secure: "TRUE",
                    ]))
                jar.setCookie(secure)
                _ = try await session.data(for: URLRequest(url: server.url("/account/set")))
                #expect(
                    jar.cookies?.contains { $0.name == "planted" } == false, "a Secure cookie set over http was kept")
                func sent(_ path: String) async throws -> String {
                    String(decoding: try await session.data(for: URLRequest(url: server.url(path))).0, as: UTF8.self)
                }
                #expect(try await sent("/account") == "scoped=1")
                #expect(try await sent("/account/x") == "scoped=1")
                #expect(try await sent("/accountant") == "none")
                #expect(try await sent("/other") == "none")
                // The same choice on the transfer route and a handed-off write: every kind makes its transfer in one
                // place (`prepare`).
                let (file, _) = try await session.download(for: URLRequest(url: server.url("/account/x")))
                #expect(String(decoding: try Data(contentsOf: file), as: UTF8.self) == "scoped=1")
                let (other, _) = try await session.download(for: URLRequest(url: server.url("/other")))
                #expect(String(decoding: try Data(contentsOf: other), as: UTF8.self) == "none")
                let (handedOff, _) = try await session.sendHandedOff(URLRequest(url: server.url("/other")))
                #expect(String(decoding: handedOff, as: UTF8.self) == "none")
                // Over https the Secure one would go (the rule, without a TLS server): and an expired one never.
                let https = try #require(URL(string: "https://127.0.0.1/account"))
                #expect(Set(UserSession.cookiesToSend(from: jar, to: https).map(\.name)) == ["sid", "scoped"])
                let expiring = try #require(
                    HTTPCookie(properties: [
                        .domain: "127.0.0.1", .path: "/", .name: "brief", .value: "1",
                        .expires: Date().addingTimeInterval(60),
                    ]))
                jar.setCookie(expiring)
                let plain = try #require(URL(string: "http://127.0.0.1/"))
                #expect(UserSession.cookiesToSend(from: jar, to: plain).map(\.name) == ["brief"])
                #expect(UserSession.cookiesToSend(from: jar, to: plain, now: Date().addingTimeInterval(120)).isEmpty)
            }
        }

        /// A cookie the server sets is kept in the session's jar and sent back, after the request's own `Cookie`;
        /// another session's jar never has it.
        @Test func cookiesAreKeptInTheSessionsJarAndSentBack() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/set") { _ in .text("set", headers: [("Set-Cookie", "sid=alice-cookie; Path=/")]) }
                server.route("GET", "/echo") { request in .text(request.header("Cookie") ?? "none") }
                let session = Self.session()
                let other = Self.session()
                defer {
                    session.end()
                    other.end()
                }
                _ = try await session.data(for: URLRequest(url: server.url("/set")))
                let (sent, _) = try await session.data(for: URLRequest(url: server.url("/echo")))
                #expect(String(decoding: sent, as: UTF8.self) == "sid=alice-cookie")
                var written = URLRequest(url: server.url("/echo"))
                written.setValue("app=1", forHTTPHeaderField: "Cookie")
                let (both, _) = try await session.data(for: written)
                #expect(String(decoding: both, as: UTF8.self) == "app=1; sid=alice-cookie")
                let (none, _) = try await other.data(for: URLRequest(url: server.url("/echo")))
                #expect(String(decoding: none, as: UTF8.self) == "none")
                #expect(server.requests.filter { $0.path == "/echo" }.allSatisfy { $0.bearerToken == "token-alice" })
            }
        }

        /// A field with a line break would be sent as two fields: refused as the caller's input, nothing sent.
        @Test func aFieldWithALineBreakIsRefusedAndNothingIsSent() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/r") { _ in .text("sent") }
                let session = Self.session()
                defer { session.end() }
                var request = URLRequest(url: server.url("/r"))
                request.allHTTPHeaderFields = ["X-Field": "a\r\nX-Injected: 1"]
                let error = await #expect(throws: SessionError.self) { try await session.data(for: request) }
                #expect(error?.code == .invalidInput)
                #expect(server.requests.isEmpty)
            }
        }

        /// `end()` answers a request in flight with `sessionEnded` at once, and its transfer stops.
        @Test func endAnswersARequestInFlightAndStopsItsTransfer() async throws {
            try await LocalServer.withRunning { server in
                let gate = CurlTransportTests.routeHeld(server, "/held")
                defer { gate.open() }
                let session = Self.session()
                let call = Task { try await session.data(for: URLRequest(url: server.url("/held"))) }
                await gate.waitForArrivals(1)
                #expect(session.requestsInFlight == 1)
                session.end()
                let error = await #expect(throws: SessionError.self) { try await call.value }
                #expect(error?.code == .sessionEnded)
                #expect(await session.curl?.running() == 0)
                #expect(session.requestsInFlight == 0)
            }
        }

        /// The request timeout is the transfer's whole-request deadline.
        @Test func theRequestTimeoutEndsASilentServersWait() async throws {
            try await LocalServer.withRunning { server in
                let gate = CurlTransportTests.routeHeld(server, "/held")
                defer { gate.open() }
                let session = Self.session(requestTimeout: .milliseconds(300))
                defer { session.end() }
                let error = await #expect(throws: SessionError.self) {
                    try await session.data(for: URLRequest(url: server.url("/held")))
                }
                #expect(error?.code == .timedOut)
            }
        }
    }
#endif
