import Dispatch
import Foundation
import SessionKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Several `SessionKitCrashChild refresh-burst` processes on one credentials directory, started together and
/// released together: each restores, says `ready`, and fires its requests only when the test says `go` to all.
///
/// Unchecked: a test calls ``start(_:count:directory:tokenEndpoint:clientID:resource:requests:)``, ``go()`` and
/// ``outcomes()`` one after another, so each child's pipes are used by one thread at a time; ``kill(_:)`` only
/// sends a signal.
final class RefreshBurst: @unchecked Sendable {
    /// What one child printed, and how it ended.
    struct Outcome: Sendable {
        let lines: [String]
        let status: Int32
        let killed: Bool

        /// `done <succeeded> <failed>`, if the child got that far.
        var done: (succeeded: Int, failed: Int)? {
            guard let line = lines.last(where: { $0.hasPrefix("done ") }) else { return nil }
            let parts = line.split(separator: " ").compactMap { Int($0) }
            return parts.count == 2 ? (parts[0], parts[1]) : nil
        }
    }

    private let children: [ChildProcess]

    /// The children's process identifiers, in start order.
    let processIdentifiers: [Int32]

    private init(_ children: [ChildProcess]) {
        self.processIdentifiers = children.map(\.process.processIdentifier)
        self.children = children
    }

    /// Starts `count` children and waits until every one has restored and printed `ready`.
    ///
    /// - Throws: When a child cannot be started or exits before it is ready.
    static func start(
        _ executable: URL, count: Int, directory: URL, tokenEndpoint: URL, clientID: String, resource: URL,
        requests: Int
    ) async throws -> RefreshBurst {
        let arguments = [
            "refresh-burst", directory.path, tokenEndpoint.absoluteString, clientID, resource.absoluteString,
            String(requests),
        ]
        var children: [ChildProcess] = []
        for _ in 0..<count {
            children.append(try ChildProcess(executable, arguments, writableInput: true))
        }
        let burst = RefreshBurst(children)
        for index in burst.children.indices {
            let line = await offPool { burst.children[index].readLine() }
            guard line == "ready" else {
                burst.killAll()
                throw SessionError(.invalidInput, "a refresh-burst child did not get ready: \(line ?? "end of output")")
            }
        }
        return burst
    }

    /// Whether any child is still running.
    var isRunning: Bool { children.contains { $0.process.isRunning } }

    /// Releases every child at once.
    func go() {
        for child in children { child.send("go") }
    }

    /// Kills the child with `processIdentifier` now.
    func kill(_ processIdentifier: Int32) {
        guard processIdentifier > 0 else { return }
        #if canImport(Glibc)
            _ = Glibc.kill(processIdentifier, SIGKILL)
        #else
            _ = Darwin.kill(processIdentifier, SIGKILL)
        #endif
    }

    /// Kills every child that is still running.
    func killAll() {
        for identifier in processIdentifiers { kill(identifier) }
    }

    /// Waits for every child to exit and returns what each printed.
    func outcomes() async -> [Outcome] {
        var outcomes: [Outcome] = []
        for index in children.indices {
            outcomes.append(
                await offPool { [self] in
                    let child = children[index]
                    let (output, status) = child.finish()
                    let killed = child.process.terminationReason == .uncaughtSignal && status == SIGKILL
                    return Outcome(
                        lines: output.split(separator: "\n").map(String.init), status: status, killed: killed)
                })
        }
        return outcomes
    }
}

/// Runs blocking work (a pipe read, a wait for a process) on a dispatch thread, off the cooperative pool.
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: body()) }
    }
}
