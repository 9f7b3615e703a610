import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The HTTP side of ``OAuthClient``: one private `URLSession`, one exchange at a time per call, and the mapping
/// of failures below HTTP to ``SessionError``.
package final class OAuthTransport: Sendable {
    /// An HTTP answer and when it arrived.
    package struct Answer: Sendable {
        /// The status code.
        package var statusCode: Int
        /// The body.
        package var body: Data
        /// The parsed `Retry-After`, if the answer had a usable one.
        package var retryAfter: Duration?
        /// When the answer arrived, on the client's monotonic clock.
        package var receivedAt: ContinuousClock.Instant
        /// When the answer arrived, on the client's wall clock.
        package var receivedAtWall: Date
        /// The server's clock when it answered, from its `Date` header (RFC 9110 §6.6.1), if it sent a valid one.
        package var serverDate: Date? = nil
        /// The `Location` header, for a redirect the client does not follow.
        package var location: String? = nil
        /// The `DPoP-Nonce` header (RFC 9449 §8), for the next proof to this server.
        package var dpopNonce: String? = nil
    }

    /// What the exchanges are sent on: the client's own `URLSession`, or on Linux's libcurl transport
    /// (``TransportChoice``) its own libcurl client, and never both (a client on libcurl holds no `URLSession`).
    private enum Route {
        case urlSession(URLSession)
        #if os(Linux)
            case curl(CurlClient)
        #endif
    }

    private let route: Route
    /// The client's own session, invalidated with the transport; `nil` when the exchanges run on libcurl.
    package var session: URLSession? {
        guard case .urlSession(let session) = route else { return nil }
        return session
    }
    private let requestTimeout: Duration
    private let clock: any SessionClock
    /// Where the server's `Date` headers go, for a client of an OpenID provider.
    private let serverClock: ProviderClock?

    package init(requestTimeout: Duration, clock: any SessionClock, serverClock: ProviderClock? = nil) {
        self.requestTimeout = requestTimeout
        self.clock = clock
        self.serverClock = serverClock
        // A credential exchange is never answered from, nor kept in, a cache; it carries and keeps no cookies and
        // follows no redirect (a token endpoint that redirects is misconfigured or compromised).
        #if os(Linux)
            if TransportChoice.process == .libcurl {
                route = .curl(CurlClient())
                return
            }
        #endif
        route = .urlSession(
            .credentialExchange(timeout: requestTimeout > .zero ? requestTimeout.urlSessionTimeout : nil))
    }

    deinit {
        // The client is gone, so nothing can send on its session any more (an exchange in flight keeps the
        // transport alive). Without this the session, its connections and, on Linux, the two descriptors of its
        // libcurl multi handle would stay for the rest of the process; its delegate does not refer back to it.
        switch route {
        case .urlSession(let session): session.finishTasksAndInvalidate()
        #if os(Linux)
            case .curl(let curl): curl.close()
        #endif
        }
    }

    /// Sends `request` and returns the answer, whatever its status.
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - endpoint: What is being called, for messages ("the token endpoint").
    /// - Returns: The answer.
    /// - Throws: `SessionError` `networkUnavailable`, `timedOut`, `malformedResponse` or `invalidInput`;
    ///   `CancellationError` when the calling task is cancelled.
    package func send(_ request: URLRequest, to endpoint: String) async throws -> Answer {
        guard requestTimeout > .zero else {
            throw SessionError(.invalidInput, "the OAuth client's request timeout must be positive")
        }
        try Task.checkCancellation()
        var request = request
        request.timeoutInterval = requestTimeout.urlSessionTimeout
        // One connection per exchange. libcurl silently resends a request whose reused connection closed before
        // the answer, and cannot rewind a POST body to do so; a resent refresh would also present a refresh token
        // the server may already have rotated, which its reuse detection answers by revoking the whole grant
        // (RFC 9700 §4.14.2). Token requests are rare, so the extra handshake costs little.
        request.setValue("close", forHTTPHeaderField: "Connection")
        let outcome: (Data, URLResponse, ContinuousClock.Instant, Date)
        do {
            switch route {
            case .urlSession(let session): outcome = try await exchange(request, on: session, endpoint: endpoint)
            #if os(Linux)
                case .curl(let curl): outcome = try await exchange(request, on: curl, endpoint: endpoint)
            #endif
            }
        } catch let error as SessionError where error.code == .timedOut {
            throw error
        } catch {
            throw Self.map(error, endpoint: endpoint)
        }
        return try answer(outcome, from: endpoint)
    }

    /// One exchange on the transport's URLSession, with the request timeout as its wall-clock deadline:
    /// URLSession's timeouts are idle timeouts on Linux, which a server that trickles its answer never trips.
    private func exchange(
        _ request: URLRequest, on session: URLSession, endpoint: String
    ) async throws -> (Data, URLResponse, ContinuousClock.Instant, Date) {
        let clock = clock
        return try await TaskBridge.run(
            cancellingThrough: session,
            deadline: requestTimeout,
            onTimeout: { [requestTimeout] error in
                guard Self.isCancellation(error) else { return nil }
                return SessionError(.timedOut, "\(endpoint) did not answer within \(requestTimeout)")
            },
            notStarted: CancellationError(),
            create: { answer in
                session.dataTask(with: request) { data, response, error in
                    // Stamped here, before any hop: a token's lifetime starts when its response arrived.
                    let receivedAt = clock.now
                    let receivedAtWall = clock.wallNow
                    if let error {
                        answer.resume(throwing: error)
                    } else if let response {
                        answer.resume(returning: (data ?? Data(), response, receivedAt, receivedAtWall))
                    } else {
                        answer.resume(throwing: URLError(.badServerResponse))
                    }
                }
            }
        )
    }

    #if os(Linux)
        /// One exchange on the libcurl transport, with the request timeout as its whole deadline, enforced by the
        /// transport's loop; the caller's cancellation cancels it.
        private func exchange(
            _ request: URLRequest, on curl: CurlClient, endpoint: String
        ) async throws -> (Data, URLResponse, ContinuousClock.Instant, Date) {
            let transfer: CurlTransferHandle
            do {
                transfer = try curl.prepare(request, deadlines: CurlDeadlines(whole: requestTimeout))
            } catch {
                throw SessionError(.invalidInput, "the request to \(endpoint) cannot be sent as written (\(error))")
            }
            let clock = clock
            do {
                return try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        curl.start(transfer) { result in
                            // Stamped here, before any hop: a token's lifetime starts when its response arrived.
                            let (receivedAt, receivedAtWall) = (clock.now, clock.wallNow)
                            continuation.resume(with: result.map { ($0.0, $0.1, receivedAt, receivedAtWall) })
                        }
                    }
                } onCancel: {
                    transfer.cancel()
                }
            } catch let error as URLError where error.code == .timedOut {
                throw SessionError(.timedOut, "\(endpoint) did not answer within \(requestTimeout)")
            }
        }
    #endif

    /// The answer `outcome` is, checked to be HTTP, its `Retry-After` and `Date` read.
    private func answer(
        _ outcome: (Data, URLResponse, ContinuousClock.Instant, Date), from endpoint: String
    ) throws -> Answer {
        guard let response = outcome.1 as? HTTPURLResponse else {
            throw SessionError(.malformedResponse, "\(endpoint) did not answer with HTTP")
        }
        let retryAfter = response.value(forHTTPHeaderField: "Retry-After").flatMap {
            RetryAfter.parse($0, now: outcome.3)
        }
        // An obsolete two-digit year is read against the injected clock's wall time, the one the answer was stamped with.
        let serverDate = response.value(forHTTPHeaderField: "Date").flatMap {
            HTTPDate.parse($0, referenceDate: outcome.3)
        }
        if let serverDate { serverClock?.record(serverDate: serverDate, receivedAtWall: outcome.3) }
        return Answer(
            statusCode: response.statusCode, body: outcome.0, retryAfter: retryAfter, receivedAt: outcome.2,
            receivedAtWall: outcome.3, serverDate: serverDate,
            location: response.value(forHTTPHeaderField: "Location"),
            dpopNonce: response.value(forHTTPHeaderField: "DPoP-Nonce"))
    }

    private static func isCancellation(_ error: any Error) -> Bool {
        error is CancellationError || TransportFailureKind(error, wasHTTP: true) == .cancelled
    }

    /// The error to throw for a failed exchange: a cancellation of the caller stays a `CancellationError`.
    ///
    /// The `URLError` is read by `TransportFailureKind`, as a session's requests read it, and its code kept as the
    /// error's ``SessionError/underlyingError``.
    package static func map(_ error: any Error, endpoint: String) -> any Error {
        if error is CancellationError { return error }
        let code = (error as? URLError)?.code
        let mapped: SessionError
        // The endpoint's URL was checked to be http(s) before sending.
        switch TransportFailureKind(error, wasHTTP: true) {
        case .cancelled:
            if Task.isCancelled { return CancellationError() }
            mapped = SessionError(.networkUnavailable, "the request to \(endpoint) was cancelled")
        case .timedOut:
            mapped = SessionError(.timedOut, "\(endpoint) did not answer in time")
        case .malformedAnswer:
            mapped = SessionError(.malformedResponse, "\(endpoint) answered with something that is not HTTP")
        case .closedWithoutAnswer:
            mapped = SessionError(.networkUnavailable, "\(endpoint) closed the connection without answering")
        case .notSent where code != .badURL:
            mapped = SessionError(
                .networkUnavailable, "\(endpoint) could not be reached (URLError \(code?.rawValue ?? 0))")
        case .notSent, .failed:
            guard let code else {
                return SessionError(.networkUnavailable, "the request to \(endpoint) failed (\(type(of: error)))")
            }
            mapped = SessionError(
                .networkUnavailable, "the connection to \(endpoint) failed (URLError \(code.rawValue))")
        }
        return mapped.keeping(TransportFailure.copy(of: error))
    }
}
