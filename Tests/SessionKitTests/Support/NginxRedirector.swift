import Foundation
import LoopbackNginx
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A real nginx (Debian's `nginx-light`) with two loopback origins, each logging the credentials it received:
///
/// - **A**, `http://127.0.0.1:<a>`: `/same/<status>` redirects to A's `/land`, `/cross/<status>` to B's `/land`,
///   `/relative/<status>` to `/land` by a relative `Location`, `/chain` to B's `/back` (which comes back to A),
///   `/loop` to itself, `/cross/unauthorized` to B's `/unauthorized` (a 401); `/set-cookie` sets a cookie for A.
/// - **B**, `http://localhost:<b>` (another host name and port): answers everything 200, except `/back` (a 302
///   to A's `/land`) and `/unauthorized` (401).
///
/// No `https` origin: FoundationNetworking on Linux trusts only the system's certificate store (the variable that
/// names another is read on Android only), so a test cannot trust a loopback certificate without changing the
/// machine; the `https` to `http` rule is tested at its decision function (`RedirectDecisionTests`).
///
/// Every origin logs, per request, its port, method, URI and the `Authorization`, `Cookie`,
/// `Proxy-Authorization`, `X-Api-Key` and `DPoP` fields it received, into a log of its own: the test reads what
/// the server saw, not what the client says it sent.
///
/// nginx is started by ``LoopbackNginx``; a missing one fails the suite under `scripts/test`.
final class NginxRedirector {
    /// One logged request.
    struct LogEntry: Sendable, Equatable {
        let method: String
        let uri: String
        let authorization: String
        let cookie: String
        let proxyAuthorization: String
        let apiKey: String
        let dpop: String

        /// The credential fields it carried (nginx logs an absent field as `-`).
        var credentials: [String] {
            [authorization, cookie, proxyAuthorization, apiKey, dpop].filter { $0 != "-" }
        }
    }

    /// The redirect statuses every origin answers.
    static let statuses = [301, 302, 303, 307, 308]

    static var shouldRun: Bool { LoopbackNginx.shouldRun }

    private let nginx: LoopbackNginx

    private init(_ nginx: LoopbackNginx) {
        self.nginx = nginx
    }

    func a(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(nginx.ports[0])\(path)")! }
    func b(_ path: String) -> URL { URL(string: "http://localhost:\(nginx.ports[1])\(path)")! }

    /// What origin `origin` (`"a"` or `"b"`) logged for the requests answered so far.
    ///
    /// nginx writes a request's log line after it has sent the answer, so a client can read the log before the
    /// line of a request it has had its answer to. So this first sends a fence request of its own to the origin
    /// and waits (bounded) until the fence's line is there: nginx runs one worker, which finishes each request,
    /// its log line included, before it reads the next, so every earlier line is there too. Fence lines are left
    /// out of what it returns.
    func log(of origin: String) async -> [LogEntry] {
        let fence = "/sessionkit-fence-\(UUID().uuidString)"
        let url = origin == "a" ? a(fence) : b(fence)
        let bare = URLSession(configuration: .ephemeral)
        defer { bare.invalidateAndCancel() }
        _ = try? await bare.data(for: URLRequest(url: url))
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        var entries = read(origin)
        while !entries.contains(where: { $0.uri == fence }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
            entries = read(origin)
        }
        #expect(entries.contains { $0.uri == fence }, "nginx did not log the fence request within 5 s")
        return entries.filter { !$0.uri.hasPrefix("/sessionkit-fence-") }
    }

    private func read(_ origin: String) -> [LogEntry] {
        nginx.log("\(origin).log", fields: 7).map { fields in
            LogEntry(
                method: fields[0], uri: fields[1], authorization: fields[2], cookie: fields[3],
                proxyAuthorization: fields[4], apiKey: fields[5], dpop: fields[6])
        }
    }

    /// Runs `body` with nginx serving the two origins, and stops nginx after.
    static func withRunning<Result>(_ body: (NginxRedirector) async throws -> Result) async throws -> Result {
        try await LoopbackNginx.withRunning(
            ports: 2,
            configuration: { directory, ports in configuration(directory: directory, ports: (ports[0], ports[1])) },
            { nginx in try await body(NginxRedirector(nginx)) })
    }

    private static func configuration(directory: URL, ports: (a: Int, b: Int)) -> String {
        let root = directory.path
        let a = "http://127.0.0.1:\(ports.a)"
        let b = "http://localhost:\(ports.b)"
        let redirects = statuses.map { status in
            """
                location = /same/\(status) { return \(status) \(a)/land; }
                location = /cross/\(status) { return \(status) \(b)/land; }
                location = /relative/\(status) { return \(status) /land; }
            """
        }.joined(separator: "\n")
        return """
            \(LoopbackNginx.mainDirectives(root: root, connections: 256))
            http {
              log_format credentials '$request_method\t$request_uri\t$http_authorization\t$http_cookie\t$http_proxy_authorization\t$http_x_api_key\t$http_dpop';
            \(LoopbackNginx.temporaryPaths(root: root))
              absolute_redirect off;
              server {
                listen 127.0.0.1:\(ports.a);
                server_name 127.0.0.1;
                access_log \(root)/a.log credentials;
            \(redirects)
                location = /chain { return 302 \(b)/back; }
                location = /loop { return 302 /loop; }
                location = /cross/unauthorized { return 302 \(b)/unauthorized; }
                location = /set-cookie { add_header Set-Cookie "a_session=cookie-of-a; Path=/"; return 200 "set"; }
                location / { return 200 "origin a"; }
              }
              server {
                listen 127.0.0.1:\(ports.b);
                server_name localhost;
                access_log \(root)/b.log credentials;
                location = /back { return 302 \(a)/land; }
                location = /unauthorized { return 401; }
                location / { return 200 "origin b"; }
              }
            }

            """
    }
}
