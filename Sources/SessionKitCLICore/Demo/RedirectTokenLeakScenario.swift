import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Alice's profile request goes to origin A, which answers with a redirect to origin B; the client follows it.
///
/// A is `http://127.0.0.1:<port>`, B is `http://localhost:<another port>`: another host and another port, so
/// another origin (RFC 6454), as a CDN or a storage bucket an API redirects to would be. B keeps its own log of
/// the requests it received: the verdict is read from there, never from what the client says it sent.
enum RedirectTokenLeakScenario {
    static let id = "redirect-token-leak"

    static let scenario = DemoScenario(id: id) { _ in
        ScenarioResult(id: id, naive: try await naive(), sessionKit: try await withSessionKit())
    }

    /// The path on A that redirects, and the one on B it redirects to.
    static let redirectingPath = "/me"
    static let landingPath = "/land"

    /// Runs `body` with origin A, whose `GET /me` answers `302 Location: http://localhost:<B's port>/land`, and
    /// origin B, which answers every `GET /land` with a small JSON body.
    static func withOrigins<T>(_ body: (_ a: LocalServer, _ b: LocalServer) async throws -> T) async throws -> T {
        try await LocalServer.withRunning { b in
            b.route("GET", landingPath) { _ in .json(#"{"landed":true}"#) }
            return try await LocalServer.withRunning { a in
                let location = "http://localhost:\(b.port)\(landingPath)"
                a.route("GET", redirectingPath) { _ in
                    LocalServer.Response(status: 302, headers: [("Location", location)])
                }
                return try await body(a, b)
            }
        }
    }

    /// What B's own log shows: how many requests reached it, and how many of those carried `token` or any other
    /// `Authorization` field. The token itself is never part of the text.
    ///
    /// - Parameters:
    ///   - b: Origin B, whose log is read.
    ///   - token: Alice's access token.
    ///   - client: Who sent the request to A, for the text ("URLSession", "the session").
    ///   - status: The status of the answer the client returned.
    /// - Returns: Leaked when a request that reached B carried the token or any `Authorization` field.
    static func verdict(origin b: LocalServer, token: String, client: String, status: Int) -> Verdict {
        let requests = b.requests.filter { $0.path == landingPath }
        let withToken = requests.filter { $0.bearerToken == token }.count
        let withAuthorization = requests.filter { $0.header("Authorization") != nil }.count
        let origin = "origin B (localhost:\(b.port))"
        let received = DemoSupport.count(requests.count, "request")
        let detail: String
        if requests.isEmpty {
            detail = "\(client) did not follow A's 302 (answer \(status)); \(origin) received no request"
        } else if withToken > 0 {
            detail =
                "\(client) followed A's 302 to another origin; \(origin) received \(received), \(withToken) with "
                + "the bearer token, by its own log"
        } else if withAuthorization > 0 {
            detail =
                "\(client) followed A's 302 to another origin; \(origin) received \(received), "
                + "\(withAuthorization) with an Authorization field, by its own log"
        } else {
            detail =
                "\(client) followed A's 302 to another origin; \(origin) received \(received), none with "
                + "Authorization, by its own log: the token stayed with origin A"
        }
        return Verdict(leaked: withToken > 0 || withAuthorization > 0, detail: detail)
    }

    /// A plain `URLSession` with the token set by hand: it follows the redirect, and copies the headers.
    static func naive() async throws -> Verdict {
        try await withOrigins { a, b in
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.finishTasksAndInvalidate() }
            let token = DemoSupport.tokens("alice").accessToken
            let (_, response) = try await urlSession.data(for: DemoSupport.get(a, redirectingPath, token: token))
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            return verdict(origin: b, token: token, client: "URLSession", status: status)
        }
    }

    /// A `UserSession` of Alice's: it adds her token to the request for A, and follows the redirect itself.
    static func withSessionKit() async throws -> Verdict {
        try await withOrigins { a, b in
            let tokens = DemoSupport.tokens("alice")
            let session = UserSession(
                account: DemoSupport.alice, tokens: tokens,
                configuration: UserSession.Configuration(retryPolicy: .never))
            defer { session.end() }
            let (_, response) = try await session.data(for: DemoSupport.get(a, redirectingPath))
            return verdict(origin: b, token: tokens.accessToken, client: "the session", status: response.statusCode)
        }
    }
}
