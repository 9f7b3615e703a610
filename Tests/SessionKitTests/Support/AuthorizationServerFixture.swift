import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The real OAuth 2.0 authorization server (django-oauth-toolkit) that `scripts/test` starts on loopback, and
/// plain-HTTP helpers to drive it; Tests/AuthorizationServer/README.md documents the server.
///
/// `scripts/test` exports `SESSIONKIT_AUTH_SERVER_URL`, `SESSIONKIT_AUTH_SERVER_CONTROL` (the path of
/// `scripts/auth-server`), `SESSIONKIT_AUTH_SERVER_STATE` (its state directory) and
/// `SESSIONKIT_REQUIRE_AUTH_SERVER=1`. ``current`` is `nil` when the URL is not set.
///
/// The helpers use their own ephemeral `URLSession` per call, never SessionKit, so they stay an independent
/// oracle for the code under test. They never follow redirects.
///
/// - Important: Tests run in parallel against one shared server. A test that reads the request log or injects
///   faults uses a user of its own (``createUser()``) and scopes ``Control`` to that user; a test that needs other
///   server settings, or restarts the server, uses ``withPrivateServer(settings:_:)``, never ``restart(settings:)``
///   on the shared one.
struct AuthorizationServerFixture: Sendable {
    /// A user the server knows, with the password of the password grant.
    struct User: Sendable, Hashable {
        /// The login name, also what `/api/me` answers.
        let username: String
        /// The password for the password grant.
        let password: String
    }

    /// A successful token response.
    struct Tokens: Sendable, CustomStringConvertible {
        /// The access token.
        let access: String
        /// The refresh token, when the server issued one.
        let refresh: String?
        /// `expires_in`, in seconds.
        let expiresIn: Int?
        /// `scope`.
        let scope: String?

        var description: String { "Tokens(access: <redacted>, refresh: <redacted>, expiresIn: \(expiresIn ?? -1))" }
    }

    /// An HTTP response as the server sent it.
    struct Response: Sendable {
        /// The status code.
        let status: Int
        /// The header fields, keyed by lower-cased name.
        let headers: [String: String]
        /// The body.
        let body: Data

        /// The value of the header field `name`, whatever its case.
        func header(_ name: String) -> String? { headers[name.lowercased()] }

        /// The body as a JSON object, or `nil` when it is not one.
        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }

        /// The string member `name` of the JSON body, such as `error` or `access_token`.
        func string(_ name: String) -> String? { json?[name] as? String }
    }

    /// One request the server logged (`GET /test/log`): requests to `/api/`, `/o/token/`, `/o/revoke_token/`,
    /// `/o/device-authorization/` and `/o/introspect/`.
    struct LogEntry: Sendable, Decodable {
        /// Arrival order, across restarts.
        let seq: Int
        /// Arrival time, seconds since 1970.
        let time: Double
        /// When the server finished the response (after any injected delay), seconds since 1970.
        let finished: Double
        /// The HTTP method.
        let method: String
        /// The path, such as `/o/token/`.
        let path: String
        /// The status the server produced (also when the response was dropped).
        let status: Int
        /// Whether `drop_next_token_response` swallowed the response.
        let dropped: Bool
        /// The user the request acted for, resolved from its token, code or username before processing.
        let username: String?
        /// `/api/`: the bearer token of the `Authorization` header.
        let bearerToken: String?
        /// `/o/token/`: the `grant_type`.
        let grantType: String?
        /// `/o/token/`: the `refresh_token` presented.
        let refreshToken: String?
        /// `/o/revoke_token/`: the `token` to revoke.
        let token: String?
        /// `/o/revoke_token/`: the `token_type_hint`.
        let tokenTypeHint: String?
        /// The `client_id` of the form, if any.
        let clientID: String?

        private enum CodingKeys: String, CodingKey {
            case seq, time, finished, method, path, status, dropped, username, token
            case bearerToken = "bearer_token"
            case grantType = "grant_type"
            case refreshToken = "refresh_token"
            case tokenTypeHint = "token_type_hint"
            case clientID = "client_id"
        }
    }

    /// Faults to inject (`POST /test/control`); fields left `nil` keep their current value.
    struct Control: Sendable, Encodable {
        /// Scope the settings to requests acting for this user; `nil` sets the global ones.
        var username: String?
        /// The token endpoint holds its answer this long after processing: the refresh has committed (rotated)
        /// on the server and the client is still waiting.
        var tokenDelayMilliseconds: Int?
        /// The token endpoint waits this long before processing.
        var tokenDelayBeforeMilliseconds: Int?
        /// `/api/` requests wait this long before their token is checked.
        var apiDelayMilliseconds: Int?
        /// The next token request is processed (a refresh rotates) and its connection is closed without an answer.
        var dropNextTokenResponse: Bool?
        /// Clears every setting, global and per user, before applying these.
        var reset: Bool?

        private enum CodingKeys: String, CodingKey {
            case username, reset
            case tokenDelayMilliseconds = "token_delay_ms"
            case tokenDelayBeforeMilliseconds = "token_delay_before_ms"
            case apiDelayMilliseconds = "api_delay_ms"
            case dropNextTokenResponse = "drop_next_token_response"
        }
    }

    /// A failure of the fixture itself: the server is missing, or answered a helper unexpectedly.
    struct FixtureError: Error, CustomStringConvertible {
        /// What went wrong; never contains a token.
        let description: String

        init(_ description: String) { self.description = description }
    }

    /// The public client of the password grant (test only).
    static let passwordClientID = "password-client"
    /// The public client of the authorization-code grant; PKCE required, consent skipped.
    static let pkceClientID = "pkce-client"
    /// The public client of the device authorization grant.
    static let deviceClientID = "device-client"
    /// The redirect URI registered for ``pkceClientID``.
    static let redirectURI = URL(string: "http://127.0.0.1/callback")!
    /// A fixture user.
    static let alice = User(username: "alice", password: "alice-password")
    /// Another fixture user.
    static let bob = User(username: "bob", password: "bob-password")

    /// The server `scripts/test` started, or `nil` when `SESSIONKIT_AUTH_SERVER_URL` is not set.
    static var current: AuthorizationServerFixture? {
        let environment = ProcessInfo.processInfo.environment
        guard let text = environment["SESSIONKIT_AUTH_SERVER_URL"], let url = URL(string: text), url.host != nil
        else { return nil }
        return AuthorizationServerFixture(
            configuredBaseURL: url,
            controlScript: environment["SESSIONKIT_AUTH_SERVER_CONTROL"].map { URL(fileURLWithPath: $0) },
            stateDirectory: environment["SESSIONKIT_AUTH_SERVER_STATE"].map { URL(fileURLWithPath: $0) }
        )
    }

    /// Whether a missing server is a failure (`SESSIONKIT_REQUIRE_AUTH_SERVER=1`, set by `scripts/test`).
    static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_AUTH_SERVER"] == "1" }

    /// Whether suites that need the server should run: it is there, or it must be (and its absence then fails).
    static var shouldRun: Bool { current != nil || isRequired }

    /// The server, or an error saying how to get one.
    static func required() throws -> AuthorizationServerFixture {
        guard let server = current else {
            throw FixtureError(
                "SESSIONKIT_REQUIRE_AUTH_SERVER=1 but SESSIONKIT_AUTH_SERVER_URL is not set: "
                    + "scripts/auth-server did not start, or the tests run outside scripts/test")
        }
        return server
    }

    private let configuredBaseURL: URL
    /// Whether ``withPrivateServer(settings:_:)`` started this server: it then ends with this test process.
    private var isPrivate = false
    /// `scripts/auth-server`, when known.
    let controlScript: URL?
    /// The server's state directory (database, pid, port, url, request log), when known.
    let stateDirectory: URL?

    /// The server's base URL, such as `http://127.0.0.1:54321`.
    ///
    /// Read from the state directory when there is one, so a restart that had to move the server is followed.
    var baseURL: URL {
        if let stateDirectory,
            let text = try? String(contentsOf: stateDirectory.appendingPathComponent("url"), encoding: .utf8),
            let url = URL(string: text.trimmingCharacters(in: .whitespacesAndNewlines)), url.host != nil
        {
            return url
        }
        return configuredBaseURL
    }

    /// The absolute URL of `path` (which may carry a query) on the server.
    func url(_ path: String) -> URL {
        URL(string: baseURL.absoluteString + path)!
    }

    // MARK: - OAuth endpoints

    /// Posts `form` to the token endpoint `/o/token/` and returns the response, whatever its status.
    func tokenRequest(_ form: [String: String]) async throws -> Response {
        try await send(Self.formRequest(url("/o/token/"), form))
    }

    /// Signs `username` in with the password grant.
    ///
    /// - Throws: ``FixtureError`` when the server does not answer 200 with an access token.
    func passwordGrant(username: String, password: String) async throws -> Tokens {
        let response = try await tokenRequest([
            "grant_type": "password", "client_id": Self.passwordClientID, "username": username, "password": password,
        ])
        return try Self.tokens(from: response)
    }

    /// Signs `user` in with the password grant.
    func passwordGrant(_ user: User) async throws -> Tokens {
        try await passwordGrant(username: user.username, password: user.password)
    }

    /// Presents `refreshToken` to the token endpoint; the response is returned whatever its status.
    func refresh(_ refreshToken: String, clientID: String = passwordClientID) async throws -> Response {
        try await tokenRequest(["grant_type": "refresh_token", "client_id": clientID, "refresh_token": refreshToken])
    }

    /// Revokes `token` (RFC 7009, `/o/revoke_token/`) as `clientID`.
    func revoke(_ token: String, hint: String? = nil, clientID: String = passwordClientID) async throws -> Response {
        var form = ["token": token, "client_id": clientID]
        form["token_type_hint"] = hint
        return try await send(Self.formRequest(url("/o/revoke_token/"), form))
    }

    /// `GET /api/me` with `accessToken` as the bearer token.
    func me(accessToken: String) async throws -> Response {
        var request = URLRequest(url: url("/api/me"))
        request.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization")
        return try await send(request)
    }

    /// Starts a device authorization for ``deviceClientID``; the JSON has `device_code`, `user_code`, `interval`.
    func deviceAuthorization() async throws -> Response {
        try await send(Self.formRequest(url("/o/device-authorization/"), ["client_id": Self.deviceClientID]))
    }

    /// Polls the token endpoint once for `deviceCode`.
    func pollDevice(_ deviceCode: String) async throws -> Response {
        try await tokenRequest([
            "grant_type": "urn:ietf:params:oauth:grant-type:device_code", "client_id": Self.deviceClientID,
            "device_code": deviceCode,
        ])
    }

    /// Runs the browser's part of the authorization-code flow for `user` and returns the authorization code.
    ///
    /// The recipe: `POST /test/login` gives a session cookie for the user; `GET /o/authorize/` with that cookie
    /// answers 302 to `redirectURI` with `code` and `state` (``pkceClientID`` skips the consent form).
    ///
    /// - Parameters:
    ///   - user: The username to sign in as.
    ///   - pkceChallenge: The S256 `code_challenge`.
    ///   - redirectURI: The redirect URI; the server only accepts ``redirectURI``.
    ///   - state: The `state` value; the redirect must carry it back.
    ///   - scope: The scope to ask for.
    /// - Returns: The authorization code.
    /// - Throws: ``FixtureError`` when the server does not redirect with a code and the same state.
    func authorizationCode(
        for user: String, pkceChallenge: String, redirectURI: URL = redirectURI, state: String,
        scope: String = "read write"
    ) async throws -> String {
        let login = try await testRequest("POST", "/test/login", json: ["username": user])
        guard login.status == 200, let cookie = login.string("cookie") else {
            throw FixtureError("POST /test/login answered \(login.status)")
        }
        var components = URLComponents(url: url("/o/authorize/"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "response_type", value: "code"),
            URLQueryItem(name: "client_id", value: Self.pkceClientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI.absoluteString),
            URLQueryItem(name: "code_challenge", value: pkceChallenge),
            URLQueryItem(name: "code_challenge_method", value: "S256"),
            URLQueryItem(name: "state", value: state),
            URLQueryItem(name: "scope", value: scope),
        ]
        var request = URLRequest(url: components.url!)
        request.httpShouldHandleCookies = false
        request.setValue(cookie, forHTTPHeaderField: "Cookie")
        let response = try await send(request)
        guard response.status == 302, let location = response.header("Location"),
            let redirect = URLComponents(string: location)
        else {
            throw FixtureError("GET /o/authorize/ answered \(response.status), not a redirect")
        }
        let parameters = Dictionary(
            (redirect.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
        if let error = parameters["error"] {
            throw FixtureError("the authorization endpoint redirected with error=\(error)")
        }
        guard parameters["state"] == state, let code = parameters["code"], !code.isEmpty else {
            throw FixtureError("the authorization redirect has no code or another state")
        }
        return code
    }

    /// Plays the browser for an authorization URL a client built: signs `user` in and follows the request to the
    /// redirect the server answers with.
    ///
    /// - Parameters:
    ///   - url: The authorization request's URL.
    ///   - user: The username to sign in as.
    /// - Returns: The redirect's URL (the callback, with `code` and `state`, or `error`).
    /// - Throws: ``FixtureError`` when the server does not redirect.
    func followAuthorization(_ url: URL, as user: String) async throws -> URL {
        let login = try await testRequest("POST", "/test/login", json: ["username": user])
        guard login.status == 200, let cookie = login.string("cookie") else {
            throw FixtureError("POST /test/login answered \(login.status)")
        }
        var request = URLRequest(url: url)
        request.httpShouldHandleCookies = false
        request.setValue(cookie, forHTTPHeaderField: "Cookie")
        let response = try await send(request)
        guard response.status == 302, let location = response.header("Location"), let redirect = URL(string: location)
        else { throw FixtureError("the authorization request answered \(response.status), not a redirect") }
        return redirect
    }

    // MARK: - Test API (/test/)

    /// The request log, oldest first; only the requests acting for `username` when given.
    func log(username: String? = nil) async throws -> [LogEntry] {
        var path = "/test/log"
        if let username { path += "?username=" + Self.queryEscaped(username) }
        let response = try await testRequest("GET", path)
        guard response.status == 200 else { throw FixtureError("GET /test/log answered \(response.status)") }
        return try JSONDecoder().decode([LogEntry].self, from: response.body)
    }

    /// Empties the request log, or removes only the entries acting for `username`.
    func clearLog(username: String? = nil) async throws {
        var path = "/test/log/clear"
        if let username { path += "?username=" + Self.queryEscaped(username) }
        try await expectOK(testRequest("POST", path), "POST /test/log/clear")
    }

    /// Applies `control` (`POST /test/control`).
    func control(_ control: Control) async throws {
        var request = URLRequest(url: url("/test/control"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(control)
        try expectOK(await send(request), "POST /test/control")
    }

    /// Creates a user no other test knows (`POST /test/users`), so a test can filter the log and scope faults.
    func createUser() async throws -> User {
        try await createUser(json: [:])
    }

    /// Creates `user` on this server too, with the same name and password: the same login at another issuer.
    func createUser(_ user: User) async throws {
        _ = try await createUser(json: ["username": user.username, "password": user.password])
    }

    private func createUser(json: [String: String]) async throws -> User {
        let response = try await testRequest("POST", "/test/users", json: json)
        guard response.status == 201, let username = response.string("username"),
            let password = response.string("password")
        else { throw FixtureError("POST /test/users answered \(response.status)") }
        return User(username: username, password: password)
    }

    /// Approves (or denies) the pending device authorization with `userCode` as `username`.
    func approveDevice(userCode: String, username: String, approve: Bool = true) async throws {
        let response = try await testRequest(
            "POST", "/test/device/approve",
            json: ["user_code": userCode, "username": username, "action": approve ? "accept" : "deny"])
        try expectOK(response, "POST /test/device/approve")
    }

    /// Makes `accessToken` expired now, so a test needs neither a short lifetime nor a wait.
    func expireAccessToken(_ accessToken: String) async throws {
        try await expectOK(
            testRequest("POST", "/test/tokens/expire", json: ["access_token": accessToken]), "POST /test/tokens/expire")
    }

    /// Revokes every token `username` holds, as an administrator ending the user's sessions would.
    func revokeAllTokens(of username: String) async throws {
        try await expectOK(testRequest("POST", "/test/revoke_user", json: ["username": username]), "revoke_user")
    }

    // MARK: - Lifecycle

    /// Restarts the server with `settings` (others take their defaults): same database, same port.
    ///
    /// Keys: `ACCESS_TOKEN_EXPIRE_SECONDS`, `REFRESH_TOKEN_EXPIRE_SECONDS`, `ROTATE_REFRESH_TOKEN`,
    /// `REFRESH_TOKEN_GRACE_PERIOD_SECONDS`, `REFRESH_TOKEN_REUSE_PROTECTION`, `DEVICE_FLOW_INTERVAL`. Controls
    /// reset; the request log is kept.
    ///
    /// - Important: Every test using this server sees it go away for about a second: restart only a
    ///   ``withPrivateServer(settings:_:)`` server.
    /// - Returns: The base URL, the same as before unless the port was taken meanwhile (``baseURL`` follows it).
    @discardableResult
    func restart(settings: [String: String] = [:]) async throws -> URL {
        guard let controlScript, let stateDirectory else {
            throw FixtureError("restart needs SESSIONKIT_AUTH_SERVER_CONTROL and SESSIONKIT_AUTH_SERVER_STATE")
        }
        let output = try await Self.run(
            controlScript, ["restart", stateDirectory.path] + Self.settingArguments(settings),
            watchingThisProcess: isPrivate)
        guard let url = URL(string: output.trimmingCharacters(in: .whitespacesAndNewlines)), url.host != nil else {
            throw FixtureError("scripts/auth-server restart printed no URL")
        }
        return url
    }

    /// Starts a server of its own for `body`, with `settings`, and stops it when `body` returns or throws.
    ///
    /// For tests that need other settings or a restart without disturbing the tests sharing ``current``.
    /// Takes about a second and a half to start.
    static func withPrivateServer<Result>(
        settings: [String: String] = [:], _ body: (AuthorizationServerFixture) async throws -> Result
    ) async throws -> Result {
        let shared = try required()
        guard let controlScript = shared.controlScript else {
            throw FixtureError("a private server needs SESSIONKIT_AUTH_SERVER_CONTROL")
        }
        let stateDirectory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sessionkit-auth-server-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: stateDirectory) }
        let output = try await run(
            controlScript, ["start", stateDirectory.path] + settingArguments(settings), watchingThisProcess: true)
        do {
            guard let url = URL(string: output.trimmingCharacters(in: .whitespacesAndNewlines)), url.host != nil else {
                throw FixtureError("scripts/auth-server start printed no URL")
            }
            var server = AuthorizationServerFixture(
                configuredBaseURL: url, controlScript: controlScript, stateDirectory: stateDirectory)
            server.isPrivate = true
            let result = try await body(server)
            _ = try await run(controlScript, ["stop", stateDirectory.path])
            return result
        } catch {
            _ = try? await run(controlScript, ["stop", stateDirectory.path])
            throw error
        }
    }

    // MARK: - HTTP

    /// Sends `request` on a fresh ephemeral session that follows no redirect, and returns what the server sent.
    func send(_ request: URLRequest) async throws -> Response {
        var request = request
        request.timeoutInterval = 30
        let session = URLSession(configuration: .ephemeral, delegate: RedirectRefusal(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw FixtureError("not an HTTP response") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return Response(status: http.statusCode, headers: headers, body: data)
    }

    private func testRequest(_ method: String, _ path: String, json: [String: String]? = nil) async throws -> Response {
        var request = URLRequest(url: url(path))
        request.httpMethod = method
        if let json {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
        }
        return try await send(request)
    }

    private func expectOK(_ response: Response, _ what: String) throws {
        guard response.status == 200 else {
            let detail = response.string("error").map { ": \($0)" } ?? ""
            throw FixtureError("\(what) answered \(response.status)\(detail)")
        }
    }

    private static func tokens(from response: Response) throws -> Tokens {
        guard response.status == 200, let json = response.json, let access = json["access_token"] as? String else {
            throw FixtureError("the token endpoint answered \(response.status) \(response.string("error") ?? "")")
        }
        return Tokens(
            access: access, refresh: json["refresh_token"] as? String, expiresIn: json["expires_in"] as? Int,
            scope: json["scope"] as? String)
    }

    private static func formRequest(_ url: URL, _ form: [String: String]) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(
            form.sorted { $0.key < $1.key }.map { "\(queryEscaped($0.key))=\(queryEscaped($0.value))" }
                .joined(separator: "&").utf8)
        return request
    }

    private static func queryEscaped(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    private static func settingArguments(_ settings: [String: String]) -> [String] {
        settings.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    /// Runs the control script and returns its standard output; its output goes to files, not pipes, so a long
    /// log printed on failure cannot fill a pipe nobody reads yet.
    ///
    /// With `watchingThisProcess`, the server it starts exits when this test process does, even if it crashes.
    private static func run(
        _ script: URL, _ arguments: [String], watchingThisProcess: Bool = false
    ) async throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sessionkit-auth-control-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outputURL = directory.appendingPathComponent("stdout")
        let errorURL = directory.appendingPathComponent("stderr")
        guard FileManager.default.createFile(atPath: outputURL.path, contents: nil),
            FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        else { throw FixtureError("cannot create files in \(directory.path)") }
        let output = try FileHandle(forWritingTo: outputURL)
        let errors = try FileHandle(forWritingTo: errorURL)

        let process = Process()
        process.executableURL = script
        process.arguments = arguments
        if watchingThisProcess {
            var environment = ProcessInfo.processInfo.environment
            environment["SESSIONKIT_AUTH_SERVER_WATCH_PID"] = String(ProcessInfo.processInfo.processIdentifier)
            process.environment = environment
        }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                continuation.resume(throwing: error)
            }
        }
        try output.close()
        try errors.close()
        guard status == 0 else {
            let log = (try? String(contentsOf: errorURL, encoding: .utf8)) ?? ""
            throw FixtureError(
                "scripts/auth-server \(arguments.first ?? "") exited with \(status):\n\(log.suffix(4000))")
        }
        return try String(contentsOf: outputURL, encoding: .utf8)
    }
}

/// Makes a session deliver every redirect as the response, so tests see the 302 and its `Location`.
private final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
