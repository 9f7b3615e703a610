import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Single flight across processes: 4 processes (this executable, started again as `--crossprocess-child`) restore
/// one account from one `FileCredentialStore` opened with `coordinatingProcesses`, and each sends 16 concurrent
/// requests right after the authorization server invalidated the access token. Every request gets a 401; between
/// them the processes must send one token request, not 4, and replay every request with the new token.
enum CrossProcessBenchmarks {
    static let processes = 4
    static let requestsEach = 16
    private static let repetitions = 5
    /// The argument that starts this executable as one of the processes.
    static let childArgument = "--crossprocess-child"

    static let all = [
        Benchmark(
            resultNames: ["crossprocess.refreshes.p4k16", "crossprocess.seconds.p4k16"],
            run: { try await measure() })
    ]

    private static func measure() async throws -> [BenchResult] {
        try await MockAuthorizationServer.withRunning(configuration: .init(server: .init(recordsRequests: false))) {
            mock in
            try mock.addUser("alice")
            var worst = 0
            var seconds: [Double] = []
            for repetition in 0..<repetitions {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "sessionkit-bench-crossprocess-\(getpid())-\(repetition)")
                defer { try? FileManager.default.removeItem(at: directory) }
                let store = try FileCredentialStore(directory: directory, coordinatingProcesses: true)
                let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: mock.makeClient()))
                let session = try await manager.signIn(
                    Account(issuer: mock.issuer, subject: "alice"), tokens: try mock.issueTokens(for: "alice"))
                session.end()
                mock.invalidateAccessTokens(for: "alice")
                let before = mock.tokenRequestCount(grant: .refreshToken)
                let arguments = [
                    childArgument, directory.path, mock.tokenEndpoint.absoluteString,
                    MockAuthorizationServer.Configuration().clientID, mock.userInfoEndpoint.absoluteString,
                    String(requestsEach),
                ]
                let elapsed = try await Task.detached { () throws -> Double in
                    let children = try (0..<processes).map { _ in try Child(arguments) }
                    defer { for child in children { child.wait() } }
                    for child in children {
                        guard child.readLine() == "ready" else { throw BenchError("a crossprocess child failed") }
                    }
                    let start = ContinuousClock.now
                    for child in children { child.send("go") }
                    for child in children {
                        let line = child.readLine() ?? ""
                        guard line == "done \(requestsEach) 0" else {
                            throw BenchError("a crossprocess child ended with \(line)")
                        }
                    }
                    return Statistics.seconds(ContinuousClock.now - start)
                }.value
                seconds.append(elapsed)
                worst = max(worst, mock.tokenRequestCount(grant: .refreshToken) - before)
            }
            BenchLog.note("crossprocess.p4k16: at most \(worst) token request(s) in \(repetitions) bursts")
            return [
                BenchResult(
                    name: "crossprocess.refreshes.p4k16", value: Double(worst),
                    unit: "token requests per burst of 4 processes × 16 (most over \(repetitions); must be 1)"),
                BenchResult(
                    name: "crossprocess.seconds.p4k16", value: Statistics.median(seconds),
                    unit: "s (4 processes × 16 requests, 401, 1 refresh, replay)"),
            ]
        }
    }

    /// One process of the burst: restores, prints `ready`, waits for `go` on stdin, sends its requests, prints
    /// `done <succeeded> <failed>`.
    static func runChild(_ arguments: [String]) async -> Int32 {
        guard arguments.count == 5, let tokenEndpoint = URL(string: arguments[1]),
            let resource = URL(string: arguments[3]), let requests = Int(arguments[4])
        else { return 2 }
        do {
            let store = try FileCredentialStore(
                directory: URL(fileURLWithPath: arguments[0]), coordinatingProcesses: true)
            let client = OAuthClient(configuration: .init(tokenEndpoint: tokenEndpoint, clientID: arguments[2]))
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: client))
            await manager.restore()
            guard let session = manager.current else { return 1 }
            emit("ready")
            guard readLine() == "go" else { return 1 }
            let failed = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<requests {
                    group.addTask {
                        let response = try? await session.data(for: URLRequest(url: resource)).1
                        return response?.statusCode != 200
                    }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            emit("done \(requests - failed) \(failed)")
            return 0
        } catch {
            return 1
        }
    }

    /// Writes `line` straight to file descriptor 1, unbuffered, so the parent reads it at once.
    private static func emit(_ line: String) {
        let bytes = Array("\(line)\n".utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    /// A child process, its stdout read line by line.
    private final class Child {
        let process = Process()
        let output = Pipe()
        let input = Pipe()
        var buffer: [UInt8] = []

        init(_ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            process.arguments = arguments
            process.standardOutput = output
            process.standardInput = input
            try process.run()
        }

        func send(_ line: String) {
            let bytes = Array("\(line)\n".utf8)
            _ = bytes.withUnsafeBytes { write(input.fileHandleForWriting.fileDescriptor, $0.baseAddress, $0.count) }
        }

        func readLine() -> String? {
            while true {
                if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    defer { buffer.removeSubrange(...newline) }
                    return String(decoding: buffer[..<newline], as: UTF8.self)
                }
                var chunk = [UInt8](repeating: 0, count: 256)
                let count = chunk.withUnsafeMutableBytes {
                    read(output.fileHandleForReading.fileDescriptor, $0.baseAddress, $0.count)
                }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return nil }
                buffer.append(contentsOf: chunk[0..<count])
            }
        }

        func wait() {
            if process.isRunning { _ = kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }
}
