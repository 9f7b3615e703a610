import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URLSession client for one test: ephemeral, so nothing is shared between tests.
struct TestHTTPClient: Sendable {
    let session: URLSession

    init(maximumConnectionsPerHost: Int = 8) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maximumConnectionsPerHost
        configuration.timeoutIntervalForRequest = 60
        session = URLSession(configuration: configuration)
    }

    /// Sends a request and returns the status, the response and the body.
    func send(_ request: URLRequest) async throws -> (status: Int, response: HTTPURLResponse, body: Data) {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return (http.statusCode, http, data)
    }

    /// GETs a URL, optionally with a bearer token.
    func get(_ url: URL, bearer token: String? = nil) async throws -> (
        status: Int, response: HTTPURLResponse, body: Data
    ) {
        var request = URLRequest(url: url)
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        return try await send(request)
    }

    func invalidate() {
        session.finishTasksAndInvalidate()
    }
}
