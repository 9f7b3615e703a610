import SessionKit

extension LocalServer {
    /// The limits and timeouts a ``LocalServer`` enforces on its clients.
    public struct Configuration: Sendable {
        /// The most bytes a request line plus its headers may take; a larger head is answered with 431 and the
        /// connection closed.
        public var maximumHeaderBytes: Int
        /// The most bytes a request body may take; a larger one is answered with 413 and the connection closed.
        public var maximumBodyBytes: Int
        /// How long a client may take to send one whole request, from its first byte to its last; a client that
        /// stalls is answered with 408 and the connection closed. Also bounds how long a client may leave a
        /// response unread.
        public var requestTimeout: Duration
        /// How long a kept-alive connection may sit between requests before the server closes it.
        public var idleTimeout: Duration
        /// Whether received requests are kept in ``LocalServer/requests``.
        public var recordsRequests: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - maximumHeaderBytes: The head limit (431 above it); 16 KiB by default.
        ///   - maximumBodyBytes: The body limit (413 above it); 8 MiB by default.
        ///   - requestTimeout: The time a client has to send a request (408 after it); 5 seconds by default.
        ///   - idleTimeout: The time a kept-alive connection may be idle; 60 seconds by default.
        ///   - recordsRequests: Whether to keep the request log; on by default.
        public init(
            maximumHeaderBytes: Int = 16 * 1024,
            maximumBodyBytes: Int = 8 * 1024 * 1024,
            requestTimeout: Duration = .seconds(5),
            idleTimeout: Duration = .seconds(60),
            recordsRequests: Bool = true
        ) {
            self.maximumHeaderBytes = maximumHeaderBytes
            self.maximumBodyBytes = maximumBodyBytes
            self.requestTimeout = requestTimeout
            self.idleTimeout = idleTimeout
            self.recordsRequests = recordsRequests
        }

        /// Refuses values the server cannot work with.
        func validate() throws(SessionError) {
            guard maximumHeaderBytes >= 64 else {
                throw SessionError(.invalidInput, "LocalServer maximumHeaderBytes must be at least 64")
            }
            guard maximumBodyBytes >= 0 else {
                throw SessionError(.invalidInput, "LocalServer maximumBodyBytes must not be negative")
            }
            guard requestTimeout > .zero, idleTimeout > .zero else {
                throw SessionError(.invalidInput, "LocalServer timeouts must be positive")
            }
        }
    }
}
