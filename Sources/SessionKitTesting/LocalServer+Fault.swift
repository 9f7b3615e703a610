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
        /// Sends the head announcing a body of 1 GiB, then one byte of the body every `interval`, forever: until
        /// the client closes the connection or the server stops.
        ///
        /// A server that is alive but never finishes. An idle timeout (`URLRequest.timeoutInterval`,
        /// `timeoutIntervalForRequest`) never fires, because bytes keep arriving; only a deadline on the whole
        /// exchange ends it. The bytes are the response's body, repeated (a space when it is empty).
        case trickle(every: Duration)
    }
}
