import Foundation
import SessionKit

extension LocalServer {
    /// A request the server received, as its handler sees it and as ``LocalServer/requests`` records it.
    ///
    /// Its ``description`` redacts `Authorization`, `Cookie` and `Proxy-Authorization` values, so a request can
    /// be printed by a failing test without showing a token.
    public struct Request: Sendable, CustomStringConvertible {
        /// The method, as sent (`GET`, `POST`, …).
        public var method: String
        /// The path of the request target, without the query, still percent-encoded as sent.
        public var path: String
        /// The query (what follows `?`), still percent-encoded, or `nil` when the target has none.
        public var query: String?
        /// The header fields in the order they were sent, names as sent.
        public var headers: [(name: String, value: String)]
        /// The body, with any chunked framing removed; empty when there was none.
        public var body: Data
        /// When the whole request had arrived, on the monotonic clock tests read (`ContinuousClock`).
        public var arrivedAt: ContinuousClock.Instant
        /// When the whole request had arrived, on the wall clock.
        public var arrivedAtDate: Date
        /// Which connection carried the request: requests on one kept-alive connection share it; each
        /// connection gets a new one, counting from 1.
        public var connectionID: Int
        /// The protocol version the client spoke, such as `HTTP/1.1`.
        public var version: String

        /// Creates a request, for calling a handler directly in a unit test.
        ///
        /// - Parameters:
        ///   - method: The method.
        ///   - target: The request target: a path with an optional `?query`.
        ///   - headers: The header fields, in order.
        ///   - body: The body.
        ///   - arrivedAt: The monotonic arrival time.
        ///   - arrivedAtDate: The wall-clock arrival time.
        ///   - connectionID: The connection that carried it.
        ///   - version: The protocol version.
        public init(
            method: String,
            target: String,
            headers: [(name: String, value: String)] = [],
            body: Data = Data(),
            arrivedAt: ContinuousClock.Instant = .now,
            arrivedAtDate: Date = Date(),
            connectionID: Int = 0,
            version: String = "HTTP/1.1"
        ) {
            let (path, query) = Self.split(target: target)
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.body = body
            self.arrivedAt = arrivedAt
            self.arrivedAtDate = arrivedAtDate
            self.connectionID = connectionID
            self.version = version
        }

        /// The query's items, percent-decoded, in order; empty when there is no query.
        public var queryItems: [URLQueryItem] {
            guard let query else { return [] }
            var components = URLComponents()
            components.percentEncodedQuery = query
            return components.queryItems ?? []
        }

        /// The value of the first header field named `name`, compared case-insensitively.
        ///
        /// - Parameter name: The field name.
        /// - Returns: Its first value, or `nil` when the request has none.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        /// Every value of the header fields named `name`, in order, compared case-insensitively.
        ///
        /// - Parameter name: The field name.
        /// - Returns: The values; empty when the request has none.
        public func headers(named name: String) -> [String] {
            headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
        }

        /// The token of an `Authorization: Bearer …` header ([RFC 6750 §2.1](https://www.rfc-editor.org/rfc/rfc6750#section-2.1)),
        /// or `nil` when there is none.
        public var bearerToken: String? { token(scheme: "Bearer") }

        /// The token of an `Authorization: DPoP …` header ([RFC 9449 §7.1](https://www.rfc-editor.org/rfc/rfc9449#section-7.1)),
        /// or `nil` when there is none. The proof is the `DPoP` header's value.
        public var dpopToken: String? { token(scheme: "DPoP") }

        private func token(scheme: String) -> String? {
            guard let authorization = header("Authorization") else { return nil }
            let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2, parts[0].caseInsensitiveCompare(scheme) == .orderedSame else { return nil }
            let token = parts[1].trimmingCharacters(in: .whitespaces)
            return token.isEmpty ? nil : token
        }

        /// The body decoded as UTF-8 (invalid bytes replaced).
        public var bodyText: String { String(decoding: body, as: UTF8.self) }

        /// The method, target, connection and headers, with credential values redacted.
        public var description: String {
            let target = query.map { "\(path)?\($0)" } ?? path
            let fields = headers.map { field in
                let secret = ["authorization", "proxy-authorization", "cookie"].contains(field.name.lowercased())
                return "\(field.name): \(secret ? Redaction.redact(field.value) : field.value)"
            }
            return "\(method) \(target) \(version) (connection \(connectionID), \(body.count) body bytes) "
                + "[\(fields.joined(separator: "; "))]"
        }

        static func split(target: String) -> (path: String, query: String?) {
            var target = Substring(target)
            // Absolute form (RFC 9112 §3.2.2): keep what follows the authority.
            if let schemeEnd = target.range(of: "://") {
                let afterAuthority = target[schemeEnd.upperBound...].firstIndex { $0 == "/" || $0 == "?" }
                target = afterAuthority.map { target[$0...] } ?? "/"
            }
            if let mark = target.firstIndex(of: "?") {
                let path = target[..<mark]
                return (path.isEmpty ? "/" : String(path), String(target[target.index(after: mark)...]))
            }
            return (String(target), nil)
        }
    }
}

/// A request as ``LocalServer/requests`` records it.
public typealias RecordedRequest = LocalServer.Request
