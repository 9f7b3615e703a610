import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A session's credentials go only to the origin they are for: a redirect to another origin (scheme, host or port)
/// is followed without `Authorization`, `Cookie`, `Proxy-Authorization`, `DPoP` or the app's marked fields, for every
/// request kind and redirect status; `https` to `http` is refused; plain HTTP goes to loopback only; an origin the
/// scope does not serve is refused. The evidence is what a real nginx logged at the other origin.
@Suite(.serialized, .timeLimit(.minutes(TimeLimit.ordinary))) struct CredentialOriginTests {
    /// The request kinds a session sends, each as one call that returns the final status and body.
    enum Kind: String, CaseIterable {
        case data, writeWaiting, writeHandedOff, upload, download, unrangedDownload, bytes

        var method: String {
            switch self {
            case .data, .download, .unrangedDownload, .bytes: "GET"
            case .writeWaiting, .writeHandedOff: "POST"
            case .upload: "PUT"
            }
        }

        func send(_ request: URLRequest, through session: UserSession) async throws -> (Int, String) {
            var request = request
            request.httpMethod = method
            switch self {
            case .data:
                let (data, response) = try await session.data(for: request)
                return (response.statusCode, text(data))
            case .writeWaiting, .writeHandedOff:
                request.httpBody = Data(#"{"n":1}"#.utf8)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                let policy: WritePolicy = self == .writeWaiting ? .wait(.seconds(5)) : .handOff
                let (data, response) = try await session.write(request, policy: policy)
                return (response.statusCode, text(data))
            case .upload:
                let (data, response) = try await session.upload(for: request, from: Data(repeating: 7, count: 4096))
                return (response.statusCode, text(data))
            case .download, .unrangedDownload:
                let (file, response) = try await session.download(for: request)
                defer { try? FileManager.default.removeItem(at: file) }
                return (response.statusCode, text(try Data(contentsOf: file)))
            case .bytes:
                let (bytes, response) = try await session.bytes(for: request)
                var body = [UInt8]()
                for try await byte in bytes { body.append(byte) }
                return (response.statusCode, String(decoding: body, as: UTF8.self))
            }
        }
    }

    /// A session for alice whose scope marks `X-Api-Key` as a credential; `downloadSegmentBytes` 0 for
    /// ``Kind/unrangedDownload``.
    private static func session(
        for kind: Kind? = nil, scope: UserSession.CredentialScope = .init(credentialHeaderFields: ["X-Api-Key"])
    ) -> UserSession {
        UserSession(
            account: alice, tokens: tokens("alice"),
            configuration: UserSession.Configuration(
                retryPolicy: .never, downloadSegmentBytes: kind == .unrangedDownload ? 0 : 16 << 20,
                credentialScope: scope))
    }

    /// A request carrying every credential the app might add by hand besides the session's token.
    private static func withAppCredentials(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.setValue("app-cookie=1", forHTTPHeaderField: "Cookie")
        request.setValue("Basic cHJveHk6c2VjcmV0", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("key-of-alice", forHTTPHeaderField: "X-Api-Key")
        request.setValue("proof-of-alice", forHTTPHeaderField: "DPoP")
        return request
    }

    // MARK: - Every kind × every status, against nginx

    @Test(.enabled(if: NginxRedirector.shouldRun))
    func everyRequestKindFollowsEveryRedirectWithoutCredentialsAcrossOriginsAndWithTheTokenWithin() async throws {
        try await NginxRedirector.withRunning { nginx in
            var crossOrigin = 0
            var sameOrigin = 0
            for kind in Kind.allCases {
                let session = Self.session(for: kind)
                defer { session.end() }
                // A cookie of origin A's own, in the session's store: it goes back to A, never to B.
                _ = try await session.data(for: URLRequest(url: nginx.a("/set-cookie")))
                for status in NginxRedirector.statuses {
                    let crossed = try await kind.send(
                        Self.withAppCredentials(nginx.a("/cross/\(status)")), through: session)
                    #expect(crossed == (200, "origin b"), "\(kind) \(status) across")
                    crossOrigin += 1
                    for path in ["/same/\(status)", "/relative/\(status)"] {
                        let stayed = try await kind.send(Self.withAppCredentials(nginx.a(path)), through: session)
                        #expect(stayed == (200, "origin a"), "\(kind) \(path)")
                        sameOrigin += 1
                    }
                }
            }
            let other = await nginx.log(of: "b")
            let leaked = other.filter { !$0.credentials.isEmpty }
            print("origins: redirects: \(crossOrigin), credentials sent across origins: \(leaked.count)")
            #expect(other.count == crossOrigin, "every cross-origin redirect reached B once")
            #expect(leaked.isEmpty, "B received credentials: \(leaked.map { "\($0.method) \($0.uri)" })")
            #expect(crossOrigin >= 12)

            // Within the origin, every landing carried the session's token, the cookie A set and the app's fields.
            let landings = await nginx.log(of: "a").filter { $0.uri == "/land" }
            #expect(landings.count == sameOrigin)
            #expect(landings.allSatisfy { $0.authorization == "Bearer token-alice" })
            #expect(landings.allSatisfy { $0.cookie.contains("a_session=cookie-of-a") })
            #expect(landings.allSatisfy { $0.apiKey == "key-of-alice" && $0.dpop == "proof-of-alice" })
            // 303 turns every method into GET; 301 and 302 turn POST into GET; 307 and 308 keep it.
            let methods = Set(landings.map(\.method))
            #expect(methods == ["GET", "POST", "PUT"])
        }
    }

    @Test(.enabled(if: NginxRedirector.shouldRun))
    func aBareURLSessionFollowingTheSameRedirectHandsTheTokenToTheOtherOrigin() async throws {
        // The platform fact the library exists for: without SessionKit, FoundationNetworking copies every field.
        try await NginxRedirector.withRunning { nginx in
            let bare = URLSession(configuration: .ephemeral)
            defer { bare.invalidateAndCancel() }
            var request = URLRequest(url: nginx.a("/cross/302"))
            request.setValue("Bearer token-alice", forHTTPHeaderField: "Authorization")
            let (_, response) = try await bare.data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(await nginx.log(of: "b").map(\.authorization) == ["Bearer token-alice"])
        }
    }

    @Test(.enabled(if: NginxRedirector.shouldRun))
    func aChainThatLeftItsOriginNeverCarriesTheTokenBackToIt() async throws {
        try await NginxRedirector.withRunning { nginx in
            let session = Self.session()
            defer { session.end() }
            let (data, _) = try await session.data(for: URLRequest(url: nginx.a("/chain")))
            #expect(text(data) == "origin a")
            #expect(await nginx.log(of: "b").map(\.authorization) == ["-"])
            let back = await nginx.log(of: "a").filter { $0.uri == "/land" }
            #expect(back.map(\.authorization) == ["-"], "the hop back to A came from B's Location")
        }
    }

    @Test(.enabled(if: NginxRedirector.shouldRun))
    func aRedirectLoopEndsWithATypedErrorAfterTwentyHops() async throws {
        try await NginxRedirector.withRunning { nginx in
            let session = Self.session()
            defer { session.end() }
            do {
                _ = try await session.data(for: URLRequest(url: nginx.a("/loop")))
                Issue.record("a redirect loop was followed to an answer")
            } catch {
                #expect(SessionError.Code.of(error) == .malformedResponse)
                #expect((error as? SessionError)?.statusCode == 302)
            }
            #expect(await nginx.log(of: "a").count == RedirectDecision.maximumHops + 1)
        }
    }

    @Test(.enabled(if: NginxRedirector.shouldRun))
    func a401FromAnOriginTheTokenNeverReachedStartsNoRefresh() async throws {
        try await NginxRedirector.withRunning { nginx in
            let endpoint = ScriptedTokenEndpoint { _, n in TokenSet(accessToken: "token-alice-\(n)", lifetime: nil) }
            let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
            defer { session.end() }
            let (_, response) = try await session.data(for: URLRequest(url: nginx.a("/cross/unauthorized")))
            #expect(response.statusCode == 401, "the other origin's answer, handed over as it is")
            #expect(endpoint.count == 0)
            #expect(session.tokens?.accessToken == "token-alice")
        }
    }

    // MARK: - The same rules against LocalServer, with schedules

    @Test func aSameOriginRedirectCarriesTheTokenARefreshInBetweenHandedOut() async throws {
        try await LocalServer.withRunning { server async throws in
            let clock = ManualClock()
            server.route("/start") { _ in
                // The token expires while the redirect is on its way back.
                clock.advance(by: .seconds(3600))
                return LocalServer.Response(status: 302, headers: [("Location", "/land")])
            }
            server.route("/land", tokenEchoHandler)
            let endpoint = ScriptedTokenEndpoint { _, n in
                TokenSet(accessToken: "token-alice-\(n)", lifetime: .seconds(3600), receivedAt: clock.now)
            }
            let session = UserSession(
                account: alice, tokens: tokens("alice", lifetime: .seconds(600), clock: clock),
                configuration: UserSession.Configuration(clock: clock), tokenEndpoint: endpoint)
            defer { session.end() }
            let (data, _) = try await session.data(for: get(server, "/start"))
            #expect(text(data) == #"{"t":"token-alice-1"}"#)
            #expect(server.requests.map(\.bearerToken) == ["token-alice", "token-alice-1"])
            #expect(endpoint.count == 1)
        }
    }

    @Test func aSameOriginRedirectWhoseLandingAnswers401IsRecoveredThere() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/start") { _ in LocalServer.Response(status: 307, headers: [("Location", "/land")]) }
            server.route("/land") { request in
                request.bearerToken == "token-alice"
                    ? LocalServer.Response(status: 401) : .json(#"{"t":"\#(request.bearerToken ?? "")"}"#)
            }
            let endpoint = ScriptedTokenEndpoint { _, n in TokenSet(accessToken: "token-alice-\(n)", lifetime: nil) }
            let session = UserSession(account: alice, tokens: tokens("alice"), tokenEndpoint: endpoint)
            defer { session.end() }
            let (data, _) = try await session.data(for: get(server, "/start"))
            #expect(text(data) == #"{"t":"token-alice-1"}"#)
            #expect(server.requests.map(\.path) == ["/start", "/land", "/land"])
        }
    }

    @Test func aCrossOriginRedirectToLocalServerArrivesWithoutTheTokenForEveryKind() async throws {
        try await LocalServer.withRunning { other async throws in
            other.route("/land") { _ in .text("origin b") }
            try await LocalServer.withRunning { server async throws in
                // Another port and another host name: `localhost`, not `127.0.0.1`.
                let target = "http://localhost:\(other.port)/land"
                server.route("/away") { _ in LocalServer.Response(status: 308, headers: [("Location", target)]) }
                for kind in Kind.allCases {
                    let session = Self.session(for: kind)
                    defer { session.end() }
                    let (status, body) = try await kind.send(
                        Self.withAppCredentials(server.url("/away")), through: session)
                    #expect(status == 200 && body == "origin b", "\(kind)")
                }
                let arrived = other.requests
                #expect(arrived.count == Kind.allCases.count)
                for request in arrived {
                    for field in ["Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key", "DPoP"] {
                        #expect(request.header(field) == nil, "\(request.method) carried \(field)")
                    }
                }
            }
        }
    }

    // MARK: - Plain HTTP and the origins a session serves

    @Test func plainHTTPToAHostThatIsNotLoopbackIsRefusedForEveryKindBeforeAnythingIsSent() async throws {
        let request = URLRequest(url: URL(string: "http://api.sessionkit.test/me")!)
        for kind in Kind.allCases {
            let session = Self.session(for: kind)
            defer { session.end() }
            await Self.expectRefusal(.insecureTransport, kind: kind) { try await kind.send(request, through: session) }
        }
        let session = Self.session()
        defer { session.end() }
        await Self.expectRefusal(.insecureTransport, kind: nil) { _ = try await session.authorize(request) }
        let socket = URLRequest(url: URL(string: "ws://api.sessionkit.test/events")!)
        await Self.expectRefusal(.insecureTransport, kind: nil) { _ = try await session.webSocket(for: socket) }
    }

    @Test func aSessionWithNamedOriginsRefusesEveryOtherOriginAndServesItsOwn() async throws {
        try await LocalServer.withRunning { other async throws in
            other.route("/me", tokenEchoHandler)
            try await LocalServer.withRunning { server async throws in
                server.route("/me", tokenEchoHandler)
                let scope = UserSession.CredentialScope.only([try #require(Origin(server.url("/")))])
                for kind in Kind.allCases {
                    let session = Self.session(for: kind, scope: scope)
                    defer { session.end() }
                    let (status, _) = try await kind.send(URLRequest(url: server.url("/me")), through: session)
                    #expect(status == 200, "\(kind)")
                    await Self.expectRefusal(.originNotServed, kind: kind) {
                        try await kind.send(URLRequest(url: other.url("/me")), through: session)
                    }
                }
                let session = Self.session(scope: scope)
                defer { session.end() }
                await Self.expectRefusal(.originNotServed, kind: nil) {
                    _ = try await session.authorize(URLRequest(url: other.url("/me")))
                }
                #expect(other.requests.isEmpty)
                #expect(server.requests.allSatisfy { $0.bearerToken == "token-alice" })
            }
        }
    }

    /// A WebSocket is one more request kind: a session whose scope names its origins refuses a handshake to any
    /// other origin (another port, host or scheme of the same machine among them) with the error the other kinds
    /// get, before anything is sent, since the handshake would carry the token.
    @Test func aSessionWithNamedOriginsRefusesAWebSocketToEveryOtherOriginAsItRefusesEveryOtherKind() async throws {
        try await LocalServer.withRunning { other async throws in
            other.route("/socket", tokenEchoHandler)
            try await LocalServer.withRunning { server async throws in
                let scope = UserSession.CredentialScope.only([try #require(Origin(server.url("/")))])
                let session = Self.session(scope: scope)
                defer { session.end() }
                // What every other kind is refused with, for the other server's origin.
                var expected: SessionError?
                do {
                    _ = try await session.data(for: URLRequest(url: other.url("/socket")))
                } catch {
                    expected = error as? SessionError
                }
                #expect(expected?.code == .originNotServed)

                let refused = [
                    "ws://127.0.0.1:\(other.port)/socket", "wss://127.0.0.1:\(other.port)/socket",
                    "http://127.0.0.1:\(other.port)/socket", "ws://localhost:\(server.port)/socket",
                    "wss://127.0.0.1:\(server.port)/socket",
                ]
                for address in refused {
                    let request = URLRequest(url: try #require(URL(string: address)))
                    let error = await #expect(throws: SessionError.self, "\(address)") {
                        try await session.webSocket(for: request)
                    }
                    #expect(error?.code == expected?.code, "\(address)")
                }
                // Its own origin is served, the handshake carrying the token: the refusals above were the scope's.
                let own = try await session.webSocket(
                    for: URLRequest(url: try #require(URL(string: "ws://127.0.0.1:\(server.port)/socket"))))
                #expect(own.originalRequest?.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice")
                own.cancel()
                #expect(other.requests.isEmpty, "a handshake reached an origin the session does not serve")
            }
        }
    }

    private static func expectRefusal<T>(
        _ code: SessionError.Code, kind: Kind?, _ body: () async throws -> T
    ) async {
        do {
            _ = try await body()
            Issue.record("\(kind?.rawValue ?? "call"): not refused")
        } catch {
            #expect(SessionError.Code.of(error) == code, "\(kind?.rawValue ?? "call"): \(error)")
            // The refusal names the setting that would allow the request, so a developer knows what to change.
            let setting: String? =
                switch code {
                case .originNotServed: "UserSession.Configuration.credentialScope"
                case .insecureTransport: "CredentialScope.plainHTTPOrigins"
                default: nil
                }
            if let setting {
                #expect("\(error)".contains(setting), "\(kind?.rawValue ?? "call"): \(error)")
            }
        }
    }
}
