import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// Serialized: several of its tests hold FoundationNetworking's one work queue (``WorkQueueHold``), which every
// URLSession of the process shares; two holds at once wait on each other, and a test's bound then measures the other.
@Suite(.serialized, .timeLimit(.minutes(TimeLimit.ordinary))) struct RequestHandleTests {
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
            defer { urlSession.cancelWithoutRacingCompletion([URLSessionTask](), thenInvalidate: true) }
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
    @Test(.enabled(if: TransportChoice.process == .urlSession, "a URLSession's delegate queue"))
    func aCallersCancellationReachesATransferOnlyThroughTheDelegateQueue() async throws {
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
            let transfers = try #require(session.madeTransferSession)
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
        /// of a cancellation run too, so a cancellation cannot race it; and no operation queue's thread is woken
        /// for each answer. What the session's URLSession is given as its delegate queue runs what it gets before
        /// returning, on the caller's thread, and the session has an `endings` queue for its cancellations.
        @Test func aDataRequestsCompletionRunsWhereItsURLSessionFinishedIt() throws {
            let session = UserSession(
                account: alice, tokens: tokens("alice"), configuration: UserSession.Configuration().onURLSession)
            defer { session.end() }
            let urlSession = try #require(session.urlSession)
            let caller = pthread_self()
            let ran = Lock<pthread_t?>(nil)
            urlSession.delegateQueue.addOperation { ran.withLock { $0 = pthread_self() } }
            let thread = ran.withLock { $0 }
            #expect(
                thread.map { pthread_equal($0, caller) != 0 } == true, "it would wait for an operation queue's thread")
            #expect(urlSession.endings != nil, "its cancellations would not leave the caller's thread")
        }

        /// A caller's cancellation never waits for FoundationNetworking's work queue: in 6.3 `cancel()` waits for
        /// it, and a Swift task's cancellation handler holds the task's status lock, which the completion handler
        /// that resumes the task needs on that queue (the deadlock of swift-corelibs-foundation#5412). With every
        /// URLSession's work queue held, cancelling the calling task must return at once; the request is cancelled
        /// once the queue is let go.
        @Test func aCallersCancellationNeverWaitsForFoundationNetworkingsQueue() async throws {
            let gate = Gate()
            try await LocalServer.withRunning { server async throws in
                routeHeldAndQuick(server, gate)
                let session = UserSession(account: alice, tokens: tokens("alice"))
                defer { session.end() }
                let request = Task { try await session.data(for: get(server, "/held")) }
                await gate.waitForArrivals(1)

                let returned = DispatchSemaphore(value: 0)
                let hold = try await WorkQueueHold.take(through: server.url("/quick"), releasingWhen: returned)
                // On a thread of its own: a cancellation that waited for the held queue would stop it, not the test.
                Thread {
                    request.cancel()
                    returned.signal()
                }.start()
                #expect(
                    await !hold.eventWaitedForTheQueue, "the cancellation waited for FoundationNetworking's work queue")
                await #expect(throws: CancellationError.self) { try await request.value }
                gate.open()
            }
        }

        /// Creating a task waits for FoundationNetworking's work queue, so it holds no lock that anything else of the
        /// session needs: with every URLSession's work queue held while a request creates its task, the session's
        /// tokens and requests can still be read and `end()` returns; the request then fails as ended, its task
        /// never created on the URLSession `end()` invalidates (which would stop the process).
        @Test(.enabled(if: TransportChoice.process == .urlSession, "a task is created on FoundationNetworking's queue"))
        func endNeverWaitsForATaskBeingCreated() async throws {
            try await LocalServer.withRunning { server async throws in
                routeHeldAndQuick(server, Gate())
                let session = UserSession(account: alice, tokens: tokens("alice"))
                let returned = DispatchSemaphore(value: 0)
                let hold = try await WorkQueueHold.take(through: server.url("/quick"), releasingWhen: returned)
                let request = Task { try await session.data(for: get(server, "/quick")) }
                // Creating its task: it holds the creation lock, waiting for the held queue.
                await eventually { session.creation.withExclusiveLockIfAvailable { _ in } == nil }
                // On a thread of its own: whatever waited for the held queue would stop it, not the test.
                Thread {
                    _ = session.tokens
                    _ = session.requestsInFlight
                    session.end()
                    returned.signal()
                }.start()
                #expect(await !hold.eventWaitedForTheQueue, "the session waited for a task being created")
                let error = await #expect(throws: SessionError.self) { try await request.value }
                #expect(error?.code == .sessionEnded)
                #expect(session.requestsInFlight == 0)
                #expect(server.requests.filter { $0.path == "/quick" }.count == 1, "only the hold's request was sent")
            }
        }

        /// Callers learn of `end()` without waiting for FoundationNetworking to stop their transfers: stopping them
        /// waits for its work queue once per task (a second to minutes with 1,000 in flight), so `end()` answers every
        /// caller with `sessionEnded` first. With every URLSession's work queue held, a request held at the server
        /// throws `sessionEnded` at once after `end()`; its task is cancelled once the queue is let go, and the
        /// server's answer, when it comes, is dropped.
        @Test func callersLearnOfTheEndWithoutWaitingForFoundationNetworking() async throws {
            let gate = Gate()
            try await LocalServer.withRunning { server async throws in
                routeHeldAndQuick(server, gate)
                let session = UserSession(account: alice, tokens: tokens("alice"))
                let request = Task { try await session.data(for: get(server, "/held")) }
                await gate.waitForArrivals(1)
                let answered = DispatchSemaphore(value: 0)
                let hold = try await WorkQueueHold.take(through: server.url("/quick"), releasingWhen: answered)
                #expect(session.finish()?.cancelledRequests == 1)
                let error = await #expect(throws: SessionError.self) { try await request.value }
                answered.signal()
                #expect(error?.code == .sessionEnded)
                #expect(await !hold.eventWaitedForTheQueue, "the caller waited for FoundationNetworking's work queue")
                gate.open()
                #expect(session.requestsInFlight == 0)
            }
        }

        /// FoundationNetworking stops the process when a task is created on an invalidated URLSession, and a request
        /// creates its task under the session's `creation` lock, not the lock `end()` takes: so the invalidation
        /// `end()` queues waits for a creation under way, and no task is created after it. With the creation lock
        /// held (as by a request creating its task), the session's `endings` queue stops before invalidating; once
        /// the lock is let go it invalidates, and refuses every later creation.
        @Test func theURLSessionIsInvalidatedOnlyAfterATaskBeingCreatedIsCreated() async throws {
            let session = UserSession(
                account: alice, tokens: tokens("alice"), configuration: UserSession.Configuration().onURLSession)
            let endings = try #require(session.urlSession?.endings)
            let (holding, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            Thread {
                session.creation.withSharedLock { _ in
                    holding.signal()
                    // Bounded, so that an `end()` that waits for this creation on the test's own thread (mutant 84)
                    // fails the test by name instead of hanging it.
                    _ = release.wait(timeout: .now() + .seconds(5))
                }
            }.start()
            await onThreadOfItsOwn { holding.wait() }
            session.end()
            let reached = DispatchSemaphore(value: 0)
            endings.async { reached.signal() }
            // What must not happen: half a second is far longer than the endings take when nothing holds them.
            let invalidatedMeanwhile = await onThreadOfItsOwn {
                reached.wait(timeout: .now() + .milliseconds(500)) == .success
            }
            #expect(!invalidatedMeanwhile, "the URLSession was invalidated while a task was being created")
            release.signal()
            if !invalidatedMeanwhile { await onThreadOfItsOwn { reached.wait() } }
            #expect(session.creation.withSharedLock { $0 } == false, "a later request could create a task on it")
        }

        /// A session's cancellations wait for FoundationNetworking's work queue off Swift's cooperative pool: with
        /// every URLSession's work queue held, sessions ending with requests in flight (more of them than the pool
        /// has threads) leave the pool free to run other tasks.
        @Test func endingSessionsNeverTakeTheCooperativePoolWhileFoundationNetworkingIsBusy() async throws {
            let gate = Gate()
            try await LocalServer.withRunning { server async throws in
                routeHeldAndQuick(server, gate)
                let count = ProcessInfo.processInfo.activeProcessorCount + 2
                let sessions = (0..<count).map { _ in UserSession(account: alice, tokens: tokens("alice")) }
                let requests = sessions.map { session in
                    Task { try await session.data(for: get(server, "/held")) }
                }
                await gate.waitForArrivals(count)

                let ran = DispatchSemaphore(value: 0)
                let hold = try await WorkQueueHold.take(through: server.url("/quick"), releasingWhen: ran)
                for session in sessions { session.end() }
                // Each ending's cancellation now waits for the held queue; a task must still get a thread.
                Task.detached { ran.signal() }
                #expect(await !hold.eventWaitedForTheQueue, "the endings took every thread of Swift's cooperative pool")
                for request in requests {
                    await #expect(throws: SessionError.self) { try await request.value }
                }
                gate.open()
            }
        }
    #endif
}

#if canImport(FoundationNetworking)
    /// `/held` answers once `gate` opens; `/quick` at once (what ``WorkQueueHold`` holds the queue with).
    private func routeHeldAndQuick(_ server: LocalServer, _ gate: Gate) {
        server.route("/held") { _ in
            await gate.wait()
            return .json("{}")
        }
        server.route("/quick") { _ in .json("{}") }
    }

    /// Holds FoundationNetworking's work queue, which every URLSession of the process targets: a request of a
    /// session whose completion handlers run on that queue (``ImmediateDelegateQueue``) blocks in its handler until
    /// an event is signalled, or for a second if it is not (what it waits for takes microseconds when nothing waits
    /// for the queue). Every wait is on threads of its own, never on Swift's cooperative pool, which the code under
    /// test may starve, and the release is armed before the code under test runs, which may block until then.
    private struct WorkQueueHold {
        private let done = DispatchSemaphore(value: 0)
        private let timedOut = Lock(false)

        /// Returns once the queue is held; it is let go once `event` is signalled, or a second from now.
        static func take(through url: URL, releasingWhen event: DispatchSemaphore) async throws -> WorkQueueHold {
            let hold = WorkQueueHold()
            let urlSession = URLSession(
                configuration: .ephemeral, delegate: nil, delegateQueue: ImmediateDelegateQueue())
            let holding = DispatchSemaphore(value: 0)
            let held = DispatchSemaphore(value: 0)
            urlSession.dataTask(with: url) { _, _, _ in
                holding.signal()
                held.wait()
            }.resume()
            let (done, timedOut) = (hold.done, hold.timedOut)
            // One thread both reports the hold and lets it go, never waiting for Swift's cooperative pool: in a
            // parallel run other tests' `URLSession.data(for:)` calls wait for the held queue on the pool's threads,
            // and a release that needed the pool to start would then never come (a hang seen with two cores).
            await withCheckedContinuation { (taken: CheckedContinuation<Void, Never>) in
                Thread {
                    holding.wait()
                    taken.resume()
                    let late = event.wait(timeout: .now() + 1) == .timedOut
                    timedOut.withLock { $0 = late }
                    held.signal()
                    if late { event.wait() }
                    urlSession.finishTasksAndInvalidate()
                    done.signal()
                }.start()
            }
            return hold
        }

        /// Whether the event waited for the queue (it was not signalled while the queue was held); returns once
        /// the queue has been let go and the event signalled.
        var eventWaitedForTheQueue: Bool {
            get async {
                let (done, timedOut) = (done, timedOut)
                await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                    Thread {
                        done.wait()
                        finished.resume()
                    }.start()
                }
                return timedOut.withLock { $0 }
            }
        }
    }
#endif
