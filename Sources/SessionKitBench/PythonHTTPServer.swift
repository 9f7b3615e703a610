import Foundation

/// The baseline: Python's `http.server.ThreadingHTTPServer`, as a subprocess on 127.0.0.1 with a free port,
/// speaking HTTP/1.1 with keep-alive and TCP_NODELAY on accepted sockets, answering every GET with a JSON body
/// and its Content-Length.
struct PythonHTTPServer {
    private static let handler = #"""
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
        """#

    /// The python3 process; its standard input is a lifeline, so it exits even if this process dies first.
    let running: ChildProcess.Running
    let port: Int

    /// Starts the server and waits until it listens.
    ///
    /// - Parameter body: The JSON every GET answers with.
    /// - Returns: The running server.
    /// - Throws: When python3 cannot be started or does not report its port.
    static func start(body: String) async throws -> PythonHTTPServer {
        let (running, port) = try await PythonServerProcess.start(
            handler: handler, arguments: [body], name: "python3 http.server")
        return PythonHTTPServer(running: running, port: port)
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)/bench")! }

    func stop() { running.terminate() }
}

/// A Python `ThreadingHTTPServer` subprocess on 127.0.0.1 with a free port, around a handler class the caller
/// writes (`class Handler(BaseHTTPRequestHandler)`; `os`, `sys`, `threading` and the `http.server` names are
/// imported): what the benchmarks' Python servers share.
enum PythonServerProcess {
    private static let preamble = #"""
        import os, signal, sys, threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        # Swift's Process hands down its blocked signal mask: without this, SIGTERM would never arrive.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])

        def exit_when_parent_goes():
            sys.stdin.buffer.read()  # end of file: the benchmark closed the pipe, or died
            os._exit(0)

        threading.Thread(target=exit_when_parent_goes, daemon=True).start()

        """#

    private static let serve = #"""

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        server = Server(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#

    /// Starts the server and waits until it reports its port.
    ///
    /// - Parameters:
    ///   - handler: The Python source of `Handler`, indented from column 0.
    ///   - arguments: The script's `sys.argv[1...]`.
    ///   - name: The server's name in errors.
    /// - Returns: The process (its standard input is a lifeline: it exits when this process dies) and its port.
    /// - Throws: ``BenchError`` when python3 cannot be started or does not report a port.
    static func start(
        handler: String, arguments: [String] = [], name: String
    ) async throws -> (ChildProcess.Running, Int) {
        let started: (ChildProcess.Running, String)
        do {
            started = try await ChildProcess.start(
                "/usr/bin/env", ["python3", "-c", preamble + handler + serve] + arguments)
        } catch {
            throw BenchError("\(name) did not start (is python3 installed?)")
        }
        guard let port = Int(started.1) else {
            started.0.terminate()
            throw BenchError("\(name) did not start (is python3 installed?)")
        }
        return (started.0, port)
    }
}

/// A benchmark that could not run.
struct BenchError: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
