#if os(Linux)
    import Foundation
    import FoundationNetworking
    import LoopbackNginx
    import SessionKitTesting
    import Testing

    @testable import SessionKitOAuth

    /// The libcurl transport's proxies, read from the environment as curl reads it, and proven through proxy.py (a
    /// forward proxy from PyPI that nobody here wrote, in `scripts/test`'s venv): a plain request goes through
    /// `http_proxy`, an https one is tunnelled through `https_proxy` with the server still verified and HTTP/2 still
    /// offered, and `no_proxy` goes directly.
    @Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CurlProxyTests {
        private static let environment = ProcessInfo.processInfo.environment

        /// The venv's python, which runs proxy.py, or `nil` when `SESSIONKIT_PROXY_PYTHON` is not set.
        static var python: String? { environment["SESSIONKIT_PROXY_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } }

        /// Whether the proxy tests run: python is there, or it must be (`SESSIONKIT_REQUIRE_PROXY=1`, set by
        /// `scripts/test`, which installs proxy.py), and then its absence fails.
        static var shouldRun: Bool { python != nil || environment["SESSIONKIT_REQUIRE_PROXY"] == "1" }

        @Test func theEnvironmentIsReadAsCurlReadsIt() {
            let http = URL(string: "http://api.example.test/")!
            let https = URL(string: "https://api.example.test/")!
            // `HTTP_PROXY` may be a CGI request's `Proxy` field ("httpoxy"): only the lower-case name is read.
            #expect(CurlProxies(environment: ["HTTP_PROXY": "http://evil:1"]).proxy(for: http) == nil)
            #expect(CurlProxies(environment: ["http_proxy": "http://p:1"]).proxy(for: http) == "http://p:1")
            #expect(CurlProxies(environment: ["http_proxy": "http://p:1"]).proxy(for: https) == nil)
            #expect(CurlProxies(environment: ["HTTPS_PROXY": "http://p:2"]).proxy(for: https) == "http://p:2")
            let both = CurlProxies(environment: ["https_proxy": "http://lower:2", "HTTPS_PROXY": "http://upper:2"])
            #expect(both.proxy(for: https) == "http://lower:2")
            let all = CurlProxies(environment: ["ALL_PROXY": "http://all:3", "https_proxy": "http://p:2"])
            #expect(all.proxy(for: http) == "http://all:3")
            #expect(all.proxy(for: https) == "http://p:2")
            // An empty value is no value.
            #expect(CurlProxies(environment: ["https_proxy": "", "all_proxy": "http://all:3"]).https == "http://all:3")
            #expect(CurlProxies(environment: ["no_proxy": "", "NO_PROXY": "internal"]).noProxy == "internal")
            #expect(CurlProxies(environment: [:]) == .none)
            #expect(CurlProxies(environment: ["http_proxy": "http://p:1"]).proxy(for: URL(string: "ftp://x/")!) == nil)
        }

        /// proxy.py on a free loopback port, its access log in a file of its own.
        struct ForwardProxy {
            let port: Int
            let log: URL
            var url: String { "http://127.0.0.1:\(port)" }

            /// What proxy.py logged so far.
            var logged: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

            /// Waits, at most ten seconds, until the log has a line containing `text`: proxy.py writes a line when a
            /// connection it carried closes.
            func logs(_ text: String) async -> Bool {
                let deadline = ContinuousClock.now.advanced(by: .seconds(10))
                while !logged.contains(text) {
                    if ContinuousClock.now >= deadline { return false }
                    try? await Task.sleep(for: .milliseconds(20))
                }
                return true
            }

            struct Unavailable: Error, CustomStringConvertible {
                let description: String
            }

            /// Kills `pid` and every process below it with SIGKILL, the children first.
            static func kill(tree pid: pid_t) {
                for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                    guard let child = pid_t(entry),
                        let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                        let nameEnd = stat.lastIndex(of: ")")
                    else { continue }
                    // "pid (name) state ppid …": the name may hold spaces, so the fields are read after its end.
                    let fields = stat[stat.index(after: nameEnd)...].split(separator: " ")
                    if fields.count > 1, pid_t(fields[1]) == pid { kill(tree: child) }
                }
                Glibc.kill(pid, SIGKILL)
            }

            static func withRunning(_ body: (ForwardProxy) async throws -> Void) async throws {
                guard let python = CurlProxyTests.python else {
                    throw Unavailable(
                        description:
                            "SESSIONKIT_REQUIRE_PROXY=1 but SESSIONKIT_PROXY_PYTHON is not set: run scripts/test")
                }
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "sessionkit-proxy-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(at: directory) }
                let portFile = directory.appendingPathComponent("port")
                let log = directory.appendingPathComponent("proxy.log")
                _ = FileManager.default.createFile(atPath: log.path, contents: nil)
                let process = Process()
                process.executableURL = URL(fileURLWithPath: python)
                process.arguments = [
                    "-m", "proxy", "--hostname", "127.0.0.1", "--port", "0", "--port-file", portFile.path,
                    "--num-workers", "1", "--num-acceptors", "1", "--log-file", log.path,
                ]
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                defer {
                    // proxy.py's acceptors are processes of its own: they go first, then proxy.py.
                    Self.kill(tree: process.processIdentifier)
                    process.waitUntilExit()
                }
                let deadline = ContinuousClock.now.advanced(by: .seconds(30))
                var port: Int?
                while port == nil {
                    port = (try? String(contentsOf: portFile, encoding: .utf8))
                        .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                    guard port == nil else { break }
                    guard process.isRunning, ContinuousClock.now < deadline else {
                        throw Unavailable(description: "proxy.py did not start: \(log.path)")
                    }
                    try await Task.sleep(for: .milliseconds(20))
                }
                try await body(ForwardProxy(port: port!, log: log))
            }
        }

        /// A plain request goes through `http_proxy`, and the proxy logs it; with the host in `no_proxy` it goes
        /// directly (the proxy named is a closed port, which would refuse it); without, the closed proxy refuses.
        @Test(.enabled(if: shouldRun)) func aPlainRequestGoesThroughTheProxyAndNoProxyGoesDirectly() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/p") { request in .text("served \(request.bearerToken ?? "none")") }
                try await ForwardProxy.withRunning { proxy in
                    var request = URLRequest(url: server.url("/p"))
                    request.setValue("Bearer token-alice", forHTTPHeaderField: "Authorization")
                    let through = CurlClient(proxies: CurlProxies(environment: ["http_proxy": proxy.url]))
                    let (data, response) = try await through.data(for: request)
                    through.close()
                    #expect(response.statusCode == 200)
                    #expect(String(decoding: data, as: UTF8.self) == "served token-alice")
                    let port = server.url("/").port!
                    #expect(await proxy.logs("GET 127.0.0.1:\(port)/p"), "\(proxy.logged)")

                    let closed = ["http_proxy": "http://127.0.0.1:1"]
                    let direct = CurlClient(
                        proxies: CurlProxies(environment: closed.merging(["no_proxy": "127.0.0.1"]) { $1 }))
                    defer { direct.close() }
                    #expect(try await direct.data(for: request).1.statusCode == 200)
                    let refused = CurlClient(proxies: CurlProxies(environment: closed))
                    defer { refused.close() }
                    await #expect(throws: URLError(.cannotConnectToHost)) { try await refused.data(for: request) }
                    #expect(server.requests.count == 2)
                }
            }
        }

        /// An https request is tunnelled through `https_proxy` with CONNECT: the proxy learns the host and port
        /// only, the server's certificate and name are verified through the tunnel, and nginx still speaks HTTP/2.
        @Test(.enabled(if: shouldRun && LoopbackNginx.shouldRun))
        func anHTTPSRequestIsTunnelledAndTheServerVerifiedThroughTheTunnel() async throws {
            try await CurlTransportNginxTests.withNginx { ports, certificates in
                try await ForwardProxy.withRunning { proxy in
                    let client = CurlClient(
                        trustedCertificates: certificates.authority,
                        proxies: CurlProxies(environment: ["https_proxy": proxy.url]))
                    let answer = try await client.data(
                        for: URLRequest(url: URL(string: "https://localhost:\(ports[1])/")!))
                    #expect(answer.1.statusCode == 200)
                    #expect(CurlTransportNginxTests.text(answer).hasPrefix("HTTP/2.0 TLSv1."))
                    // Through the tunnel, a name the certificate does not name is refused as it is directly.
                    await #expect(throws: URLError(.serverCertificateUntrusted)) {
                        try await client.data(for: URLRequest(url: URL(string: "https://127.0.0.1:\(ports[1])/")!))
                    }
                    client.close()
                    #expect(await proxy.logs("CONNECT localhost:\(ports[1])"), "\(proxy.logged)")
                    #expect(await proxy.logs("CONNECT 127.0.0.1:\(ports[1])"), "\(proxy.logged)")
                }
            }
        }
    }
#endif
