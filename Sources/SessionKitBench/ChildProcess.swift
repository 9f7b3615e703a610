import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Processes the bench starts: servers it talks to (kept alive by a lifeline pipe on their standard input) and
/// commands it runs to completion (the instruction counter). Every wait happens on a thread of its own, never on
/// the cooperative pool.
enum ChildProcess {
    /// A process that runs until ``stop()``, or until this process dies (its standard input then reaches end of
    /// file, and it exits).
    struct Running: Sendable {
        let process: Process
        let lifeline: Pipe

        /// Closes the lifeline and waits for the process to exit.
        func stop() {
            try? lifeline.fileHandleForWriting.close()
            process.waitUntilExit()
        }

        /// Closes the lifeline, sends SIGTERM (for a child that does not watch its standard input) and waits.
        func terminate() {
            try? lifeline.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// The path of this executable, to run it again in another mode.
    static var currentExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// The full path of the program `name`, searched in `PATH` and in the `sbin` directories where Debian installs
    /// daemons; `nil` when it is not installed.
    static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/local/sbin", "/usr/sbin", "/sbin"]
        return directories.map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Starts `executable` with a lifeline on its standard input and returns once it has printed its first line.
    ///
    /// - Returns: The process and that line, trimmed.
    /// - Throws: When it cannot be started or exits before printing a line.
    static func start(_ executable: String, _ arguments: [String]) async throws -> (Running, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let lifeline = Pipe()
        process.standardOutput = output
        process.standardInput = lifeline
        try process.run()
        let reader = output.fileHandleForReading
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
        let running = Running(process: process, lifeline: lifeline)
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else {
            running.stop()
            throw BenchError("\(executable) exited before it was ready")
        }
        return (running, trimmed)
    }

    /// Runs `executable` to completion, its standard output discarded.
    ///
    /// - Returns: Its exit status and everything it wrote to standard error.
    static func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, standardError: String)
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let reader = errors.fileHandleForReading
        return await withCheckedContinuation { continuation in
            Thread {
                let text = String(decoding: reader.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                continuation.resume(returning: (process.terminationStatus, text))
            }.start()
        }
    }

    /// A TCP port on 127.0.0.1 that nothing listens on now (the system's pick; a server started right after
    /// almost always gets it, and the caller retries if not).
    static func freeLoopbackPort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw BenchError("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic -> Bool in
                bind(descriptor, generic, length) == 0 && getsockname(descriptor, generic, &length) == 0
            }
        }
        guard bound else { throw BenchError("could not bind a loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
