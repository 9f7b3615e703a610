import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `SessionKitCrashChild` processes that play the instances of a server fleet on one PostgreSQL database
/// (`vault-fleet`, `vault-follower`): each gets the connection string in `SESSIONKIT_VAULT_DATABASE`, never on its
/// command line, optionally with an `application_name` of its own (`child<index>`) so a query of `pg_stat_activity`
/// tells which one holds a lock.
///
/// Unchecked: a test reads and writes each child's pipes from one thread at a time (as ``RefreshBurst`` does);
/// ``kill(_:)`` only sends a signal.
final class VaultChildren: @unchecked Sendable {
    /// What one child printed after the lines the test read, and how it ended.
    struct Outcome: Sendable {
        let lines: [String]
        let status: Int32

        /// `done <succeeded> <failed>` of a `vault-fleet` child, if it got that far.
        var done: (succeeded: Int, failed: Int)? {
            guard let line = lines.last(where: { $0.hasPrefix("done ") }) else { return nil }
            let parts = line.split(separator: " ").compactMap { Int($0) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }

        /// The `failed <code> <count>` lines.
        var failures: [String] { lines.filter { $0.hasPrefix("failed ") } }
    }

    private let children: [ChildProcess]
    /// The children's process identifiers, by index.
    let processIdentifiers: [Int32]

    private init(_ children: [ChildProcess]) {
        self.children = children
        processIdentifiers = children.map(\.process.processIdentifier)
    }

    /// How many children there are.
    var count: Int { children.count }

    /// Starts one child per element of `arguments` and waits for each one's `ready <n>`.
    ///
    /// - Parameters:
    ///   - executable: The crash child.
    ///   - arguments: Each child's arguments.
    ///   - database: The connection string; it holds a password, so it goes in the environment.
    ///   - namingConnections: Whether child `k`'s connections carry `application_name=child<k>`.
    /// - Returns: The children and the `n` each printed.
    /// - Throws: When a child cannot be started or does not get ready (every child is killed then).
    static func start(
        _ executable: URL, _ arguments: [[String]], database: String, namingConnections: Bool = false
    ) async throws -> (children: VaultChildren, ready: [Int]) {
        var children: [ChildProcess] = []
        for (index, each) in arguments.enumerated() {
            var environment = ProcessInfo.processInfo.environment
            environment["SESSIONKIT_VAULT_DATABASE"] =
                namingConnections ? "\(database) application_name=child\(index)" : database
            children.append(try ChildProcess(executable, each, environment: environment, writableInput: true))
        }
        let started = VaultChildren(children)
        var ready: [Int] = []
        for index in children.indices {
            let line = await started.readLine(index)
            guard let line, line.hasPrefix("ready "), let count = Int(line.dropFirst("ready ".count)) else {
                started.killAll()
                throw VaultChildFailure(description: "child \(index) did not get ready: \(line ?? "end of output")")
            }
            ready.append(count)
        }
        return (started, ready)
    }

    /// The next line child `index` prints, read off the cooperative pool; `nil` at the end of its output.
    func readLine(_ index: Int) async -> String? {
        await offPool { [self] in children[index].readLine() }
    }

    /// Writes `line` to every child's stdin.
    func sendToAll(_ line: String) {
        for child in children { child.send(line) }
    }

    /// Writes `line` to child `index`'s stdin.
    func send(_ line: String, to index: Int) {
        children[index].send(line)
    }

    /// Whether any child is still running.
    var isRunning: Bool { children.contains { $0.process.isRunning } }

    /// Kills child `index` with SIGKILL now.
    func kill(_ index: Int) {
        #if canImport(Glibc)
            _ = Glibc.kill(processIdentifiers[index], SIGKILL)
        #else
            _ = Darwin.kill(processIdentifiers[index], SIGKILL)
        #endif
    }

    /// Kills every child still running.
    func killAll() {
        for index in children.indices where children[index].process.isRunning { kill(index) }
    }

    /// Waits for every child to exit and returns the rest of what each printed.
    func outcomes() async -> [Outcome] {
        var outcomes: [Outcome] = []
        for index in children.indices {
            outcomes.append(
                await offPool { [self] in
                    let (output, status) = children[index].finish()
                    return Outcome(lines: output.split(separator: "\n").map(String.init), status: status)
                })
        }
        return outcomes
    }
}

/// A child of ``VaultChildren`` that failed to start.
struct VaultChildFailure: Error, CustomStringConvertible {
    let description: String
}
