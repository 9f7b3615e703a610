import Foundation
import SessionKit

/// An HTTP/1.1 server on the loopback interface, in the test's own process, for testing HTTP clients against
/// real sockets and real timing.
///
/// ```swift
/// try await LocalServer.withRunning { server async throws in
///     server.route("GET", "/profile") { request in
///         request.bearerToken == "alice-token" ? .json(#"{"name":"Alice"}"#) : .status(401)
///     }
///     var request = URLRequest(url: server.url("/profile"))
///     request.setValue("Bearer alice-token", forHTTPHeaderField: "Authorization")
///     let session = URLSession(configuration: .ephemeral)
///     defer { session.finishTasksAndInvalidate() }
///     let (data, _) = try await session.data(for: request)
///     #expect(String(decoding: data, as: UTF8.self) == #"{"name":"Alice"}"#)
///     #expect(server.requests.map(\.path) == ["/profile"])
/// }
/// ```
///
/// Write `server async throws in`: Swift infers a closure's `throws` from the `try`s it can see, and those inside
/// `#expect(try …)` are hidden in the macro, so `{ server in … }` may fail to compile with
/// "errors thrown from here are not handled".
///
/// ```swift
/// // Also: responses that are late or broken on purpose.
/// server.route("/slow") { _ in .text("late").delayed(by: .seconds(2)) }
/// server.route("/broken") { _ in .json("{}").failing(with: .truncatedBody) }
/// ```
///
/// It speaks HTTP/1.1 with keep-alive (HTTP/1.0 connections close after the response), reads bodies framed by
/// `Content-Length` or `Transfer-Encoding: chunked`, answers `Expect: 100-continue`, and answers pipelined
/// requests in order. Bad input gets 400 (malformed), 431 (head too large), 413 (body too large) or 408
/// (a client that stalls mid-request), and its connection is closed; other connections are not affected.
///
/// - Important: One dedicated thread does all socket I/O with `poll`; every request's handler runs in its own
///   task, so handlers may suspend for as long as they like without holding up other requests or any thread.
///   A client that closes its connection while its request is being handled cancels the handler's task
///   (a half-closed connection counts as closed). ``stop()`` cancels every handler still running.
public final class LocalServer: Sendable {
    /// Answers one request. Runs in a task of its own; suspending in it delays only its own response.
    public typealias Handler = @Sendable (Request) async -> Response

    /// The server's root URL, `http://127.0.0.1:<port>/`.
    public let baseURL: URL
    /// The TCP port the system picked.
    public let port: Int
    /// The limits and timeouts in force.
    public let configuration: Configuration
    private let core: ServerCore

    private init(core: ServerCore, port: Int) {
        self.core = core
        self.port = port
        configuration = core.configuration
        baseURL = URL(string: "http://127.0.0.1:\(port)/")!
    }

    deinit {
        // A server nobody can reach any more must not keep its thread and sockets.
        core.requestStop()
    }

    /// Starts a server on 127.0.0.1 with a port the system picks.
    ///
    /// - Parameters:
    ///   - configuration: Limits and timeouts.
    ///   - handler: Answers requests no route matches; 404 by default.
    /// - Returns: The running server, already accepting connections.
    /// - Throws: `SessionError` `.invalidInput` for an unusable configuration, `.networkUnavailable` when the
    ///   socket cannot be opened.
    /// - Important: Call ``stop()`` when done (or use ``withRunning(configuration:handler:isolation:_:)``); a
    ///   server that is released without it stops too, but nothing waits for it.
    public static func start(
        configuration: Configuration = .init(),
        handler: @escaping Handler = { _ in .notFound }
    ) async throws -> LocalServer {
        try configuration.validate()
        let listener: (descriptor: Int32, port: Int)
        let wake: (reading: Int32, writing: Int32)
        do {
            listener = try Socket.makeLoopbackListener(backlog: 4096)
        } catch {
            throw SessionError(.networkUnavailable, "LocalServer could not listen on 127.0.0.1: \(error)")
        }
        do {
            wake = try Socket.makeWakePipe()
        } catch {
            Socket.close(listener.descriptor)
            throw SessionError(.networkUnavailable, "LocalServer could not create its wake pipe: \(error)")
        }
        let core = ServerCore(configuration: configuration, fallback: handler, wakeDescriptor: wake.writing)
        let thread = Thread {
            ServerLoop(core: core, listener: listener.descriptor, wakeDescriptor: wake.reading).run()
        }
        thread.name = "LocalServer 127.0.0.1:\(listener.port)"
        thread.start()
        return LocalServer(core: core, port: listener.port)
    }

    /// Starts a server, runs `body` with it, and stops it, whether `body` returns or throws.
    ///
    /// - Parameters:
    ///   - configuration: Limits and timeouts.
    ///   - handler: Answers requests no route matches; 404 by default.
    ///   - isolation: The caller's actor, inherited so `body` may touch its state.
    ///   - body: The work to do while the server runs.
    /// - Returns: What `body` returns.
    /// - Throws: What ``start(configuration:handler:)`` or `body` throws; the server is stopped first.
    public static func withRunning<T>(
        configuration: Configuration = .init(),
        handler: @escaping Handler = { _ in .notFound },
        isolation: isolated (any Actor)? = #isolation,
        _ body: (LocalServer) async throws -> T
    ) async throws -> T {
        let server = try await start(configuration: configuration, handler: handler)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// The URL of a path (and query) on this server.
    ///
    /// - Parameter pathAndQuery: Such as `/profile` or `/search?q=swift`; a leading `/` is optional.
    /// - Returns: The absolute URL.
    public func url(_ pathAndQuery: String) -> URL {
        let relative = pathAndQuery.hasPrefix("/") ? String(pathAndQuery.dropFirst()) : pathAndQuery
        return URL(string: relative, relativeTo: baseURL)?.absoluteURL ?? baseURL
    }

    /// Answers requests for `path` (and `method`, if given) with `handler`, replacing any route for the same
    /// method and path. Routes win over the fallback handler; a route for a method wins over one for any method.
    ///
    /// - Parameters:
    ///   - method: The method, compared exactly (`"GET"`), or `nil` for any method.
    ///   - path: The path without the query, compared exactly and still percent-encoded.
    ///   - handler: The handler.
    /// - Important: May be called while the server runs; requests that arrive after it returns use the new route.
    public func route(_ method: String? = nil, _ path: String, _ handler: @escaping Handler) {
        core.setRoute(method: method, path: path, handler: handler)
    }

    /// Answers requests for `path`, whatever their method, with `handler`; the same as `route(nil, path, handler)`.
    ///
    /// - Parameters:
    ///   - path: The path without the query, compared exactly and still percent-encoded.
    ///   - handler: The handler.
    public func route(_ path: String, _ handler: @escaping Handler) {
        core.setRoute(method: nil, path: path, handler: handler)
    }

    /// Removes the route for `method` and `path`, if there is one.
    ///
    /// - Parameters:
    ///   - method: The method the route was added with, or `nil`.
    ///   - path: The path the route was added with.
    public func removeRoute(_ method: String?, _ path: String) {
        core.setRoute(method: method, path: path, handler: nil)
    }

    /// Removes the route for `path` and any method, if there is one.
    ///
    /// - Parameter path: The path the route was added with.
    public func removeRoute(_ path: String) {
        core.setRoute(method: nil, path: path, handler: nil)
    }

    /// Every request received, in arrival order (the order each was completely received), including ones still
    /// being answered.
    ///
    /// - Important: A request is recorded before its handler runs, so a handler finds its own request here.
    public var requests: [RecordedRequest] { core.requests }

    /// Empties ``requests``.
    public func clearRequests() {
        core.clearRequests()
    }

    /// Stops the server: closes the listener and every connection and cancels every handler still running.
    ///
    /// - Important: Returns only once every socket is closed, so a connection attempt made afterwards is
    ///   refused. It does not wait for cancelled handlers to return. Calling it again, or concurrently, waits for
    ///   the same stop.
    public func stop() async {
        await core.stop()
    }
}
