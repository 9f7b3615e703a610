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
            let error: (any Error)? = await withCheckedContinuation { continuation in
                let task = urlSession.dataTask(with: server.url("/never")) { _, _, error in
                    continuation.resume(returning: error)
                }
                #expect(handle.markCancelled() == nil)
                handle.start(task)
            }
            #expect((error as? URLError)?.code == .cancelled)
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
