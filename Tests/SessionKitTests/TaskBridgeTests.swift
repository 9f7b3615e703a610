import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``TaskBridge``'s own rules, where no request kind isolates them: which error a call ends with when its deadline
/// and its caller's cancellation both reached it, and that a call is answered once.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct TaskBridgeTests {
    struct TimedOut: Error {}

    /// Runs `body` with a URL whose server holds every request until the test ends, and a URLSession to send it on.
    static func withHeldRequest(_ body: (URL, URLSession) async throws -> Void) async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server async throws in
            server.route("/held") { _ in
                await gate.wait()
                return .json("{}")
            }
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.cancelWithoutRacingCompletion([URLSessionTask](), thenInvalidate: true) }
            defer { gate.open() }
            try await body(server.url("/held"), urlSession)
        }
    }

    /// A call the bridge answered itself (here a start that `admits` refused, as after a session's end) has used its
    /// one right to answer: the task's own completion, which its cancellation still delivers on some platforms, finds
    /// the right claimed and resumes nothing (a second resume of the call's continuation is undefined behaviour).
    @Test func aCallAnsweredByARefusedStartHasUsedItsOneAnswer() async throws {
        try await Self.withHeldRequest { url, urlSession in
            let captured = Lock<TaskAnswer<Data>?>(nil)
            let discarded = Lock(0)
            await #expect(throws: TimedOut.self) {
                _ = try await TaskBridge.run(
                    cancellingThrough: urlSession, admits: { false }, notStarted: TimedOut(),
                    discardUnstarted: { task in
                        discarded.withLock { $0 += 1 }
                        urlSession.cancelWithoutRacingCompletion([task])
                    }
                ) { (answer: TaskAnswer<Data>) in
                    captured.withLock { $0 = answer }
                    return urlSession.dataTask(with: url)
                }
            }
            let answer = try #require(captured.withLock { $0 })
            #expect(discarded.withLock { $0 } == 1, "the refused task was not handed back to be discarded")
            // What the cancelled task's completion does: it must find the answer given and resume nothing.
            #expect(!answer.resume(returning: Data()), "a second answer resumed the call again")
            #expect(!answer.resume(throwing: TimedOut()), "a second answer resumed the call again")
        }
    }

    /// A caller cancelled after its exchange's deadline had passed, but before the exchange's answer came back, is
    /// told of its cancellation, never of a timeout: it stopped waiting itself, and a caller that treats a timeout
    /// as "the server is slow, try again" must not retry a call it cancelled.
    @Test func aCallerCancelledOnceItsDeadlineHadPassedIsToldOfTheCancellationNotATimeout() async throws {
        try await Self.withHeldRequest { url, urlSession in
            let handle = RequestHandle()
            // The completion the deadline's cancellation causes waits until the caller has been cancelled too.
            let completionReached = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let call = Task {
                try await TaskBridge.run(
                    handle: handle, cancellingThrough: urlSession, deadline: .milliseconds(50),
                    onTimeout: { _ in TimedOut() }, notStarted: CancellationError()
                ) { (answer: TaskAnswer<Int>) in
                    urlSession.dataTask(with: url) { _, _, error in
                        completionReached.signal()
                        release.wait()
                        _ = error.map { answer.resume(throwing: $0) } ?? answer.resume(returning: 1)
                    }
                }
            }
            await onThreadOfItsOwn { completionReached.wait() }
            #expect(handle.hasExpired, "the deadline's cancellation came first")
            call.cancel()
            release.signal()
            guard case .failure(let error) = await call.result else {
                Issue.record("a cancelled call returned a value")
                return
            }
            #expect(!(error is TimedOut), "a cancelled caller was told its call timed out")
            #expect(error is CancellationError || (error as? URLError)?.code == .cancelled, "\(error)")
        }
    }

    /// Without a cancellation, the same deadline is told as the caller's timeout: the test above is about the
    /// cancellation, not a deadline that never maps.
    @Test func aCallWhoseDeadlinePassedIsToldOfTheTimeout() async throws {
        try await Self.withHeldRequest { url, urlSession in
            let outcome = await Task {
                try await TaskBridge.run(
                    cancellingThrough: urlSession, deadline: .milliseconds(50), onTimeout: { _ in TimedOut() },
                    notStarted: CancellationError()
                ) { (answer: TaskAnswer<Int>) in
                    urlSession.dataTask(with: url) { _, _, error in
                        _ = error.map { answer.resume(throwing: $0) } ?? answer.resume(returning: 1)
                    }
                }
            }.result
            guard case .failure(let error) = outcome else {
                Issue.record("a call past its deadline returned a value")
                return
            }
            #expect(error is TimedOut, "\(error)")
        }
    }
}
