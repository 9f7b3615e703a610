import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An answer that arrived before the session's end but reaches its caller's task after it is never handed over, on
/// every request kind: between the answer and the caller's task running again, `end()` may run, and the caller must
/// then get `sessionEnded`, not the answer (it would land in the next user's state).
///
/// The window is made wide and exact with a task executor the test holds: the request runs on it, the server answers,
/// the answer's resumption waits in the held executor's queue, the session ends, then the executor runs (task
/// executors need macOS 15 and its kin; Linux has them).
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct LateAnswerTests {
    enum Kind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case data, bytes, upload, uploadFromFile, download

        var testDescription: String { rawValue }

        var method: String { self == .upload || self == .uploadFromFile ? "PUT" : "GET" }

        /// Sends the kind's request to `url` and returns the status it was handed.
        func send(_ session: UserSession, to url: URL, file: URL) async throws -> Int {
            var request = URLRequest(url: url)
            request.httpMethod = method
            switch self {
            case .data: return try await session.data(for: request).1.statusCode
            case .bytes: return try await session.bytes(for: request).1.statusCode
            case .upload: return try await session.upload(for: request, from: Data("body".utf8)).1.statusCode
            case .uploadFromFile: return try await session.upload(for: request, fromFile: file).1.statusCode
            case .download: return try await session.download(for: request).1.statusCode
            }
        }
    }

    /// A task executor whose queue the test can hold, and which counts the jobs it was given.
    @available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
    final class HeldExecutor: TaskExecutor, @unchecked Sendable {
        private let queue = DispatchQueue(label: "LateAnswerTests.held")
        private let count = Lock(0)
        private let queued = Lock(0)

        var enqueued: Int { count.withLock { $0 } }
        /// Jobs given and not yet run: while the queue is held, the task's next step waits there.
        var waiting: Int { queued.withLock { $0 } }

        func hold() { queue.suspend() }

        /// Returns once everything given to the executor before has run: a step of the caller's task that was
        /// running (`suspend` stops only what has not started) has ended, and the task waits for its answer.
        func settle() async {
            await withCheckedContinuation { (settled: CheckedContinuation<Void, Never>) in
                queue.async { settled.resume() }
            }
        }

        func release() { queue.resume() }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            count.withLock { $0 += 1 }
            queued.withLock { $0 += 1 }
            queue.async {
                self.queued.withLock { $0 -= 1 }
                job.runSynchronously(on: self.asUnownedTaskExecutor())
            }
        }
    }

    @Test(arguments: Kind.allCases)
    func anAnswerWhoseCallerRunsOnlyAfterTheEndIsNeverHandedOver(_ kind: Kind) async throws {
        guard #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) else { return }
        let gate = Gate()
        try await LocalServer.withRunning { server async throws in
            server.route(kind.method, "/late") { _ in
                await gate.wait()
                return .json(#"{"for":"alice"}"#)
            }
            try await TemporaryDirectory.with { directory in
                let file = directory.appendingPathComponent("body")
                try Data("body".utf8).write(to: file)
                let session = UserSession(account: alice, tokens: tokens("alice"))
                defer { session.end() }
                let executor = HeldExecutor()
                let url = server.url("/late")
                let call = Task {
                    try await withTaskExecutorPreference(executor) {
                        try await kind.send(session, to: url, file: file)
                    }
                }
                await gate.waitForArrivals(1)
                // The request reached the server, but the caller's task may not have suspended yet: on a loaded
                // machine its thread can be preempted between handing the request over and its `await`. Held then,
                // that step runs on (suspending a queue stops only what has not started), the answer finds the task
                // not yet waiting and the task goes on in that step, never through the held queue (seen twice in 100
                // runs beside two busy loops, on the data and bytes kinds). Settled first, it is waiting.
                await executor.settle()
                executor.hold()
                let before = executor.enqueued
                gate.open()
                // The answer has come: its caller's resumption waits in the held queue. (A kind whose caller took a
                // step between the request's arrival and the hold has that step waiting there instead, and the answer
                // cannot enqueue another: the task is already waiting. Its answer, whenever it comes, still meets
                // the end first.)
                #expect(await eventually(within: .seconds(30)) { executor.enqueued > before || executor.waiting > 0 })
                session.end()
                executor.release()
                switch await call.result {
                case .success(let status):
                    Issue.record("\(kind): an answer (\(status)) was handed over after the session ended")
                case .failure(let error):
                    #expect((error as? SessionError)?.code == .sessionEnded, "\(kind): \(error)")
                }
            }
        }
    }
}
