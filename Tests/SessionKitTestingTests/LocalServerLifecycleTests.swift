import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Starting and stopping: what is closed, what is cancelled, and when `stop()` returns.
@Suite(.timeLimit(.minutes(10))) struct LocalServerLifecycleTests {
    private struct Boom: Error {
        var port: Int
    }

    private func connectionIsRefused(port: Int) async throws -> Bool {
        try await onDedicatedThread {
            do {
                _ = try RawConnection(port: port)
                return false
            } catch let error as RawSocketError {
                return error.code == ECONNREFUSED
            }
        }
    }

    @Test func stoppedServerRefusesConnections() async throws {
        let server = try await LocalServer.start(handler: { _ in .text("up") })
        let client = TestHTTPClient()
        defer { client.invalidate() }
        #expect(try await client.get(server.baseURL).status == 200)

        await server.stop()

        #expect(try await connectionIsRefused(port: server.port))
        await #expect(throws: URLError.self) { try await client.get(server.url("/again")) }
    }

    @Test func stopIsIdempotentAndConcurrentCallsAllWait() async throws {
        let server = try await LocalServer.start()
        async let first: Void = server.stop()
        async let second: Void = server.stop()
        _ = await (first, second)
        await server.stop()
        #expect(try await connectionIsRefused(port: server.port))
    }

    @Test func withRunningStopsTheServerWhenTheBodyThrows() async throws {
        var port = 0
        do {
            try await LocalServer.withRunning { server async throws in
                throw Boom(port: server.port)
            }
        } catch let boom as Boom {
            port = boom.port
        }
        try #require(port != 0)
        #expect(try await connectionIsRefused(port: port))
    }

    @Test func withRunningStopsTheServerWhenTheBodyReturns() async throws {
        let port = try await LocalServer.withRunning { server in server.port }
        #expect(try await connectionIsRefused(port: port))
    }

    @MainActor @Test func withRunningRunsTheBodyOnTheCallersActor() async throws {
        var visits = 0
        try await LocalServer.withRunning { server async throws in
            MainActor.assertIsolated()
            visits += 1
        }
        #expect(visits == 1)
    }

    @Test func stopCancelsSuspendedHandlersAndClosesEveryConnection() async throws {
        let started = Gate()
        let cancelled = Gate()
        let server = try await LocalServer.start(handler: { _ in
            started.open()
            do {
                try await Gate().wait()  // Never opens: only cancellation ends this wait.
            } catch {
                cancelled.open()
            }
            return .text("too late")
        })
        let (busy, idle) = try await onDedicatedThread {
            let busy = try RawConnection(port: server.port)
            try busy.send(rawGET("/forever"))
            return (busy, try RawConnection(port: server.port))
        }
        try await started.wait()

        await server.stop()

        try await cancelled.wait()
        let (busyRest, idleRest) = try await onDedicatedThread { (try busy.readToEnd(), try idle.readToEnd()) }
        #expect(busyRest.isEmpty && idleRest.isEmpty)
        #expect(try await connectionIsRefused(port: server.port))
    }

    @Test func clientGoingAwayCancelsItsHandler() async throws {
        let started = Gate()
        let cancelled = Gate()
        let handler: LocalServer.Handler = { _ in
            started.open()
            do { try await Gate().wait() } catch { cancelled.open() }
            return .text("nobody is listening")
        }
        try await LocalServer.withRunning(handler: handler) { server async throws in
            let connection = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send(rawGET("/abandoned"))
                return connection
            }
            try await started.wait()
            _ = connection.descriptor
            shutdown(connection.descriptor, Int32(SHUT_RDWR))
            try await cancelled.wait()
        }
    }

    @Test func rejectsAnUnusableConfiguration() async throws {
        let configurations = [
            LocalServer.Configuration(maximumHeaderBytes: 10),
            LocalServer.Configuration(maximumBodyBytes: -1),
            LocalServer.Configuration(requestTimeout: .zero),
            LocalServer.Configuration(idleTimeout: .seconds(-1)),
        ]
        for configuration in configurations {
            await #expect(throws: SessionError.self) { try await LocalServer.start(configuration: configuration) }
        }
    }
}
