#if os(Linux)
    import Foundation
    import FoundationNetworking
    import LoopbackNginx
    import Testing

    @testable import SessionKitOAuth

    /// The libcurl transport against a real nginx: an IPv6 literal host, and TLS verified against the trust it is
    /// given (the system's store by default), with HTTP/2 where the server offers it in the handshake.
    @Suite(.enabled(if: LoopbackNginx.shouldRun), .timeLimit(.minutes(TimeLimit.ordinary)))
    struct CurlTransportNginxTests {
        /// A certificate authority and a server certificate it signed for `localhost` (not `127.0.0.1`), made with the
        /// `openssl` tool in a directory of their own.
        struct Certificates {
            let directory: URL
            var authority: URL { directory.appendingPathComponent("ca.crt") }
            var certificate: URL { directory.appendingPathComponent("server.crt") }
            var key: URL { directory.appendingPathComponent("server.key") }

            init() throws {
                directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "sessionkit-tls-\(UUID().uuidString)")
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
                try Data("subjectAltName=DNS:localhost\n".utf8).write(
                    to: directory.appendingPathComponent("san.ext"))
                let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
                try Self.openssl(
                    ["req", "-x509"] + curve
                        + ["-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=SessionKit Test CA"],
                    in: directory)
                try Self.openssl(
                    ["req"] + curve + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
                    in: directory)
                try Self.openssl(
                    [
                        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                        "-out", "server.crt", "-days", "1", "-extfile", "san.ext",
                    ], in: directory)
            }

            func remove() { try? FileManager.default.removeItem(at: directory) }

            struct OpenSSLFailed: Error {
                let command: String
            }

            private static func openssl(_ arguments: [String], in directory: URL) throws {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
                process.arguments = arguments
                process.currentDirectoryURL = directory
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                process.waitUntilExit()
                guard process.terminationStatus == 0 else {
                    throw OpenSSLFailed(command: arguments.joined(separator: " "))
                }
            }
        }

        /// nginx with a plain server on `127.0.0.1` and `[::1]` (port 0) and a TLS one offering HTTP/2 (port 1); each
        /// answers with the protocol it spoke and the client's address.
        static func withNginx(_ body: (_ ports: [Int], _ certificates: Certificates) async throws -> Void)
            async throws
        {
            let certificates = try Certificates()
            defer { certificates.remove() }
            try await LoopbackNginx.withRunning(
                ports: 2,
                configuration: { directory, ports in
                    let root = directory.path
                    return """
                        \(LoopbackNginx.mainDirectives(root: root, connections: 64))
                        http {
                          access_log off;
                        \(LoopbackNginx.temporaryPaths(root: root))
                          server {
                            listen 127.0.0.1:\(ports[0]);
                            listen [::1]:\(ports[0]);
                            location / { return 200 "$server_protocol $remote_addr"; }
                          }
                          server {
                            listen 127.0.0.1:\(ports[1]) ssl http2;
                            ssl_certificate \(certificates.certificate.path);
                            ssl_certificate_key \(certificates.key.path);
                            location / { return 200 "$server_protocol $ssl_protocol"; }
                          }
                        }
                        """
                },
                { nginx in try await body(nginx.ports, certificates) })
        }

        static func text(_ answer: (Data, HTTPURLResponse)) -> String { String(decoding: answer.0, as: UTF8.self) }

        /// FoundationNetworking does not send to an IPv6 literal host; the libcurl transport does.
        @Test func anIPv6LiteralHostIsReached() async throws {
            try await Self.withNginx { ports, _ in
                let client = CurlClient()
                defer { client.close() }
                let answer = try await client.data(for: URLRequest(url: URL(string: "http://[::1]:\(ports[0])/")!))
                #expect(answer.1.statusCode == 200)
                #expect(Self.text(answer) == "HTTP/1.1 ::1")
            }
        }

        /// A server whose certificate no trusted authority signed is refused before anything is sent: by default
        /// the system's store decides, and it does not know this authority.
        @Test func aCertificateNoTrustedAuthoritySignedIsRefused() async throws {
            try await Self.withNginx { ports, _ in
                let client = CurlClient()
                defer { client.close() }
                do {
                    _ = try await client.data(for: URLRequest(url: URL(string: "https://localhost:\(ports[1])/")!))
                    Issue.record("an untrusted certificate was accepted")
                } catch {
                    #expect((error as? URLError)?.code == .serverCertificateUntrusted)
                }
            }
        }

        /// Trusting the authority, the same server is reached over TLS, and HTTP/2 is spoken: nginx offered it in
        /// the handshake (ALPN). A host name the certificate does not name is still refused.
        @Test func aTrustedServerIsReachedWithHTTP2AndItsNameChecked() async throws {
            try await Self.withNginx { ports, certificates in
                let client = CurlClient(trustedCertificates: certificates.authority)
                defer { client.close() }
                let answer = try await client.data(
                    for: URLRequest(url: URL(string: "https://localhost:\(ports[1])/")!))
                #expect(answer.1.statusCode == 200)
                #expect(Self.text(answer).hasPrefix("HTTP/2.0 TLSv1."), "\(Self.text(answer))")
                // The certificate names localhost, not 127.0.0.1: the same server by its address is refused.
                do {
                    _ = try await client.data(for: URLRequest(url: URL(string: "https://127.0.0.1:\(ports[1])/")!))
                    Issue.record("a certificate for another name was accepted")
                } catch {
                    #expect((error as? URLError)?.code == .serverCertificateUntrusted)
                }
            }
        }
    }
#endif
