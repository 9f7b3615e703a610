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
}
