/// The handlers a ``LocalServer`` answers with: exact routes first, then the fallback.
struct RouteTable: Sendable {
    private struct Key: Hashable {
        var method: String?
        var path: String
    }

    private var routes: [Key: LocalServer.Handler] = [:]
    private let fallback: LocalServer.Handler

    /// Creates a table that answers every request with `fallback`.
    ///
    /// - Parameter fallback: The handler for requests no route matches.
    init(fallback: @escaping LocalServer.Handler) {
        self.fallback = fallback
    }

    /// Adds or replaces the route for `method` (any method when `nil`) and the exact `path`.
    ///
    /// - Parameters:
    ///   - method: The method, compared case-sensitively (RFC 9110 §9.1), or `nil` for any.
    ///   - path: The path without the query, compared exactly.
    ///   - handler: The handler, or `nil` to remove the route.
    mutating func setRoute(method: String?, path: String, handler: LocalServer.Handler?) {
        routes[Key(method: method, path: path)] = handler
    }

    /// The handler for a request: a route for its method and path, else a route for its path and any method,
    /// else the fallback.
    ///
    /// - Parameters:
    ///   - method: The request's method.
    ///   - path: The request's path, without the query.
    /// - Returns: The handler.
    func handler(method: String, path: String) -> LocalServer.Handler {
        routes[Key(method: method, path: path)] ?? routes[Key(method: nil, path: path)] ?? fallback
    }
}
