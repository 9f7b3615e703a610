import Foundation
import LoopbackPort

#if canImport(Glibc)
    import Glibc
#endif

/// A real nginx (Debian's `nginx-light`) that a test suite starts on loopback: in a temporary prefix, with no root,
/// no port 80 and no file outside its directory, as one process that is the test's child. Each fixture (a caching
/// proxy, redirecting origins) gives it a configuration; this type finds the binary, picks free ports, starts nginx,
/// waits until every port answers and kills it after.
///
/// `scripts/test` installs nginx and sets `SESSIONKIT_REQUIRE_NGINX=1`: a missing nginx then fails the suite
/// instead of skipping it. `SESSIONKIT_NGINX` names another binary. For the package's tests; not a product.
package final class LoopbackNginx {
    /// Why nginx could not run.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The nginx binary, when there is one.
    package static var binary: URL? {
        let environment = ProcessInfo.processInfo.environment
        let candidates =
            [environment["SESSIONKIT_NGINX"]].compactMap { $0 } + ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]
            + (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/nginx" }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }.map { URL(fileURLWithPath: $0) }
    }

    /// Whether a missing nginx fails the suite (`SESSIONKIT_REQUIRE_NGINX=1`, set by `scripts/test`).
    package static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_NGINX"] == "1" }

    /// Whether suites that need nginx should run: it is there, or it must be (and its absence then fails).
    package static var shouldRun: Bool { binary != nil || isRequired }

    /// The prefix: the configuration, the logs and whatever the configuration puts there.
    package let directory: URL
    /// The loopback ports it listens on, as many as asked for.
    package let ports: [Int]
    private let process: Process

    private init(directory: URL, ports: [Int], process: Process) {
        self.directory = directory
        self.ports = ports
        self.process = process
    }

    /// Runs `body` with nginx running `configuration`, and stops nginx after.
    ///
    /// - Parameters:
    ///   - portCount: How many free loopback ports the configuration listens on.
    ///   - subdirectories: Folders to create in the prefix first.
    ///   - configuration: The `nginx.conf` for a prefix and its ports.
    ///   - body: The test.
    /// - Returns: What `body` returns.
    /// - Throws: ``Failure`` when nginx is missing or does not start; what `body` throws.
    package static func withRunning<Result>(
        ports portCount: Int,
        subdirectories: [String] = ["tmp"],
        configuration: (_ directory: URL, _ ports: [Int]) -> String,
        _ body: (LoopbackNginx) async throws -> Result
    ) async throws -> Result {
        guard let binary else {
            throw Failure(
                description: "nginx is not installed (SESSIONKIT_REQUIRE_NGINX=1): scripts/test installs "
                    + "nginx-light; or set SESSIONKIT_NGINX to a binary")
        }
        var lastError = ""
        // A free port can be taken between choosing it and nginx binding it: try a few.
        for _ in 0..<5 {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
                "sessionkit-nginx-\(UUID().uuidString)")
            for sub in subdirectories {
                try FileManager.default.createDirectory(
                    at: directory.appendingPathComponent(sub), withIntermediateDirectories: true)
            }
            defer { try? FileManager.default.removeItem(at: directory) }
            let ports = try (0..<portCount).map { _ in try LoopbackPort.free() }
            try configuration(directory, ports).write(
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
            let nginx = LoopbackNginx(directory: directory, ports: ports, process: process)
            if await nginx.waitUntilListening() {
                do {
                    let result = try await body(nginx)
                    nginx.stop()
                    return result
                } catch {
                    nginx.stop()
                    throw error
                }
            }
            nginx.stop()
            lastError =
                (try? String(contentsOf: directory.appendingPathComponent("error.log"), encoding: .utf8)) ?? ""
        }
        throw Failure(description: "nginx did not start: \(lastError.suffix(2000))")
    }

    /// The top of every configuration here: one process in the foreground, its pid and error log in the prefix
    /// `root`, `connections` per worker.
    package static func mainDirectives(root: String, connections: Int = 256) -> String {
        """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(root)/nginx.pid;
        error_log \(root)/error.log warn;
        events { worker_connections \(connections); }
        """
    }

    /// The `http` block's temporary folders, all in the prefix `root` (its `tmp` subdirectory), indented for it.
    package static func temporaryPaths(root: String) -> String {
        ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map { kind in
            "  \(kind)_temp_path \(root)/tmp/\(kind == "client_body" ? "body" : kind);"
        }.joined(separator: "\n")
    }

    /// The lines of the log `name` in the prefix, each split at tabs; lines with another count of fields are left
    /// out.
    package func log(_ name: String, fields count: Int) -> [[String]] {
        let text = (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return fields.count == count ? fields : nil
        }
    }

    private func waitUntilListening() async -> Bool {
        for _ in 0..<200 {
            guard process.isRunning else { return false }
            if ports.allSatisfy(Self.accepts) { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Stops nginx and waits for it.
    ///
    /// With SIGKILL: a single-process nginx keeps the signal mask it inherits, and a test process blocks SIGTERM on
    /// its threads, so nginx would never see a SIGTERM.
    package func stop() {
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

}
