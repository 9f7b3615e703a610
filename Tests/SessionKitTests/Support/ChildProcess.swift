import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A subprocess a test runs: the crash child or a system tool, with its stdout read line by line.
final class ChildProcess {
    let process = Process()
    private let output = Pipe()
    private let input: Pipe?
    private var buffer: [UInt8] = []

    /// Starts `executable` with `arguments`; stderr is inherited so a child's complaint shows in the test log.
    ///
    /// - Parameters:
    ///   - executable: The program.
    ///   - arguments: Its arguments.
    ///   - environment: Its environment, or `nil` for this process's.
    ///   - mergingStandardError: Whether stderr is read with stdout (`secret-tool` prints attributes there).
    ///   - writableInput: Whether the test writes to the child's stdin (``send(_:)``); else it reads nothing.
    /// - Throws: When the process cannot be started.
    init(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil,
        mergingStandardError: Bool = false,
        writableInput: Bool = false
    ) throws {
        input = writableInput ? Pipe() : nil
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardOutput = output
        if mergingStandardError { process.standardError = output }
        if let input { process.standardInput = input } else { process.standardInput = FileHandle.nullDevice }
        try process.run()
    }

    /// Writes `line` and a newline to the child's stdin (started with `writableInput`).
    ///
    /// - Parameter line: The line.
    func send(_ line: String) {
        guard let input else { return }
        // A child that died already must fail the test by what it printed, not kill the test with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let bytes = Array("\(line)\n".utf8)
        _ = bytes.withUnsafeBytes { write(input.fileHandleForWriting.fileDescriptor, $0.baseAddress, $0.count) }
    }

    /// The next line of stdout, without its newline, or `nil` at end of file. Blocks until one arrives.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes {
                read(output.fileHandleForReading.fileDescriptor, $0.baseAddress, $0.count)
            }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    /// Everything left on stdout, then waits for the process to exit.
    ///
    /// - Returns: The remaining output and the exit status.
    func finish() -> (output: String, status: Int32) {
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        process.waitUntilExit()
        return (lines.joined(separator: "\n"), process.terminationStatus)
    }

    /// Kills the process with SIGKILL and waits for it.
    ///
    /// - Returns: Whether it died of the signal (rather than having exited on its own first).
    func kill() -> Bool {
        #if canImport(Glibc)
            _ = Glibc.kill(process.processIdentifier, SIGKILL)
        #else
            _ = Darwin.kill(process.processIdentifier, SIGKILL)
        #endif
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
    }

    /// The crash child built next to this test bundle, `nil` when it cannot be found.
    ///
    /// SwiftPM puts executables and the test bundle in the same `.build/<triple>/<configuration>` directory;
    /// on macOS the test binary sits deeper inside the `.xctest` bundle.
    static var crashChild: URL? { builtExecutable("SessionKitCrashChild", overriddenBy: "SESSIONKIT_CRASH_CHILD") }

    /// The example backend-for-frontend built next to this test bundle (`SESSIONKIT_EXAMPLE_BFF` names another).
    static var exampleBFF: URL? { builtExecutable("SessionKitExampleBFF", overriddenBy: "SESSIONKIT_EXAMPLE_BFF") }

    /// An executable target of the package built next to this test bundle, or the path `variable` names.
    private static func builtExecutable(_ name: String, overriddenBy variable: String) -> URL? {
        if let path = ProcessInfo.processInfo.environment[variable] {
            return URL(fileURLWithPath: path)
        }
        var candidates: [URL] = []
        for start in [URL(fileURLWithPath: CommandLine.arguments[0]), Bundle.main.bundleURL]
            + Bundle.allBundles.map(\.bundleURL)
        {
            var directory = start.deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(directory.appendingPathComponent(name))
                directory.deleteLastPathComponent()
            }
        }
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug/\(name)"))
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// What a kill test needs: the crash child, how many kills (`SESSIONKIT_KILLS`, 200 by default) and the seed
    /// of their timing (`SESSIONKIT_CRASH_SEED`, else `defaultSeed`, so a run is repeatable).
    ///
    /// - Parameter defaultSeed: The test's own seed.
    /// - Returns: The crash child's location, the number of kills and the seed.
    /// - Throws: When the crash child cannot be found (the test then fails, saying so).
    static func killSettings(defaultSeed: UInt64) throws -> (child: URL, kills: Int, seed: UInt64) {
        let child = try #require(
            crashChild,
            "SessionKitCrashChild was not found next to the test bundle; build it, or set SESSIONKIT_CRASH_CHILD"
        )
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["SESSIONKIT_KILLS"].flatMap { Int($0) } ?? 200
        let seed = environment["SESSIONKIT_CRASH_SEED"].flatMap { UInt64($0) } ?? defaultSeed
        return (child, kills, seed)
    }

    /// A program on `PATH`, or `nil`.
    ///
    /// - Parameter name: The program's name.
    /// - Returns: Its location.
    static func tool(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent(name) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}
