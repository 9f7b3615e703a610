import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

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

    /// Why nginx could not run.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The nginx binary, when there is one.
    static var binary: URL? {
        let environment = ProcessInfo.processInfo.environment
        let candidates =
            [environment["SESSIONKIT_NGINX"]].compactMap { $0 } + ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
            + (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/nginx" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map { URL(fileURLWithPath: $0) }
    }

    /// Whether a missing nginx fails the suite (`SESSIONKIT_REQUIRE_NGINX=1`, set by `scripts/test`).
    static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_NGINX"] == "1" }

    /// Whether suites that need nginx should run: it is there, or it must be (and its absence then fails).
    static var shouldRun: Bool { binary != nil || isRequired }

    let port: Int
    let directory: URL
    private let process: Process

    private init(port: Int, directory: URL, process: Process) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// The proxy's URL for `path`.
    func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(path)")! }

    /// The access log so far.
    func log() -> [LogEntry] {
        let text = (try? String(contentsOf: directory.appendingPathComponent("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 7 else { return nil }
            return LogEntry(
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
    /// - Throws: ``Failure`` when nginx is missing or does not start; what `body` throws.
    static func withRunning<Result>(
        upstream: URL, _ body: (NginxProxy) async throws -> Result
    ) async throws -> Result {
        guard let binary else {
            throw Failure(
                description: "nginx is not installed (SESSIONKIT_REQUIRE_NGINX=1): scripts/test installs "
                    + "nginx-light; or set SESSIONKIT_NGINX to a binary")
        }
        var lastError = ""
        // A free port can be taken between choosing it and nginx binding it: try a few.
        for _ in 0..<5 {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sessionkit-nginx-\(UUID().uuidString)")
            for sub in ["tmp", "cache/honour", "cache/ignore", "www/files"] {
                try FileManager.default.createDirectory(
                    at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
            }
            defer { try? FileManager.default.removeItem(at: directory) }
            let port = try freePort()
            try configuration(directory: directory, port: port, upstream: upstream).write(
                to: directory.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            let process = Process()
            process.executableURL = binary
            process.arguments = [
                "-p", directory.path + "/", "-c", directory.appendingPathComponent("nginx.conf").path, "-e",
                directory.appendingPathComponent("error.log").path,
            ]
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let proxy = NginxProxy(port: port, directory: directory, process: process)
            if await proxy.waitUntilListening() {
                do {
                    let result = try await body(proxy)
                    proxy.stop()
                    return result
                } catch {
                    proxy.stop()
                    throw error
                }
            }
            proxy.stop()
            lastError =
                (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        }
        throw Failure(description: "nginx did not start: \(lastError.suffix(2000))")
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
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(root)/nginx.pid;
            error_log \(root)/error.log warn;
            events { worker_connections 256; }
            http {
              log_format truth '$uri\t$args\t$http_authorization\t$upstream_cache_status\t$sent_http_x_user\t$http_range\t$status';
              access_log \(root)/access.log truth;
              client_body_temp_path \(root)/tmp/body;
              proxy_temp_path \(root)/tmp/proxy;
              fastcgi_temp_path \(root)/tmp/fastcgi;
              uwsgi_temp_path \(root)/tmp/uwsgi;
              scgi_temp_path \(root)/tmp/scgi;
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

    private func waitUntilListening() async -> Bool {
        for _ in 0..<200 {
            guard process.isRunning else { return false }
            if Self.accepts(port: port) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Stops nginx and waits for it.
    ///
    /// With SIGKILL: a single-process nginx keeps the signal mask it inherits, and this test process blocks
    /// SIGTERM on its threads, so nginx would never see a SIGTERM.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private static func accepts(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// A loopback port nothing listens on right now.
    private static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket() failed") }
        defer { close(descriptor) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw Failure(description: "bind() failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
