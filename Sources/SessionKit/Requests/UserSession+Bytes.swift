import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// The body of a response as an asynchronous sequence of bytes, as they arrive: what ``bytes(for:)`` returns.
    ///
    /// The sequence ends when the body is complete. It throws ``SessionError/Code/sessionEnded`` when the session
    /// ends before the body is complete, and the error of ``data(for:)`` for a connection that fails midway.
    /// Stopping the iteration early (leaving the loop, cancelling the task that iterates) cancels the transfer.
    ///
    /// - Important: FoundationNetworking cannot pause a transfer, so bytes the server sends faster than the loop
    ///   consumes them wait in memory. For a large body that is written somewhere rather than processed as it
    ///   comes, use ``download(for:progress:)``, which writes to disk as it receives.
    public struct AsyncBytes: AsyncSequence, Sendable {
        private let chunks: AsyncThrowingStream<Data, any Error>

        init(chunks: AsyncThrowingStream<Data, any Error>) {
            self.chunks = chunks
        }

        /// Iterates the bytes.
        public struct AsyncIterator: AsyncIteratorProtocol {
            private var chunks: AsyncThrowingStream<Data, any Error>.AsyncIterator
            private var chunk = Data()
            private var index = 0

            fileprivate init(_ chunks: AsyncThrowingStream<Data, any Error>.AsyncIterator) {
                self.chunks = chunks
            }

            /// The next byte, or `nil` at the end of the body.
            ///
            /// - Throws: `sessionEnded` when the session ended first, or what ``UserSession/data(for:)`` throws.
            public mutating func next() async throws -> UInt8? {
                while index == chunk.count {
                    guard let next = try await chunks.next() else { return nil }
                    chunk = next
                    index = 0
                }
                defer { index += 1 }
                return chunk[chunk.startIndex + index]
            }
        }

        /// Makes the iterator; a sequence is iterated once.
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(chunks.makeAsyncIterator())
        }
    }

    /// Sends `request` as this session's account and returns the response as soon as its head arrives, with its
    /// body as bytes to iterate as they arrive.
    ///
    /// The same rules as ``data(for:)`` apply up to the response head: this session's token, one 401 recovery,
    /// replay of replayable requests only, retries of retryable statuses. After the head the body is the
    /// caller's: a failure midway is thrown by the iteration and not retried. ``end()`` cancels the transfer,
    /// and the iteration then throws ``SessionError/Code/sessionEnded``; a call after `end()` is refused.
    ///
    /// ```swift
    /// let (bytes, response) = try await session.bytes(for: URLRequest(url: eventsURL))
    /// var line = [UInt8]()
    /// for try await byte in bytes {
    ///     if byte == UInt8(ascii: "\n") { handle(String(decoding: line, as: UTF8.self)); line = [] }
    ///     else { line.append(byte) }
    /// }
    /// ```
    ///
    /// - Parameter request: The request; its `Authorization` header is replaced.
    /// - Returns: The body's bytes and the response.
    /// - Throws: What ``data(for:)`` throws, before the head arrives.
    public func bytes(for request: URLRequest) async throws -> (AsyncBytes, HTTPURLResponse) {
        let replayable = RetryPolicy.isReplayable(request)
        let (stream, response) = try await sendAuthorized(request) { outgoing in
            let (stream, response) = try await openStream(outgoing, replayable: replayable)
            return .answer(stream, response)
        } discard: { stream in
            stream.cancel()
        }
        return (stream.bytes, response)
    }
}
