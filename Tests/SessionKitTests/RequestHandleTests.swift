import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite struct RequestHandleTests {
    /// `end()` may reach a request between the creation of its task and its start: it must then never start.
    @Test func aRequestCancelledBeforeItStartsNeverStarts() async throws {
        try await LocalServer.withRunning { server async throws in
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.invalidateAndCancel() }
            let handle = RequestHandle()
            let task = urlSession.dataTask(with: server.url("/never")) { _, _, _ in
                Issue.record("a task that never started has no completion to report")
            }
            #expect(handle.markCancelled() == nil)
            #expect(!handle.start(task), "cancelled first: never started, and never cancelled either")
            #expect(task.state == .suspended)
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
            defer { urlSession.invalidateAndCancel() }
            let handle = RequestHandle()
            let (outcomes, outcome) = AsyncStream.makeStream(of: URLError.Code?.self)
            let task = urlSession.dataTask(with: server.url("/held")) { _, _, error in
                outcome.yield((error as? URLError)?.code)
                outcome.finish()
            }
            handle.start(task)
            await gate.waitForArrivals(1)
            let started = try #require(handle.markCancelled())
            #expect(started === task)
            started.cancel()
            var codes: [URLError.Code?] = []
            for await code in outcomes { codes.append(code) }
            #expect(codes == [.cancelled])
            gate.open()
        }
    }
}
