import Foundation
import LoopbackNginx
import Testing

/// A real nginx (Debian's `nginx-light`) caching reverse proxy on loopback, started by the suite in a temporary
/// prefix: no root, no port 80, no file outside its directory, one process that is this test's child.
///
/// `scripts/test` installs nginx and sets `SESSIONKIT_REQUIRE_NGINX=1`: a missing nginx then fails the suite
/// instead of skipping it. `SESSIONKIT_NGINX` names another binary.
///
/// Every location proxies to an upstream with `proxy_cache` keyed on the URL (`$scheme$proxy_host$request_uri`),
/// adds `X-Cache-Status: $upstream_cache_status` to every answer, and logs, for every request, what nginx itself
/// says it did: the URI, the query, the `Authorization` it got, `$upstream_cache_status`, and the `X-User` field it
/// sent back (the upstream names the user whose answer it is in `X-User`; a cache hit replays the stored one), the
/// `Range` asked for and the status. Besides, `/files/` serves the files under `directory/www/files` itself (with
/// nginx's own ranges, `ETag` and `If-Range`) to `Authorization: Bearer token-alice` only.
final class NginxProxy {
    /// How a location caches.
    enum CacheSetup: String, Sendable, CaseIterable {
        /// `proxy_cache` honouring the upstream's caching fields (nginx's defaults).
        case honour
        /// `proxy_ignore_headers Cache-Control Expires Set-Cookie Vary` with `proxy_cache_valid 200 1m`: every 200
        /// is cached for a minute, whatever the upstream says (a "cache everything" setup).
        case ignore
    }

    /// One logged request: what nginx says it did.
    struct LogEntry: Sendable, Equatable {
        let uri: String
        let query: String
        let authorization: String
        let cacheStatus: String
        let sentUser: String
        /// The request's `Range`, `-` when it had none.
        let range: String
        /// The status nginx answered.
        let status: String
    }

    /// Whether suites that need nginx should run: it is there, or it must be (``LoopbackNginx/shouldRun``).
    static var shouldRun: Bool { LoopbackNginx.shouldRun }

    private let nginx: LoopbackNginx
    var port: Int { nginx.ports[0] }
    var directory: URL { nginx.directory }

    private init(_ nginx: LoopbackNginx) {
        self.nginx = nginx
    }

    /// The proxy's URL for `path`.
    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// The access log so far.
    func log() -> [LogEntry] {
        nginx.log("access.log", fields: 7).map { fields in
            LogEntry(
                uri: fields[0], query: fields[1], authorization: fields[2], cacheStatus: fields[3], sentUser: fields[4],
                range: fields[5], status: fields[6])
        }
    }

    /// Runs `body` with nginx proxying `/<setup>/…` to `upstream` for each cache setup, and stops nginx after.
    ///
    /// - Parameters:
    ///   - upstream: The origin, `http://127.0.0.1:PORT`.
    ///   - body: The test.
    /// - Returns: What `body` returns.
    /// - Throws: ``LoopbackNginx/Failure`` when nginx is missing or does not start; what `body` throws.
    static func withRunning<Result>(
        upstream: URL, _ body: (NginxProxy) async throws -> Result
    ) async throws -> Result {
        try await LoopbackNginx.withRunning(
            ports: 1, subdirectories: ["tmp", "cache/honour", "cache/ignore", "www/files"],
            configuration: { directory, ports in configuration(directory: directory, port: ports[0], upstream: upstream)
            },
            { nginx in try await body(NginxProxy(nginx)) })
    }

    private static func configuration(directory: URL, port: Int, upstream: URL) -> String {
        let root = directory.path
        let upstreamAddress = "\(upstream.host ?? "127.0.0.1"):\(upstream.port ?? 80)"
        func location(_ setup: CacheSetup) -> String {
            let ignoring =
                setup == .ignore
                ? """
                proxy_ignore_headers Cache-Control Expires Set-Cookie Vary;
                      proxy_cache_valid 200 1m;
                """ : ""
            return """
                    location /\(setup.rawValue)/ {
                      proxy_pass http://\(upstreamAddress)/;
                      proxy_cache \(setup.rawValue);
                      proxy_cache_key $scheme$proxy_host$request_uri;
                      \(ignoring)
                      add_header X-Cache-Status $upstream_cache_status always;
                    }
                """
        }
        return """
            \(LoopbackNginx.mainDirectives(root: root, connections: 256))
            http {
              log_format truth '$uri\t$args\t$http_authorization\t$upstream_cache_status\t$sent_http_x_user\t$http_range\t$status';
              access_log \(root)/access.log truth;
            \(LoopbackNginx.temporaryPaths(root: root))
              proxy_cache_path \(root)/cache/honour keys_zone=honour:1m;
              proxy_cache_path \(root)/cache/ignore keys_zone=ignore:1m;
              server {
                listen 127.0.0.1:\(port);
            \(location(.honour))
            \(location(.ignore))
                location /files/ {
                  root \(root)/www;
                  if ($http_authorization != "Bearer token-alice") { return 401; }
                }
              }
            }

            """
    }
}
