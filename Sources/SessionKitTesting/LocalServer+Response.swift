import Foundation

extension LocalServer {
    /// What a handler answers: a status, headers and a body, optionally late or broken on purpose.
    ///
    /// The server always writes `Content-Length` itself (a value set in ``headers`` is replaced) and adds
    /// `Connection: close` when it closes after the response. A `Connection: close` set in ``headers`` makes it
    /// close. No body is sent for `HEAD` requests and for 1xx, 204 and 304 responses.
    public struct Response: Sendable {
        /// The status code.
        public var status: Int
        /// The header fields, in order. Field values cannot contain line breaks; any are replaced by spaces.
        public var headers: [(name: String, value: String)]
        /// The body.
        public var body: Data
        /// How long to wait before sending. The wait suspends the handler's task and never holds a thread; it is
        /// cancelled (nothing is sent) when the server stops or the client goes away.
        public var delay: Duration?
        /// A way to break the exchange on purpose instead of answering normally.
        public var fault: Fault?

        /// Creates a response.
        ///
        /// - Parameters:
        ///   - status: The status code.
        ///   - headers: The header fields.
        ///   - body: The body.
        ///   - delay: How long to wait before sending.
        ///   - fault: A deliberate failure to produce instead of a normal answer.
        public init(
            status: Int = 200,
            headers: [(name: String, value: String)] = [],
            body: Data = Data(),
            delay: Duration? = nil,
            fault: Fault? = nil
        ) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delay = delay
            self.fault = fault
        }

        /// A JSON response: `Content-Type: application/json` and the text as its UTF-8 body.
        ///
        /// - Parameters:
        ///   - json: The JSON text, sent as is.
        ///   - status: The status code.
        ///   - headers: More header fields.
        /// - Returns: The response.
        public static func json(_ json: String, status: Int = 200, headers: [(name: String, value: String)] = [])
            -> Response
        {
            Response(status: status, headers: [("Content-Type", "application/json")] + headers, body: Data(json.utf8))
        }

        /// A plain-text response: `Content-Type: text/plain; charset=utf-8` and the text as its body.
        ///
        /// - Parameters:
        ///   - text: The text.
        ///   - status: The status code.
        ///   - headers: More header fields.
        /// - Returns: The response.
        public static func text(_ text: String, status: Int = 200, headers: [(name: String, value: String)] = [])
            -> Response
        {
            Response(
                status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
                body: Data(text.utf8))
        }

        /// A 404 with a short text body.
        public static var notFound: Response { .text("Not Found", status: 404) }

        /// A response with only a status and an empty body.
        ///
        /// - Parameter code: The status code.
        /// - Returns: The response.
        public static func status(_ code: Int) -> Response { Response(status: code) }

        /// This response, sent after `delay`.
        ///
        /// - Parameter delay: How long to wait before sending.
        /// - Returns: The delayed response.
        public func delayed(by delay: Duration) -> Response {
            var response = self
            response.delay = delay
            return response
        }

        /// This response, broken by `fault` instead of sent normally.
        ///
        /// - Parameter fault: The deliberate failure.
        /// - Returns: The faulty response.
        public func failing(with fault: Fault) -> Response {
            var response = self
            response.fault = fault
            return response
        }

        /// The value of the first header field named `name`, compared case-insensitively.
        ///
        /// - Parameter name: The field name.
        /// - Returns: Its first value, or `nil` when the response has none.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }
    }
}
