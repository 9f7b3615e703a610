import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The DPoP test server (`Tests/DPoPServer/dpop_server.py`): a token endpoint, a revocation endpoint and a resource
/// server that check every proof with jwcrypto (PyPI). Started on an ephemeral loopback port for one test and
/// stopped after it; it exits by itself when this process's end closes its standard input.
final class DPoPServer: Sendable {
    let baseURL: URL
    private let process: Process
    private let input: Pipe

    private init(baseURL: URL, process: Process, input: Pipe) {
        self.baseURL = baseURL
        self.process = process
        self.input = input
    }

    static func withRunning<T>(_ body: (DPoPServer) async throws -> T) async throws -> T {
        let python = try #require(PythonTools.python, "no .venv/bin/python: run scripts/test once to create it")
        let process = Process()
        process.executableURL = python
        process.arguments = [
            PythonTools.root.appendingPathComponent("Tests/DPoPServer/dpop_server.py").path, "--port", "0",
        ]
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let url = try #require(URL(string: text), "the DPoP server printed no URL")
        let server = DPoPServer(baseURL: url, process: process, input: input)
        defer { server.stop() }
        return try await body(server)
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    func url(_ path: String) -> URL { URL(string: baseURL.absoluteString + path)! }

    /// A JSON request to the server's own control API.
    func call(_ method: String, _ path: String, json: String? = nil) async throws -> JSONValue {
        var request = URLRequest(url: url(path))
        request.httpMethod = method
        if let json {
            request.httpBody = Data(json.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, _) = try await session.data(for: request)
        return try JSONParser.parse(Array(data))
    }

    func control(_ json: String) async throws { _ = try await call("POST", "/control", json: json) }

    func reset() async throws { _ = try await call("POST", "/reset") }

    /// The proofs the server saw, those jwcrypto verified, and why the others were refused.
    func stats() async throws -> (proofs: Int, verified: Int, refused: [String: Int], library: String) {
        let stats = try await call("GET", "/stats")
        var refused: [String: Int] = [:]
        if case .object(let members)? = stats["refused"] {
            for (reason, count) in members { refused[reason] = Int(count.numberValue ?? 0) }
        }
        return (
            Int(stats["proofs"]?.numberValue ?? -1), Int(stats["verified"]?.numberValue ?? -1), refused,
            stats["library"]?.stringValue ?? "?"
        )
    }

    /// The request log: method, path, authorization scheme, what became of the proof, status.
    func log() async throws -> [(method: String, path: String, scheme: String?, proof: String?, status: Int)] {
        guard case .array(let entries) = try await call("GET", "/log") else { return [] }
        return entries.map { entry in
            (
                entry["method"]?.stringValue ?? "", entry["path"]?.stringValue ?? "", entry["auth_scheme"]?.stringValue,
                entry["proof"]?.stringValue, Int(entry["status"]?.numberValue ?? 0)
            )
        }
    }
}
