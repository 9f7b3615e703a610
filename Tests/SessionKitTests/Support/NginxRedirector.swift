import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
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
/// `scripts/test` installs nginx and sets `SESSIONKIT_REQUIRE_NGINX=1`: a missing nginx then fails the suite.
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

    /// Why nginx could not run.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The redirect statuses every origin answers.
    static let statuses = [301, 302, 303, 307, 308]

    static var binary: URL? {
        let environment = ProcessInfo.processInfo.environment
        let candidates =
            [environment["SESSIONKIT_NGINX"]].compactMap { $0 } + ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
            + (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/nginx" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map { URL(fileURLWithPath: $0) }
    }

    static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_NGINX"] == "1" }

    static var shouldRun: Bool { binary != nil || isRequired }

    let ports: (a: Int, b: Int)
    let directory: URL
    private let process: Process

    private init(ports: (a: Int, b: Int), directory: URL, process: Process) {
        self.ports = ports
        self.directory = directory
        self.process = process
    }

    func a(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(ports.a)\(path)")! }
    func b(_ path: String) -> URL { URL(string: "http://localhost:\(ports.b)\(path)")! }

    func log(of origin: String) -> [LogEntry] {
        let text =
            (try? String(contentsOf: directory.appendingPathComponent("\(origin).log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard fields.count == 7 else { return nil }
            return LogEntry(
                method: fields[0], uri: fields[1], authorization: fields[2], cookie: fields[3],
                proxyAuthorization: fields[4], apiKey: fields[5], dpop: fields[6])
        }
    }

    /// Runs `body` with nginx serving the three origins, and stops nginx after.
    static func withRunning<Result>(_ body: (NginxRedirector) async throws -> Result) async throws -> Result {
        guard let binary else {
            throw Failure(
                description: "nginx is not installed (SESSIONKIT_REQUIRE_NGINX=1): scripts/test installs "
                    + "nginx-light; or set SESSIONKIT_NGINX to a binary")
        }
        var lastError = ""
        for _ in 0..<5 {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sessionkit-nginx-redirects-\(UUID().uuidString)")
            try FileManager.default.createDirectory(
                at: directory.appendingPathComponent("tmp"), withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let ports = (a: try freePort(), b: try freePort())
            try configuration(directory: directory, ports: ports).write(
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
            let server = NginxRedirector(ports: ports, directory: directory, process: process)
            if await server.waitUntilListening() {
                do {
                    let result = try await body(server)
                    server.stop()
                    return result
                } catch {
                    server.stop()
                    throw error
                }
            }
            server.stop()
            lastError =
                (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        }
        throw Failure(description: "nginx did not start: \(lastError.suffix(2000))")
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
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(root)/nginx.pid;
            error_log \(root)/error.log warn;
            events { worker_connections 256; }
            http {
              log_format credentials '$request_method\t$request_uri\t$http_authorization\t$http_cookie\t$http_proxy_authorization\t$http_x_api_key\t$http_dpop';
              client_body_temp_path \(root)/tmp/body;
              proxy_temp_path \(root)/tmp/proxy;
              fastcgi_temp_path \(root)/tmp/fastcgi;
              uwsgi_temp_path \(root)/tmp/uwsgi;
              scgi_temp_path \(root)/tmp/scgi;
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

    private func waitUntilListening() async -> Bool {
        for _ in 0..<200 {
            guard process.isRunning else { return false }
            if [ports.a, ports.b].allSatisfy(Self.accepts) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Stops nginx and waits for it (SIGKILL: a single-process nginx keeps the test process's blocked SIGTERM).
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
