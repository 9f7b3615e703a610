extension LocalServer {
    /// A way for the server to break the HTTP exchange on purpose, to test how a client copes.
    public enum Fault: Sendable, Hashable {
        /// Closes the connection without sending anything.
        ///
        /// - Note: HTTP clients (libcurl among them) resend a request once when a reused connection closes
        ///   before any response, so the handler may see the request twice.
        case closeBeforeResponding
        /// Sends the head with the full `Content-Length`, then half the body, then closes.
        ///
        /// With an empty body the head announces one byte and none follows, so the body is still short.
        case truncatedBody
        /// Sends bytes that are not HTTP, then closes.
        case garbage
    }
}
