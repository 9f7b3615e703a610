import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The project's django-oauth-toolkit server, as `scripts/test` starts it (`SESSIONKIT_AUTH_SERVER_URL`,
/// `SESSIONKIT_REQUIRE_AUTH_SERVER=1`): the few calls the audit tests need. SessionKitTests' fixture
/// (`Tests/SessionKitTests/Support/AuthorizationServerFixture.swift`) documents the server; this target cannot import
/// it.
struct AuthServer: Sendable {
    /// A failure of the server or of this helper; never contains a token.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The public client of the password grant.
    static let clientID = "password-client"

    /// The server `scripts/test` started, or `nil`.
    static var current: AuthServer? {
        let environment = ProcessInfo.processInfo.environment
        let state = environment["SESSIONKIT_AUTH_SERVER_STATE"].map { URL(fileURLWithPath: $0) }
        // The state directory's url follows a restart that had to move the server.
        if let state, let text = try? String(contentsOf: state.appendingPathComponent("url"), encoding: .utf8),
            let url = URL(string: text.trimmingCharacters(in: .whitespacesAndNewlines)), url.host != nil
        {
            return AuthServer(baseURL: url)
        }
        guard let text = environment["SESSIONKIT_AUTH_SERVER_URL"], let url = URL(string: text), url.host != nil
        else { return nil }
        return AuthServer(baseURL: url)
    }

    /// Whether a missing server fails the suite.
    static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_AUTH_SERVER"] == "1" }

    /// Whether suites that need the server should run.
    static var shouldRun: Bool { current != nil || isRequired }

    /// The server, or an error saying how to get one.
    static func required() throws -> AuthServer {
        guard let current else {
            throw Failure(
                description: "SESSIONKIT_REQUIRE_AUTH_SERVER=1 but SESSIONKIT_AUTH_SERVER_URL is not set: "
                    + "scripts/auth-server did not start, or the tests run outside scripts/test")
        }
        return current
    }

    let baseURL: URL

    /// The absolute URL of `path`.
    func url(_ path: String) -> URL { URL(string: baseURL.absoluteString + path)! }

    /// A new user of this test's own, signed in with the password grant: its username, access and refresh token.
    func signInNewUser() async throws -> (username: String, access: String, refresh: String) {
        let user = try await json("POST", "/test/users", body: Data("{}".utf8))
        guard let username = user["username"] as? String, let password = user["password"] as? String else {
            throw Failure(description: "POST /test/users gave no user")
        }
        let form = "grant_type=password&client_id=\(Self.clientID)&username=\(username)&password=\(password)"
        var request = URLRequest(url: url("/o/token/"))
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(form.utf8)
        let (data, status) = try await send(request)
        guard status == 200, let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let access = object["access_token"] as? String, let refresh = object["refresh_token"] as? String
        else { throw Failure(description: "the password grant answered \(status)") }
        return (username, access, refresh)
    }

    /// Sets `/test/control` keys for `username` only.
    func control(username: String, _ values: [String: Any]) async throws {
        var body = values
        body["username"] = username
        _ = try await json("POST", "/test/control", body: JSONSerialization.data(withJSONObject: body))
    }

    /// `GET /api/me` with `accessToken`: the status.
    func meStatus(accessToken: String) async throws -> Int {
        var request = URLRequest(url: url("/api/me"))
        request.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization")
        return try await send(request).1
    }

    private func json(_ method: String, _ path: String, body: Data) async throws -> [String: Any] {
        var request = URLRequest(url: url(path))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = body
        let (data, status) = try await send(request)
        guard (200..<300).contains(status), let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { throw Failure(description: "\(method) \(path) answered \(status)") }
        return object
    }

    private func send(_ request: URLRequest) async throws -> (Data, Int) {
        var request = request
        request.timeoutInterval = 30
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        return (data, (response as? HTTPURLResponse)?.statusCode ?? 0)
    }
}
