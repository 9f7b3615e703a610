import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A loopback HTTP server for the request benchmarks, in a process of its own so that it never competes with the
/// clients for the bench's cooperative pool: `GET /me` answers ``RequestBenchmarks/body`` with
/// `Cache-Control: no-store` to a request carrying ``token``, 401 to any other; `GET /dpop` the same to a request
/// carrying it as a DPoP-bound token with a `DPoP` proof (not verified: the server's side is not measured);
/// `GET /fresh` answers the same body with `max-age=60`.
struct BenchServer: Sendable {
    /// The bearer token `/me` accepts.
    static let token = "bench-access-token-0123456789abcdef"

    /// Its name in figures and progress lines: `localserver` or `nginx`.
    let name: String
    let baseURL: URL
    private let running: ChildProcess.Running
    private let prefix: URL?

    /// The URL of `path` on this server.
    func url(_ path: String) -> URL { baseURL.appendingPathComponent(path) }

    /// Stops the server and removes its files.
    func stop() {
        running.stop()
        if let prefix { try? FileManager.default.removeItem(at: prefix) }
    }

    /// SessionKit's `LocalServer`, run by this executable in a child process (`sessionkit-bench --serve`).
    static func localServer() async throws -> BenchServer {
        let (running, line) = try await ChildProcess.start(ChildProcess.currentExecutable, ["--serve"])
        guard let port = Int(line) else {
            running.stop()
            throw BenchError("sessionkit-bench --serve printed \(line), not a port")
        }
        return BenchServer(
            name: "localserver", baseURL: URL(string: "http://127.0.0.1:\(port)")!, running: running, prefix: nil)
    }

    /// Debian's `nginx` (nginx-light is enough), as an unprivileged single process on a free loopback port, with
    /// its configuration, logs and temporary files in a directory of its own; `nil` when nginx is not installed.
    static func nginx() async throws -> BenchServer? {
        guard let nginx = ChildProcess.find("nginx") else { return nil }
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sessionkit-bench-nginx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: prefix, withIntermediateDirectories: true)
        var lastError: any Error = BenchError("nginx did not start")
        for _ in 0..<3 {
            let port = try ChildProcess.freeLoopbackPort()
            try configuration(prefix: prefix.path, port: port).write(
                to: prefix.appendingPathComponent("nginx.conf"), atomically: true, encoding: .utf8)
            // nginx keeps the blocked signal mask it inherits, so it is killed rather than asked to stop: `sh`
            // waits on the lifeline and kills it when the bench closes it or dies.
            let script =
                "\"$0\" -p \"$1\" -c \"$1/nginx.conf\" -e \"$1/error.log\" & pid=$!; echo started; "
                + "cat >/dev/null; kill -9 $pid; wait $pid 2>/dev/null"
            let (running, _) = try await ChildProcess.start("/bin/sh", ["-c", script, nginx, prefix.path])
            let server = BenchServer(
                name: "nginx", baseURL: URL(string: "http://127.0.0.1:\(port)")!, running: running, prefix: prefix)
            do {
                try await server.waitUntilAnswering()
                return server
            } catch {
                lastError = error
                running.stop()
            }
        }
        try? FileManager.default.removeItem(at: prefix)
        throw lastError
    }

    /// Waits until `/me` answers (a 401: no token), for up to 5 seconds.
    private func waitUntilAnswering() async throws {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        while ContinuousClock.now < deadline {
            if let (_, response) = try? await session.data(for: URLRequest(url: url("/me"))),
                (response as? HTTPURLResponse)?.statusCode == 401
            {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let log = (try? String(contentsOf: prefix!.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        throw BenchError("nginx did not answer on \(baseURL): \(log.suffix(300))")
    }

    private static func configuration(prefix: String, port: Int) -> String {
        """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(prefix)/nginx.pid;
        error_log \(prefix)/error.log warn;
        events { worker_connections 4096; }
        http {
            access_log off;
            client_body_temp_path \(prefix)/body;
            proxy_temp_path \(prefix)/proxy;
            fastcgi_temp_path \(prefix)/fastcgi;
            uwsgi_temp_path \(prefix)/uwsgi;
            scgi_temp_path \(prefix)/scgi;
            keepalive_requests 10000000;
            keepalive_timeout 600s;
            tcp_nodelay on;
            absolute_redirect off;
            default_type application/json;
            server {
                listen 127.0.0.1:\(port) backlog=4096;
                location = /me {
                    if ($http_authorization != "Bearer \(token)") { return 401; }
                    add_header Cache-Control no-store always;
                    return 200 '\(RequestBenchmarks.body)';
                }
                location = /dpop {
                    if ($http_authorization != "DPoP \(token)") { return 401; }
                    if ($http_dpop = "") { return 401; }
                    add_header Cache-Control no-store always;
                    return 200 '\(RequestBenchmarks.body)';
                }
                location = /hop {
                    return 302 /me;
                }
                location = /fresh {
                    add_header Cache-Control max-age=60 always;
                    return 200 '\(RequestBenchmarks.body)';
                }
            }
        }

        """
    }
}

/// `sessionkit-bench --serve`: a `LocalServer` with the routes of ``BenchServer``, for a parent bench. Prints the
/// port, then serves until its standard input reaches end of file.
enum ServeMode {
    static func runBlockingMainThread() -> Int32 {
        let ready = DispatchSemaphore(value: 0)
        let port = Lock<Int?>(nil)
        Task.detached {
            do {
                let server = try await LocalServer.start(configuration: .init(recordsRequests: false))
                let expected = "Bearer \(BenchServer.token)"
                server.route("GET", "/me") { request in
                    guard request.header("Authorization") == expected else { return .status(401) }
                    return .json(RequestBenchmarks.body, headers: [("Cache-Control", "no-store")])
                }
                server.route("GET", "/dpop") { request in
                    guard request.header("Authorization") == "DPoP \(BenchServer.token)", request.header("DPoP") != nil
                    else { return .status(401) }
                    return .json(RequestBenchmarks.body, headers: [("Cache-Control", "no-store")])
                }
                server.route("GET", "/hop") { _ in LocalServer.Response(status: 302, headers: [("Location", "/me")]) }
                server.route("GET", "/fresh") { _ in
                    .json(RequestBenchmarks.body, headers: [("Cache-Control", "max-age=60")])
                }
                port.withLock { $0 = server.port }
                ready.signal()
                // Kept alive for the life of the process: the main thread exits it.
                try await Task.sleep(for: .seconds(365 * 24 * 3600))
                withExtendedLifetime(server) {}
            } catch {
                BenchLog.note("sessionkit-bench --serve: \(error)")
                ready.signal()
            }
        }
        ready.wait()
        guard let port = port.withLock({ $0 }) else { return 1 }
        FileHandle.standardOutput.write(Data("\(port)\n".utf8))
        _ = FileHandle.standardInput.readDataToEndOfFile()
        return 0
    }
}
