import Foundation

/// The baseline: Python's `http.server.ThreadingHTTPServer`, as a subprocess on 127.0.0.1 with a free port,
/// speaking HTTP/1.1 with keep-alive and TCP_NODELAY on accepted sockets, answering every GET with a JSON body
/// and its Content-Length.
struct PythonHTTPServer {
    private static let script = #"""
        import os, signal, sys, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        # Swift's Process hands down its blocked signal mask: without this, SIGTERM would never arrive.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])

        def exit_when_parent_goes():
            sys.stdin.buffer.read()  # end of file: the benchmark closed the pipe, or died
            os._exit(0)

        threading.Thread(target=exit_when_parent_goes, daemon=True).start()

        BODY = sys.argv[1].encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"   # keep-alive
            disable_nagle_algorithm = True  # TCP_NODELAY on every accepted socket

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.write(BODY)

            def log_message(self, format, *args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        server = Server(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#

    let process: Process
    let port: Int
    /// The child's standard input: closing it makes the child exit, even if this process dies first.
    let lifeline: Pipe

    /// Starts the server and waits until it listens.
    ///
    /// - Parameter body: The JSON every GET answers with.
    /// - Returns: The running server.
    /// - Throws: When python3 cannot be started or does not report its port.
    static func start(body: String) async throws -> PythonHTTPServer {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, body]
        let output = Pipe()
        let lifeline = Pipe()
        process.standardOutput = output
        process.standardInput = lifeline
        try process.run()
        let reader = output.fileHandleForReading
        // A blocking read, kept off the cooperative pool.
        let line: String = await withCheckedContinuation { continuation in
            Thread {
                var bytes = Data()
                while !bytes.contains(UInt8(ascii: "\n")) {
                    let chunk = reader.availableData
                    if chunk.isEmpty { break }
                    bytes.append(chunk)
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }.start()
        }
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            try? lifeline.fileHandleForWriting.close()
            process.terminate()
            throw BenchError("python3 http.server did not start (is python3 installed?)")
        }
        return PythonHTTPServer(process: process, port: port, lifeline: lifeline)
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)/bench")! }

    func stop() {
        try? lifeline.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }
}

/// A benchmark that could not run.
struct BenchError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
