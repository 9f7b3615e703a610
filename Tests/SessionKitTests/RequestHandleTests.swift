import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RequestHandleTests {
    /// `end()` may reach a request between the creation of its task and its start: it must then never start.
    @Test func aRequestCancelledBeforeItStartsNeverStarts() async throws {
        try await LocalServer.withRunning { server async throws in
            let urlSession = URLSession(configuration: .ephemeral)
            let handle = RequestHandle()
            let (outcomes, outcome) = AsyncStream.makeStream(of: URLError.Code?.self)
            let task = urlSession.dataTask(with: server.url("/never")) { _, _, error in
                outcome.yield((error as? URLError)?.code)
                outcome.finish()
            }
            #expect(handle.markCancelled() == nil)
            #expect(!handle.start(task), "cancelled first: never started")
            #expect(task.state == .suspended)
            // The caller then cancels the task that never started, so that its session can be invalidated.
            urlSession.cancelWithoutRacingCompletion([task], thenInvalidate: true)
            var codes: [URLError.Code?] = []
            for await code in outcomes { codes.append(code) }
            #expect(codes == [.cancelled])
            #expect(server.requests.isEmpty)
        }
    }

    @Test func aRequestCancelledAfterItStartedHandsBackItsTask() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server async throws in
            server.route("/held") { _ in
                await gate.wait()
                return .json("{}")
            }
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.cancelWithoutRacingCompletion([], thenInvalidate: true) }
            let handle = RequestHandle()
            let (outcomes, outcome) = AsyncStream.makeStream(of: URLError.Code?.self)
            let task = urlSession.dataTask(with: server.url("/held")) { _, _, error in
                outcome.yield((error as? URLError)?.code)
                outcome.finish()
            }
            #expect(handle.start(task))
            await gate.waitForArrivals(1)
            let started = try #require(handle.markCancelled())
            #expect(started === task)
            urlSession.cancelWithoutRacingCompletion([started])
            var codes: [URLError.Code?] = []
            for await code in outcomes { codes.append(code) }
            #expect(codes == [.cancelled])
            gate.open()
        }
    }
    /// A caller's cancellation reaches a started transfer only through its session's delegate queue, never directly:
    /// a cancellation that FoundationNetworking ran while a delegate callback was completing the task on that queue
    /// would stop the process. With the delegate queue held, the cancelled download's task must still be running
    /// once the URLSession's work queue has done everything queued before the check; it is cancelled when the
    /// queue is let go.
    @Test func aCallersCancellationReachesATransferOnlyThroughTheDelegateQueue() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server async throws in
            server.route("/held") { _ in
                await gate.wait()
                return .json("{}")
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            let request = Task { try await session.download(for: get(server, "/held")) }
            await gate.waitForArrivals(1)
            let transfers = try #require(session.lifetime.withLock { $0.transfers })
            let running = await withCheckedContinuation { (found: CheckedContinuation<[URLSessionTask], Never>) in
                transfers.urlSession.getAllTasks { found.resume(returning: $0) }
            }
            let task = try #require(running.first)

            let held = DispatchSemaphore(value: 0)
            let holding = DispatchSemaphore(value: 0)
            transfers.urlSession.delegateQueue.addOperation {
                holding.signal()
                held.wait()
            }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    holding.wait()
                    done.resume()
                }
            }
            request.cancel()
            // Reading `priority` waits for the task's work queue: a cancellation made directly would have taken its
            // first step there by now, and the task would no longer be running.
            _ = task.priority
            #expect(task.state == .running, "the task was cancelled without going through the delegate queue")
            held.signal()
            await #expect(throws: CancellationError.self) { try await request.value }
            gate.open()
        }
    }

    #if canImport(FoundationNetworking)
        /// On Linux a data request's completion handler runs on its URLSession's own work queue, where both steps
        /// of a cancellation run too, so a cancellation cannot race it and is made directly; and no operation
        /// queue's thread is woken for each answer. What the session's URLSession is given as its delegate queue
        /// runs what it gets before returning, on the caller's thread.
        @Test func aDataRequestsCompletionRunsWhereItsURLSessionFinishedIt() {
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            let caller = pthread_self()
            let ran = Lock<pthread_t?>(nil)
            session.urlSession.delegateQueue.addOperation { ran.withLock { $0 = pthread_self() } }
            let thread = ran.withLock { $0 }
            #expect(
                thread.map { pthread_equal($0, caller) != 0 } == true, "it would wait for an operation queue's thread")
            #expect(session.urlSession.endings != nil, "its cancellations would not leave the caller's thread")
        }
    #endif
}
