import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What the scenarios share: the demo's users, their tokens, and the small steps every scenario takes.
///
/// Tokens are `token-<user>[-<n>]`, so a server handler can tell from the `Authorization` header alone whose a
/// request is, and the server's request log can be checked after the fact.
enum DemoSupport {
    static let issuer = "https://id.sessionkit.demo"
    static let alice = Account(issuer: issuer, subject: "alice", displayName: "Alice")
    static let bob = Account(issuer: issuer, subject: "bob", displayName: "Bob")

    /// The user a request's bearer token names, or `nobody`.
    static func user(of request: LocalServer.Request) -> String {
        user(ofToken: request.bearerToken)
    }

    /// The user a `token-<user>[-<n>]` names, or `nobody`.
    static func user(ofToken token: String?) -> String {
        guard let token, token.hasPrefix("token-") else { return "nobody" }
        return String(token.dropFirst("token-".count).prefix { $0 != "-" })
    }

    /// A token set for `user` (`token-<user>`, `refresh-<user>`), with no stated lifetime.
    static func tokens(_ user: String) -> TokenSet {
        TokenSet(accessToken: "token-\(user)", refreshToken: "refresh-\(user)")
    }

    /// A GET of `path` on `server`, without credentials (a session adds its own).
    static func get(_ server: LocalServer, _ path: String) -> URLRequest {
        URLRequest(url: server.url(path))
    }

    /// A GET of `path` with `Authorization: Bearer <token>`, the way naive code builds it.
    static func get(_ server: LocalServer, _ path: String, token: String) -> URLRequest {
        var request = URLRequest(url: server.url(path))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        return request
    }

    /// A POST of `body` to `path`, without credentials.
    static func post(_ server: LocalServer, _ path: String, body: String) -> URLRequest {
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        return request
    }

    /// A URLSession as apps make them: ephemeral, shared by everything the app does, whoever is signed in.
    static func appURLSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpMaximumConnectionsPerHost = 64
        return URLSession(configuration: configuration)
    }

    /// A session manager with an in-memory credential store.
    static func manager(
        store: any CredentialStore = InMemoryCredentialStore(),
        tokenEndpoint: (any TokenEndpoint)? = nil,
        revoker: (any TokenRevoker)? = nil
    ) -> SessionManager {
        SessionManager(
            configuration: .init(
                store: store,
                tokenEndpoint: tokenEndpoint,
                revoker: revoker,
                sessionConfiguration: UserSession.Configuration(retryPolicy: .never)
            )
        )
    }

    /// The body as text.
    static func text(_ data: Data) -> String { String(decoding: data, as: UTF8.self) }

    /// The code of a SessionKit error, or the type of another, for a detail line.
    static func describe(_ error: any Error) -> String {
        if let error = error as? SessionError { return error.code.description }
        if let error = error as? URLError { return "URLError \(error.code.rawValue)" }
        return String(describing: type(of: error))
    }

    /// `["alice's loan"]`: a list as the screen shows it (Swift's description would escape the apostrophe).
    static func list(_ items: [String]) -> String {
        "[" + items.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
    }

    /// `1 request`, `2 requests`.
    static func count(_ n: Int, _ noun: String) -> String {
        "\(n) \(noun)\(n == 1 ? "" : "s")"
    }
}

/// A value several tasks update under a lock.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Lock<Value>

    init(_ value: Value) { storage = Lock(value) }

    var value: Value { storage.withLock { $0 } }

    @discardableResult
    func update<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        storage.withLock { body(&$0) }
    }
}
