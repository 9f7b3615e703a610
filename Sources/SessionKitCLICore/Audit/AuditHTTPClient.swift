import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP exchange of an audit: the status, the header fields and the body.
struct HTTPExchange: Sendable {
    /// The status code.
    var status: Int
    /// The header fields, names as the server sent them.
    var headers: [String: String]
    /// The body.
    var body: Data

    /// The value of the field `name`, compared case-insensitively.
    func header(_ name: String) -> String? {
        headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The fields caches leave on what they serve, in this order, those present.
    static let cacheHintFields = ["Age", "X-Cache", "X-Cache-Status", "CF-Cache-Status", "Via"]

    /// The cache hints present, name and value.
    var cacheHints: [(name: String, value: String)] {
        Self.cacheHintFields.compactMap { name in header(name).map { (name, $0) } }
    }

    /// Whether a hint says a cache answered without asking the origin: a positive `Age`, or `HIT` (also `STALE`,
    /// `UPDATING`) in `X-Cache`, `X-Cache-Status` or `CF-Cache-Status`.
    var looksLikeCacheHit: Bool {
        if let age = header("Age").flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), age > 0 { return true }
        return ["X-Cache", "X-Cache-Status", "CF-Cache-Status"].contains { name in
            guard let value = header(name)?.uppercased() else { return false }
            return ["HIT", "STALE", "UPDATING"].contains { value.contains($0) }
        }
    }
}

/// Why an audit request got no HTTP answer; every kind exits with status 3.
struct AuditFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure.
    enum Kind: String, Sendable, Equatable {
        /// Nothing accepted the connection, or the host name does not resolve.
        case unreachable
        /// The TLS handshake failed, or the certificate was not trusted.
        case tls
        /// Bytes came back that are not HTTP, or the connection closed without an answer.
        case notHTTP
        /// No answer within `--timeout`.
        case timeout
        /// Another transport failure.
        case network
    }

    /// What kind of failure.
    var kind: Kind
    /// What happened, naming the host and port, never a token or a path.
    var message: String

    /// The message.
    var description: String { message }
}

/// The audits' HTTP client: its own ephemeral `URLSession`, with no cache, no cookies (user A's cookie must not
/// ride along with user B's request), no stored credentials, no redirects (a bearer token is sent to the URL
/// given and nowhere else) and one timeout for the whole exchange.
final class AuditHTTPClient: Sendable {
    private let session: URLSession
    private let timeout: Duration

    /// Creates a client.
    ///
    /// - Parameter timeout: The bound on each exchange, connection included.
    init(timeout: Duration) {
        self.timeout = timeout
        session = .credentialExchange(timeout: timeout.seconds)
    }

    deinit {
        // Every send awaits its answer, so nothing is in flight by now; cancelling (which races completions on
        // Linux) is not needed.
        session.finishTasksAndInvalidate()
    }

    /// Sends `request` and returns the answer, whatever its status.
    ///
    /// The timeout is a deadline on the whole exchange, connection to last byte: a server that trickles its body
    /// a byte at a time is cut off when it passes (FoundationNetworking's own timeouts only bound silence).
    ///
    /// - Parameter request: The request.
    /// - Returns: The exchange.
    /// - Throws: ``AuditFailure`` when no HTTP answer came back in time.
    func send(_ request: URLRequest) async throws(AuditFailure) -> HTTPExchange {
        var request = request
        request.timeoutInterval = timeout.seconds
        let target = Self.target(of: request.url)
        let session = session
        let running = Lock<URLSessionTask?>(nil)
        let expired = Lock(false)
        let deadline = DispatchWorkItem {
            guard let task = running.withLock({ $0 }) else { return }
            expired.withLock { $0 = true }
            // On the delegate queue, where completion handlers run: FoundationNetworking stops the process when a
            // cancellation races a completion (SessionKit's TaskCancellation.swift explains the two reads).
            session.delegateQueue.addOperation {
                task.cancel()
                _ = task.priority
                _ = task.priority
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout.seconds, execute: deadline)
        let outcome: Result<(Data, URLResponse), any Error> = await withCheckedContinuation { continuation in
            let task = session.dataTask(with: request) { data, response, error in
                if let error {
                    continuation.resume(returning: .failure(error))
                } else if let response {
                    continuation.resume(returning: .success((data ?? Data(), response)))
                } else {
                    continuation.resume(returning: .failure(URLError(.badServerResponse)))
                }
            }
            running.withLock { $0 = task }
            task.resume()
        }
        deadline.cancel()
        if case .failure = outcome, expired.withLock({ $0 }) {
            throw AuditFailure(
                kind: .timeout, message: "\(target) did not answer within \(Self.format(timeout)) (--timeout)")
        }
        switch outcome {
        case .failure(let error):
            throw Self.failure(for: error, target: target, timeout: timeout)
        case .success(let (data, response)):
            guard let http = response as? HTTPURLResponse else {
                throw AuditFailure(kind: .notHTTP, message: "\(target) did not answer with HTTP")
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name] = value }
            }
            return HTTPExchange(status: http.statusCode, headers: headers, body: data)
        }
    }

    /// `host:port` of `url`: what error messages name (a path or query may carry something private).
    static func target(of url: URL?) -> String {
        guard let url, let host = url.host else { return "the server" }
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        // An IPv6 address is bracketed, or its last group could not be told from the port.
        let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(TextLayout.printable(shown, limit: 100)):\(port)"
    }

    /// The failure a transport error means.
    static func failure(for error: any Error, target: String, timeout: Duration) -> AuditFailure {
        guard let code = (error as? URLError)?.code else {
            return AuditFailure(kind: .network, message: "the request to \(target) failed (\(type(of: error)))")
        }
        switch code {
        case .badURL:
            // FoundationNetworking (Linux) refuses a URL whose host is an IPv6 literal, among others.
            return AuditFailure(
                kind: .network,
                message: "the HTTP client cannot send a request to \(target) as written (URLError -1000); "
                    + "FoundationNetworking on Linux does not take an IPv6 literal host: use a host name")
        case .timedOut:
            return AuditFailure(
                kind: .timeout,
                message: "\(target) did not answer within \(format(timeout)) (--timeout)")
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet:
            return AuditFailure(
                kind: .unreachable,
                message: "could not connect to \(target): "
                    + (code == .cannotConnectToHost
                        ? "the connection was refused or nothing listens there" : "the host name did not resolve"))
        case .secureConnectionFailed, .serverCertificateHasBadDate, .serverCertificateUntrusted,
            .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid, .clientCertificateRejected,
            .clientCertificateRequired:
            return AuditFailure(
                kind: .tls,
                message: "the TLS handshake with \(target) failed: it may not speak TLS on that port, or its "
                    + "certificate is not trusted (URLError \(code.rawValue))")
        case .badServerResponse, .cannotParseResponse, .unsupportedURL, .networkConnectionLost,
            .cannotDecodeRawData, .cannotDecodeContentData:
            // libcurl reports bytes that are not HTTP/1.x as an unsupported protocol, and a connection closed
            // before any answer as a bad server response.
            return AuditFailure(
                kind: .notHTTP,
                message: "\(target) did not answer with HTTP: the bytes were not an HTTP response, or the "
                    + "connection closed first (URLError \(code.rawValue))")
        default:
            // FoundationNetworking reports a failed handshake as URLError.unknown with libcurl's OpenSSL message.
            let said = (error as NSError).userInfo[NSLocalizedDescriptionKey] as? String ?? ""
            if ["SSL", "TLS", "certificate"].contains(where: { said.contains($0) }) {
                return AuditFailure(
                    kind: .tls,
                    message: "the TLS handshake with \(target) failed: it may not speak TLS on that port, or its "
                        + "certificate is not trusted (\(TextLayout.printable(said, limit: 120)))")
            }
            return AuditFailure(kind: .network, message: "the request to \(target) failed (URLError \(code.rawValue))")
        }
    }

    static func format(_ duration: Duration) -> String {
        let seconds = duration.seconds
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : String(format: "%.1f s", seconds)
    }
}
