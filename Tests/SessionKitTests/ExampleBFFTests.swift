import Foundation
import LoopbackNginx
import LoopbackPostgres
import SessionKit
import SessionKitPostgres
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The example backend-for-frontend (`Sources/SessionKitExampleBFF`, issue 51): three instances on one shared store
/// (PostgreSQL, and a `FileCredentialStore` directory) behind a real nginx that sends each request to the next
/// instance, a browser played by the test that keeps its cookie and follows every redirect by hand, and
/// django-oauth-toolkit as the provider.
@Suite(
    .enabled(if: AuthorizationServerFixture.shouldRun && LoopbackNginx.shouldRun && LoopbackPostgres.shouldRun),
    .timeLimit(.minutes(TimeLimit.heavy)))
struct ExampleBFFTests {
    typealias Fixture = AuthorizationServerFixture

    @Test(.timeLimit(.minutes(TimeLimit.heavy)), arguments: Fleet.Store.allCases)
    func aBrowserSignsInCallsEveryInstanceAndASignOutOnOneIsRefusedByAll(_ store: Fleet.Store) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        try await Fleet.withRunning(server, store: store) { fleet in
            var browser = Browser()
            // Given a signed-in browser: /login → the provider → /callback → /, each hop checked.
            let login = try await browser.send("GET", fleet.url("/login"))
            #expect(login.status == 302)
            #expect(login.header("Set-Cookie") == nil)
            let authorize = try #require(login.header("Location").flatMap(URLComponents.init(string:)))
            let query = Dictionary(
                (authorize.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
            #expect(authorize.path == "/o/authorize/")
            #expect(query["code_challenge_method"] == "S256")
            #expect(query["code_challenge"]?.isEmpty == false && query["nonce"]?.isEmpty == false)
            #expect(query["redirect_uri"] == fleet.url("/callback").absoluteString)
            let callback = try await server.followAuthorization(try #require(authorize.url), as: user.username)
            #expect(callback.port == fleet.nginxPort && callback.path == "/callback")
            let signedIn = try await browser.send("GET", callback)
            #expect(signedIn.status == 302)
            #expect(signedIn.header("Location") == "/")
            let setCookie = try #require(signedIn.header("Set-Cookie"))
            for attribute in ["Path=/", "HttpOnly", "SameSite=Lax"] { #expect(setCookie.contains(attribute)) }
            let cookie = try #require(browser.cookie)

            // When it calls the API through nginx: every instance serves it, with the user's data.
            var instances: Set<String> = []
            for _ in 0..<12 {
                let me = try await browser.send("GET", fleet.url("/api/me"))
                #expect(me.status == 200)
                #expect(me.string("preferred_username") == user.username)
                instances.insert(me.header("X-Instance") ?? "?")
            }
            #expect(instances == ["1", "2", "3"])

            // The cookie is no token, holds none, and is no JWT: the tokens are in the store, on the server.
            let account = try #require(try await fleet.store.accounts().first)
            let record = try #require(try await fleet.store.load(for: account))
            let tokens = [record.accessToken, record.refreshToken, record.idToken].compactMap { $0 }.filter {
                !$0.isEmpty
            }
            #expect(tokens.count >= 2, "the shared record holds the access and refresh tokens")
            for token in tokens { #expect(!cookie.contains(token) && !token.contains(cookie)) }
            #expect(cookie.split(separator: ".").count == 1, "a JWT has three dot-separated parts")
            if let database = fleet.database {
                // Instances on several machines share no directory: the cookie table is the database's, and it holds
                // the cookie's hash, never the cookie.
                let hashes = try await LoopbackPostgres.onThread {
                    let connection = try PostgresConnection(connectionString: database)
                    defer { connection.close() }
                    return try connection.execute("SELECT cookie_hash FROM bff_cookies").rows.compactMap {
                        $0.first ?? nil
                    }
                }
                #expect(hashes.count == 1 && !hashes.contains(cookie))
                #expect(!FileManager.default.fileExists(atPath: fleet.shared.appendingPathComponent("cookies").path))
            }
            #expect(cookie.count == 43)
            for port in fleet.instancePorts { #expect(try await fleet.liveSessions(port: port) == 1) }

            // Then a sign-out on instance 1 ends the live sessions of instances 2 and 3 by the store's notice, before
            // any request reaches them, and every instance refuses the cookie.
            let signOut = try await browser.send("POST", fleet.url("/logout", port: fleet.instancePorts[0]))
            #expect(signOut.status == 204)
            #expect(signOut.header("Set-Cookie")?.contains("Max-Age=0") == true)
            #expect(try await fleet.store.load(for: account) == nil)
            for port in fleet.instancePorts.dropFirst() {
                #expect(try await fleet.waitForNoLiveSession(port: port), "instance on \(port) still has a session")
            }
            for port in fleet.instancePorts {
                let refused = try await browser.send("GET", fleet.url("/api/me", port: port), cookie: cookie)
                #expect(refused.status == 401)
            }
            for _ in 0..<3 {
                #expect(try await browser.send("GET", fleet.url("/api/me"), cookie: cookie).status == 401)
            }
            // The provider no longer honours the tokens: sign-out revoked them.
            #expect(try await server.me(accessToken: record.accessToken ?? "").status == 401)
        }
    }

    @Test(.timeLimit(.minutes(TimeLimit.heavy)), arguments: Fleet.Store.allCases)
    func aForgedCookieAndACallbackWithAnotherStateAreRefused(_ store: Fleet.Store) async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        try await Fleet.withRunning(server, store: store) { fleet in
            var browser = Browser()
            let forged = try await browser.send("GET", fleet.url("/api/me"), cookie: "not-a-session-anyone-set")
            #expect(forged.status == 401)

            let login = try await browser.send("GET", fleet.url("/login"))
            let authorize = try #require(login.header("Location").flatMap(URL.init(string:)))
            let callback = try await server.followAuthorization(authorize, as: user.username)
            var tampered = try #require(URLComponents(url: callback, resolvingAgainstBaseURL: false))
            tampered.queryItems = tampered.queryItems?.map {
                $0.name == "state" ? URLQueryItem(name: "state", value: "another-state") : $0
            }
            let refused = try await browser.send("GET", try #require(tampered.url))
            #expect(refused.status == 400)
            #expect(refused.header("Set-Cookie") == nil)
            #expect(browser.cookie == nil)
            #expect(try await fleet.store.accounts().isEmpty, "no session was made")
        }
    }
}

/// A browser as far as this server needs one: it keeps the one cookie the server sets and follows no redirect.
private struct Browser {
    private(set) var cookie: String?

    /// Sends `method` to `url` with the kept cookie (or `cookie`), keeping what `Set-Cookie` sets or clears.
    mutating func send(_ method: String, _ url: URL, cookie override: String? = nil) async throws
        -> AuthorizationServerFixture.Response
    {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpShouldHandleCookies = false
        if let value = override ?? cookie { request.setValue("session=\(value)", forHTTPHeaderField: "Cookie") }
        let response = try await AuthorizationServerFixture.current!.send(request)
        if override == nil, let set = response.header("Set-Cookie"), set.hasPrefix("session=") {
            let value = set.dropFirst("session=".count).prefix { $0 != ";" }
            cookie = set.contains("Max-Age=0") || value.isEmpty ? nil : String(value)
        }
        return response
    }
}

/// Three instances of the example on one shared store and directory, and nginx in front sending requests round-robin.
struct Fleet {
    /// Where the instances keep the credential records.
    enum Store: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case postgres, file
        var testDescription: String { rawValue }
    }

    let nginxPort: Int
    let instancePorts: [Int]
    /// The store the instances share, opened by the test to read what they keep.
    let store: any CredentialStore
    /// The directory the instances share.
    let shared: URL
    /// The database's connection string, for the PostgreSQL store: the pending sign-ins and the cookie table are
    /// its tables then.
    var database: String?

    func url(_ path: String, port: Int? = nil) -> URL {
        URL(string: "http://127.0.0.1:\(port ?? nginxPort)\(path)")!
    }

    /// How many live sessions the instance on `port` holds (`GET /health`).
    func liveSessions(port: Int) async throws -> Int {
        let health = try await AuthorizationServerFixture.current!.send(URLRequest(url: url("/health", port: port)))
        return try #require(health.json?["sessions"] as? Int)
    }

    /// Asks the instance on `port` until it holds no live session, for 5 seconds at most; no request but these
    /// reaches it meanwhile.
    func waitForNoLiveSession(port: Int) async throws -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while ContinuousClock.now < deadline {
            if try await liveSessions(port: port) == 0 { return true }
        }
        return false
    }

    static func withRunning(
        _ server: AuthorizationServerFixture, store: Store, _ body: (Fleet) async throws -> Void
    ) async throws {
        guard store == .postgres else {
            return try await withRunning(server, database: nil) { ports, shared in
                let store = try FileCredentialStore(
                    directory: shared.appendingPathComponent("credentials"), coordinatingProcesses: false)
                try await body(
                    Fleet(nginxPort: ports.nginx, instancePorts: ports.instances, store: store, shared: shared))
            }
        }
        try await LoopbackPostgres.withRunning { cluster in
            // The connection string holds the password: the instances get it in their environment, never on a
            // command line.
            try await withRunning(server, database: cluster.connectionString) { ports, shared in
                let store = try await PostgresCredentialStore.connect(to: cluster.connectionString)
                defer { store.close() }
                try await body(
                    Fleet(
                        nginxPort: ports.nginx, instancePorts: ports.instances, store: store, shared: shared,
                        database: cluster.connectionString))
            }
        }
    }

    private static func withRunning(
        _ server: AuthorizationServerFixture, database: String?,
        _ body: (_ ports: (nginx: Int, instances: [Int]), _ shared: URL) async throws -> Void
    ) async throws {
        let executable = try #require(
            ChildProcess.exampleBFF,
            "SessionKitExampleBFF was not found next to the test bundle; build it, or set SESSIONKIT_EXAMPLE_BFF")
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("sessionkit-bff-\(UUID())")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: shared) }
        var children: [ChildProcess] = []
        defer { for child in children { _ = child.kill() } }
        var instancePorts: [Int] = []
        try await LoopbackNginx.withRunning(
            ports: 1,
            configuration: { directory, ports in
                // The instances need the redirect URI, which names nginx's port: they start once nginx's port is
                // chosen, and nginx's configuration names theirs. (A retry of this closure starts them afresh.)
                for child in children { _ = child.kill() }
                children = []
                instancePorts = []
                for instance in 1...3 {
                    guard
                        let child = try? ChildProcess(
                            executable,
                            [
                                "--issuer", server.url("/o").absoluteString, "--client-id", "oidc-client",
                                "--redirect-uri", "http://127.0.0.1:\(ports[0])/callback",
                                "--state-dir", shared.path, "--instance", "\(instance)",
                            ],
                            environment: ProcessInfo.processInfo.environment.merging(
                                ["SESSIONKIT_BFF_DATABASE": database].compactMapValues { $0 }, uniquingKeysWith: { $1 })
                        )
                    else { continue }
                    children.append(child)
                    let line = child.readLine() ?? ""
                    if let port = Int(line.dropFirst("listening ".count)), line.hasPrefix("listening ") {
                        instancePorts.append(port)
                    }
                }
                let upstreams = instancePorts.map { "    server 127.0.0.1:\($0);" }.joined(separator: "\n")
                return """
                    \(LoopbackNginx.mainDirectives(root: directory.path, connections: 64))
                    http {
                      access_log off;
                    \(LoopbackNginx.temporaryPaths(root: directory.path))
                      upstream bff {
                    \(upstreams)
                      }
                      server {
                        listen 127.0.0.1:\(ports[0]);
                        location / { proxy_pass http://bff; proxy_set_header Host $http_host; }
                      }
                    }
                    """
            },
            { nginx in
                try #require(instancePorts.count == 3, "an instance of the example did not start")
                try await body((nginx.ports[0], instancePorts), shared)
            })
    }
}
