import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The pipeline's transfer route: the session's transfer URLSession, whose tasks report through delegate events
// (uploads, downloads, byte streams, WebSockets), and one attempt of each on it. Every task a session creates is
// created in the pipeline's files: here, in `RequestPipeline.swift` (a data task) and in `RequestPipeline+HandOff.swift`
// (a write that outlives the end); the request kinds are adapters that hand them an attempt.

extension UserSession {
    /// The session's transfer URLSession, made on first use, or `nil` once the session has ended.
    ///
    /// Made with no lock held and offered to the lifetime, which keeps the first one offered while the session is
    /// active and registers its end handler in the same step: whoever sees the session active and this URLSession
    /// kept sees the handler registered, and `end()` runs it after the phase is `ended`, when no task can be created
    /// on it any more. A spare (a racer's, or one made as the session ended) is invalidated before any task is
    /// created on it.
    func transferSession() -> TransferSession? {
        guard case .transfers(let supply) = lifetime(.transfers(nonceFor: nil)) else { return nil }
        switch supply {
        case .ended: return nil
        case .use(let transfers, _, _): return transfers
        case .make: break
        }
        let made = TransferSession(
            cookies: cookies,
            idleTimeout: configuration.requestTimeout.urlSessionTimeout
        )
        guard case .offeredTransfers(let offer) = lifetime(.offerTransfers(made)) else { return nil }
        guard case .spare(let kept) = offer else { return made }
        made.urlSession.finishTasksAndInvalidate()
        return kept
    }

    /// The transfer URLSession if one was made, even after the end; makes none (for tests).
    var madeTransferSession: TransferSession? {
        guard case .sessions(_, _, let transfers) = lifetime(.sessions) else { return nil }
        return transfers
    }

    /// Creates one transfer task under the lock that guards `isActive`, registers its events, and starts it under
    /// the same rules as a request's (a start that `end()` or the caller's cancellation came before never happens,
    /// and the task is cancelled instead, which reports `URLError.cancelled` through `events`).
    ///
    /// - Returns: The transfer session and the task.
    /// - Throws: `sessionEnded` when the session had ended: then nothing was created and `events` hear nothing.
    @discardableResult
    func startTransfer(
        handle: RequestHandle,
        events: TransferEvents,
        nonceFor url: URL? = nil,
        make: (URLSession, Credential?, _ nonce: String?) -> URLSessionTask
    ) throws -> (transfers: TransferSession, task: URLSessionTask) {
        let (transfers, task) = try createTransfer(events: events, nonceFor: url, make: make)
        let started = isActive && handle.start(task)
        if !started { transfers.cancel(task) }
        return (transfers, task)
    }

    /// Creates one transfer task, suspended, under the lock that guards `isActive`, and registers its events.
    ///
    /// - Parameters:
    ///   - events: What the task's delegate calls go to.
    ///   - url: Where the nonce `make` gets is for (a WebSocket's handshake).
    ///   - make: Creates the task on the transfer URLSession, with the credential the session holds at that instant
    ///     and the nonce for `url`.
    /// - Returns: The transfer session and the task.
    /// - Throws: `sessionEnded` when the session had ended: then nothing was created and `events` hear nothing.
    func createTransfer(
        events: TransferEvents,
        nonceFor url: URL? = nil,
        make: (URLSession, Credential?, _ nonce: String?) -> URLSessionTask
    ) throws -> (transfers: TransferSession, task: URLSessionTask) {
        while true {
            // Created under the lifetime lock: `end()` takes it before its end handler invalidates the transfer
            // URLSession, so every task created on it is among those that handler cancels.
            let created = try lifetime(.transfers(nonceFor: url)) { action -> (TransferSession, URLSessionTask)? in
                guard case .transfers(.use(let transfers, let credential, let nonce)) = action else {
                    if case .transfers(.make) = action { return nil }
                    throw SessionError.ended
                }
                let task = make(transfers.urlSession, credential, nonce)
                transfers.register(task, events)
                return (transfers, task)
            }
            if let created {
                configuration.beforeStart?(self)
                return created
            }
            guard transferSession() != nil else { throw SessionError.ended }
        }
    }

    /// Runs one transfer to its end, sending `source` (an upload's body; `.none` sends the request's own), its
    /// response body going into `body`.
    ///
    /// - Returns: The response.
    /// - Throws: `TransportFailure` for a failure below HTTP (a cancellation included), `sessionEnded` when the
    ///   session had ended before it started, `storageFailure` when `body` could not be written.
    func transfer(
        _ request: URLRequest,
        into body: TransferBody,
        progress: (@Sendable (TransferProgress) -> Void)?,
        sending source: TransferSource
    ) async throws -> HTTPURLResponse {
        #if os(Linux)
            if let curl {
                let transfer = try prepare(request, on: curl, upload: source.curlUpload)
                return try await stream(transfer, on: curl) { (answer: TaskAnswer<HTTPURLResponse>) in
                    transferEvents(request, into: body, progress: progress, answer: answer) { transfer.cancel() }
                }
            }
        #endif
        guard let transfers = transferSession() else { throw SessionError.ended }
        // A start that `end()` or the caller's cancellation came before is cancelled, and its cancellation, like
        // any, is reported through the task's events (mapped to what it was by the caller's loop).
        return try await TaskBridge.run(
            cancellingThrough: transfers.urlSession,
            admits: { isActive },
            notStarted: TransportFailure(underlying: URLError(.cancelled), request: request),
            discardUnstarted: { transfers.cancel($0) },
            create: { (answer: TaskAnswer<HTTPURLResponse>) in
                let events = transferEvents(request, into: body, progress: progress, answer: answer) {
                    if let task = answer.handle.markCancelled() { transfers.cancel(task) }
                }
                return try createTransfer(events: events) { urlSession, _, _ in
                    source.task(for: request, on: urlSession)
                }.task
            }
        )
    }

    /// What a transfer hears, on either transport: the head begins `body`, chunks go into it (while the session
    /// is active), progress is told in order, and the end answers `answer`. `stop` stops the transfer when `body`
    /// cannot be written.
    ///
    /// - Returns: The events, for the transport to report to.
    private func transferEvents(
        _ request: URLRequest,
        into body: TransferBody,
        progress: (@Sendable (TransferProgress) -> Void)?,
        answer: TaskAnswer<HTTPURLResponse>,
        stop: @escaping @Sendable () -> Void
    ) -> TransferEvents {
        let isUpload = !["GET", "HEAD"].contains(HTTPMethod.of(request))
        var events = TransferEvents { [weak self] error in
            if let failure = body.failure {
                answer.resume(throwing: failure)
            } else if let error {
                answer.resume(throwing: TransportFailure(underlying: error, request: request))
            } else if let answered = body.response, self != nil {
                answer.resume(returning: answered)
            } else {
                answer.resume(throwing: TransportFailure(underlying: URLError(.badServerResponse)))
            }
        }
        events.response = { answered in
            body.begin(answered)
            if !isUpload {
                progress?(TransferProgress(completedBytes: body.written, expectedBytes: body.expected))
            }
        }
        events.data = { [weak self] chunk in
            // Nothing is written for a session that has ended: `end()` cancels the transfer, but chunks that
            // arrived before the cancellation are still delivered.
            guard self?.isActive == true else { return }
            let total = body.append(chunk)
            if !isUpload, let total {
                progress?(TransferProgress(completedBytes: total, expectedBytes: body.expected))
            }
            if total == nil { stop() }
        }
        if let progress {
            events.sent = { total, expected in
                progress(TransferProgress(completedBytes: total, expectedBytes: expected >= 0 ? expected : nil))
            }
        }
        return events
    }

    /// Opens a byte stream: one attempt of ``bytes(for:)``, answered when the response's head arrives; the body
    /// then goes to the stream's consumer, and a failure midway ends the stream (mapped by `replayable`'s rule), never
    /// the attempt.
    func openStream(
        _ request: URLRequest, replayable: Bool
    ) async throws -> (StreamHandle, HTTPURLResponse) {
        let (chunks, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        #if os(Linux)
            if let curl {
                let transfer = try prepare(request, on: curl, upload: nil)
                let stream = StreamHandle(bytes: AsyncBytes(chunks: chunks)) { transfer.cancel() }
                continuation.onTermination = { termination in
                    if case .cancelled = termination { transfer.cancel() }
                }
                do {
                    let response = try await self.stream(transfer, on: curl) { (head: TaskAnswer<HTTPURLResponse>) in
                        streamEvents(request, replayable: replayable, head: head, into: continuation)
                    }
                    return (stream, response)
                } catch {
                    continuation.finish()
                    throw error
                }
            }
        #endif
        let handle = RequestHandle()
        guard let transfers = transferSession() else { throw SessionError.ended }
        let stream = StreamHandle(bytes: AsyncBytes(chunks: chunks)) { handle.cancel(in: transfers.urlSession) }
        // The consumer stopped iterating (or dropped the sequence): the transfer has no one to deliver to.
        continuation.onTermination = { termination in
            if case .cancelled = termination { handle.cancel(in: transfers.urlSession) }
        }
        let response: HTTPURLResponse = try await TaskBridge.run(
            handle: handle,
            cancellingThrough: transfers.urlSession,
            admits: { isActive },
            notStarted: TransportFailure(underlying: URLError(.cancelled), request: request),
            discardUnstarted: { task in
                continuation.finish()
                transfers.cancel(task)
            },
            create: { (head: TaskAnswer<HTTPURLResponse>) in
                let events = streamEvents(request, replayable: replayable, head: head, into: continuation)
                do {
                    return try createTransfer(events: events) { urlSession, _, _ in urlSession.dataTask(with: request) }
                        .task
                } catch {
                    continuation.finish(throwing: error)
                    throw error
                }
            }
        )
        return (stream, response)
    }

    /// What a byte stream hears, on either transport: the head answers `head`, chunks go to the consumer (while
    /// the session is active), and the end finishes the stream, or fails the attempt when no head came.
    ///
    /// - Returns: The events, for the transport to report to.
    private func streamEvents(
        _ request: URLRequest, replayable: Bool, head: TaskAnswer<HTTPURLResponse>,
        into continuation: AsyncThrowingStream<Data, any Error>.Continuation
    ) -> TransferEvents {
        var events = TransferEvents { [weak self] error in
            // No head arrived: the attempt failed below HTTP, for the loop to map (and maybe retry).
            if head.resume(
                throwing: error.map { TransportFailure(underlying: $0, request: request) }
                    ?? TransportFailure(underlying: URLError(.badServerResponse)))
            {
                continuation.finish()
                return
            }
            let active = self?.isActive ?? false
            if let error {
                continuation.finish(
                    throwing: active
                        ? TransportFailure(underlying: error, request: request).error(replayable: replayable)
                        : SessionError.ended)
            } else {
                continuation.finish()
            }
        }
        events.response = { answered in
            head.resume(returning: answered)
        }
        events.data = { [weak self] chunk in
            guard self?.isActive == true else { return }
            continuation.yield(chunk)
        }
        return events
    }
}

/// The request body a transfer sends, the same on either transport.
enum TransferSource: Sendable {
    /// The request's own `httpBody`, if any.
    case none
    /// These bytes, streamed.
    case data(Data)
    /// The contents of a file, read as they leave.
    case file(URL)

    /// The URLSession task that sends `request` with this body.
    func task(for request: URLRequest, on urlSession: URLSession) -> URLSessionTask {
        switch self {
        case .none: urlSession.dataTask(with: request)
        case .data(let body): urlSession.uploadTask(with: request, from: body)
        case .file(let file): urlSession.uploadTask(with: request, fromFile: file)
        }
    }

    #if os(Linux)
        /// The body as the libcurl transport reads it.
        var curlUpload: CurlUpload? {
            switch self {
            case .none: nil
            case .data(let body): .data(body)
            case .file(let file): .file(file)
            }
        }
    #endif
}

/// A byte stream whose head has arrived, and how to stop its transfer.
struct StreamHandle: Sendable {
    let bytes: UserSession.AsyncBytes
    let cancel: @Sendable () -> Void
}
