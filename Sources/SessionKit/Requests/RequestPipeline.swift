import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The request pipeline: every request kind of a session goes through `sendAuthorized` (admission by the credential
// scope, the token and its proof, the redirect rule, one refresh per 401, retries, nothing handed over after the end),
// and is an adapter on it that gives one attempt on one of the pipeline's routes: the data route below (`send`, and
// `data(for:)`'s cache front), the transfer route (`RequestPipeline+Transfers.swift`: uploads, downloads, byte
// streams, WebSockets) or, for a write that outlives the end, the hand-off route (`RequestPipeline+HandOff.swift`,
// which keeps the scope and the redirect rule). A `data(for:)` GET runs in this file, the lifetime's
// (`Session/UserSession+Lifetime.swift`), the credential scope's and the cache's.

extension UserSession {
    /// What one attempt of an authorized exchange produced.
    enum AttemptResult<Value> {
        /// An answer from the server, which the loop checks (401, retryable statuses, conflicts) before handing it
        /// back; `endChecked` when the attempt already refused an answer that came after the session's end.
        case answer(Value, HTTPURLResponse, endChecked: Bool = false)
        /// A result to hand back as it is, unchecked (an answer from the session's cache).
        case result(Value, HTTPURLResponse)
        /// Try again at once, without counting an attempt (a validated cache entry evicted meanwhile).
        case again
    }

    /// The rules every request kind of a session shares: each attempt carries this session's current token (after
    /// a proactive refresh if it is about to expire); a 401 is recovered once by one refresh shared with every
    /// other caller, and replayed only if the request is replayable (an idempotent method, or an
    /// `Idempotency-Key`); transport failures and retryable statuses are retried per ``Configuration/retryPolicy``
    /// under the same rule; nothing is handed over once the session has ended.
    ///
    /// - Parameters:
    ///   - request: The request as the caller gave it; its `Authorization` header is replaced on every attempt.
    ///   - attempt: Sends `outgoing` (which carries the token) once. It throws `TransportFailure` for a failure
    ///     below HTTP, which the loop maps and may retry.
    ///   - discard: Releases the value of an answer the loop does not hand back (a 401's body, a retried 503's
    ///     download, a stream to close).
    /// - Returns: The value and response of the answer handed back.
    /// - Throws: What ``data(for:)`` throws.
    @inline(__always)
    func sendAuthorized<Value>(
        _ request: consuming URLRequest,
        attempt: (_ outgoing: URLRequest) async throws -> AttemptResult<Value>,
        discard: (Value) -> Void = { _ in }
    ) async throws -> (Value, HTTPURLResponse) {
        // The token goes only where the session's scope sends it (plain HTTP to loopback only, the named origins).
        if let refusal = configuration.credentialScope.refusal(of: request.url) { throw refusal }
        var replayable = RetryPolicy.isReplayable(request)
        var attemptNumber = 1
        var recoveredFromUnauthorized = false
        // Whether a proof refused for its nonce was sent again (RFC 9449 §9: once, whatever the method).
        var resentWithNonce = false
        // Whether the request still carries the session's credentials: until a redirect leaves its origin, and
        // never again after (a later hop's address came from the other origin).
        var carriesCredentials = true
        var hops = 0

        while true {
            try Task.checkCancellation()
            var token: String?
            // Whether this attempt carried a proof: only a proof has a nonce (RFC 9449 §9).
            var proven = false
            if carriesCredentials {
                // The token read with the expiry check and the origin's nonce, in one step; after a refresh, the one
                // it committed (or a later one). The check needs no suspension: only a refresh does.
                let now = refresher == nil ? nil : configuration.clock.now
                guard
                    case .credential(var held, let expiring, var nonce) = lifetime(
                        .credential(at: now, nonceFor: request.url))
                else { throw SessionError.ended }
                if let refresher {
                    if held == nil { throw SessionError.ended }
                    if expiring {
                        try await refresher.refreshIfExpiring(self)
                        if case .credential(let after, _, let afterNonce) = lifetime(
                            .credential(at: nil, nonceFor: request.url))
                        {
                            (held, nonce) = (after, afterNonce)
                        }
                    }
                }
                guard let credential = held else {
                    diagnose(.notice, .requestRefusedAfterEnd, ["method": HTTPMethod.of(request)])
                    throw SessionError.ended
                }
                token = credential.token
                proven = credential.proofKey != nil
                if credential.proofKey == nil {
                    // Set in place: the loop owns the request (the caller's is consumed), so no attempt copies it.
                    request.setFieldValues([("Authorization", credential.authorization)])
                } else {
                    // A proof for this attempt's method and URL, made now: a proof is single-use (RFC 9449 §11.1).
                    try applyCredential(
                        to: &request, token: credential.token, proofKey: credential.proofKey,
                        tokenHash: credential.proofTokenHash, nonce: nonce)
                }
            } else if !isActive {
                throw SessionError.ended
            }

            let value: Value
            let response: HTTPURLResponse
            let endChecked: Bool
            do {
                switch try await attempt(request) {
                case .result(let value, let response):
                    guard isActive else {
                        discard(value)
                        throw SessionError.ended
                    }
                    return (value, response)
                case .again:
                    continue
                case .answer(let answered, let answeredResponse, let checked):
                    (value, response, endChecked) = (answered, answeredResponse, checked)
                }
            } catch let failure as TransportFailure {
                let error = failure.error(replayable: replayable)
                if error.code == .sessionEnded {
                    // URLError.cancelled: the session ended, or the calling task was cancelled.
                    if !isActive { throw error }
                    if Task.isCancelled { throw CancellationError() }
                }
                if replayable, failure.isRetryable, attemptNumber < configuration.retryPolicy.maximumAttempts {
                    attemptNumber += 1
                    try await backoff(before: attemptNumber, retryAfter: nil)
                    continue
                }
                throw error
            }
            // A response that arrives after `end()` is never handed over.
            guard endChecked || isActive else {
                discard(value)
                throw SessionError.ended
            }

            // Redirects are followed here, never by the URLSession, so that every hop is judged by one rule.
            // Only a 3xx can be a redirect: `RedirectDecision` delivers every other answer, so it is not asked.
            if (300..<400).contains(response.statusCode) {
                let hop: Hop?
                do {
                    hop = try nextHop(after: response, to: request, carriesCredentials: carriesCredentials, hops: hops)
                } catch {
                    discard(value)
                    throw error
                }
                if let hop {
                    discard(value)
                    request = hop.request
                    carriesCredentials = hop.carriesCredentials
                    hops += 1
                    replayable = RetryPolicy.isReplayable(request)
                    continue
                }
            }

            // A bearer attempt reads no `DPoP-Nonce`: a nonce challenge to a bearer token is an ordinary 401.
            let asksForNonce = proven && noteDPoPNonce(of: response, for: request.url)
            if asksForNonce, !resentWithNonce {
                // The proof was refused for its nonce, not the request: nothing ran, so any method is sent again.
                discard(value)
                resentWithNonce = true
                diagnoseNonceResend(of: request)
                continue
            }
            switch response.statusCode {
            case 401:
                // A 401 from an origin the token never reached is that origin's answer: nothing to refresh. Nor is
                // a proof refused for its nonce again after the one resend: the token was not refused, and a new
                // one would meet the same answer; it is the caller's, and the request is not sent a third time.
                guard let token, !asksForNonce else { return (value, response) }
                discard(value)
                let challenge = response.value(forHTTPHeaderField: "WWW-Authenticate").flatMap(BearerChallenge.parse)
                // RFC 6750 §3.1: the token is valid but not enough; a new one would be refused the same way.
                if challenge?.error == "insufficient_scope" {
                    throw SessionError(.backendDenied, "the token lacks the scope this request needs", statusCode: 401)
                }
                guard let refresher else {
                    throw SessionError(.accessExpired, "the access token was rejected", statusCode: 401)
                }
                guard !recoveredFromUnauthorized else {
                    // A fresh token was rejected too: the server no longer honours this session.
                    throw SessionError(
                        .sessionRevoked, "the server rejected a freshly refreshed token", statusCode: 401)
                }
                recoveredFromUnauthorized = true
                try await refresher.recover(self, rejectedToken: token)
                guard replayable else {
                    throw SessionError(
                        .accessExpired,
                        "the access token was rejected; it has been refreshed, but a \(HTTPMethod.of(request)) without an "
                            + "Idempotency-Key is not replayed automatically",
                        statusCode: 401
                    )
                }
                continue
            case let status
            where replayable && attemptNumber < configuration.retryPolicy.maximumAttempts
                && configuration.retryPolicy.retries(status: status):
                discard(value)
                attemptNumber += 1
                try await backoff(before: attemptNumber, retryAfter: retryAfter(of: response))
                continue
            case let status
            where (status == 409 || status == 422) && request.value(forHTTPHeaderField: "Idempotency-Key") != nil:
                discard(value)
                throw SessionError(
                    .idempotencyConflict,
                    "the server refused the Idempotency-Key request as a conflict",
                    statusCode: response.statusCode
                )
            default:
                return (value, response)
            }
        }
    }
}

extension UserSession {
    /// The next hop of a redirect chain.
    struct Hop {
        /// The request to send next.
        let request: URLRequest
        /// Whether it carries the session's credentials: only while the chain has never left its origin.
        let carriesCredentials: Bool
    }

    /// The one redirect rule of every route of the pipeline (``RedirectDecision``): `nil` to deliver `response`, or
    /// the hop to follow. A hop that leaves the origin is told to the diagnostics, as is a refusal, which is thrown.
    ///
    /// - Throws: The refusal's ``SessionError`` (a redirect off the scope, a downgrade, too many hops).
    func nextHop(
        after response: HTTPURLResponse, to request: URLRequest, carriesCredentials: Bool, hops: Int
    ) throws(SessionError) -> Hop? {
        switch RedirectDecision.after(
            response, to: request, carriesCredentials: carriesCredentials, hops: hops,
            scope: configuration.credentialScope)
        {
        case .deliver:
            return nil
        case .refuse(let error):
            diagnoseRefusedRedirect(from: request, response: response, error: error)
            throw error
        case .follow(let next, let carries):
            if carriesCredentials, !carries {
                diagnoseWithheld(from: request, to: next, status: response.statusCode)
            }
            return Hop(request: next, carriesCredentials: carries)
        }
    }
}

extension UserSession {
    /// Sends `request` as this session's account and returns the response.
    ///
    /// The request carries `Authorization: Bearer <this session's access token>`. GET and HEAD responses are
    /// served from and stored in the session's private cache per RFC 9111 (<doc:Caching>). A 401 is recovered once: when
    /// the token it rejected has been replaced the request is replayed with the current one, otherwise one
    /// refresh runs (shared with every other caller that needs one) and the request is replayed if its method
    /// is idempotent or it carries an `Idempotency-Key`. Transport failures and retryable statuses are retried
    /// per ``Configuration/retryPolicy`` under the same rule. Every other status is returned as is.
    ///
    /// - Parameter request: The request; an `Authorization` header in it is replaced.
    /// - Returns: The body and the HTTP response.
    /// - Throws: ``SessionError``: `sessionEnded` when the session ended before or while the request ran (never
    ///   a network error), `accessExpired` or `sessionRevoked` for a 401 that could not be recovered,
    ///   `backendDenied` for a 401 with `insufficient_scope`, `outcomeUnknown` for a non-idempotent request
    ///   whose fate is unknown, `idempotencyConflict`, `networkUnavailable`, `timedOut`, `malformedResponse`,
    ///   or refresh errors (`refreshRejected`, `excessiveRefresh`, `refreshTimedOut`, `providerOutage`).
    ///   `CancellationError` when the calling task is cancelled.
    /// - Important: A response that arrives after ``end()`` is never returned: the call throws `sessionEnded`
    ///   instead. The session can still end between this call returning and the caller using the result, so
    ///   store results with ``SessionScoped/commit(_:from:)``, which checks again at the moment of the commit.
    public func data(for request: consuming URLRequest) async throws -> (Data, HTTPURLResponse) {
        let method = HTTPMethod.of(request)
        let cacheable = (method == "GET" || method == "HEAD") && configuration.cacheMaximumBytes > 0
        var bypassCache = false

        // The token, 401 recovery and retry rules are `sendAuthorized`'s, shared with every other request kind;
        // what is particular to `data(for:)` is the cache, consulted before each attempt and filled after.
        let (sent, response) = try await sendAuthorized(request) { outgoing -> AttemptResult<Sent> in
            var outgoing = outgoing
            // The cache's view of the request, derived once for the lookup and the store, and only when one of
            // them can matter: an empty cache answers nothing, and an answer it may not store changes nothing.
            var prepared: ResponseCache.Request?
            if cacheable && !bypassCache && !cache.isEmpty {
                prepared = cache.prepare(outgoing)
                switch prepared.map(cache.lookup) ?? .miss {
                case .fresh(let cached):
                    return .result(Sent(data: cached.body, request: outgoing), cached.response)
                case .needsValidation(_, let conditionalHeaders):
                    for (name, value) in conditionalHeaders { outgoing.setValue(value, forHTTPHeaderField: name) }
                case .miss:
                    break
                }
            }

            let sentAt = configuration.clock.now
            let (answer, response) = try await send(outgoing, judgingStorability: cacheable)
            if response.statusCode == 304 && cacheable && !bypassCache {
                if let refreshed = cache.revalidated(
                    response,
                    for: outgoing,
                    requestSentAt: sentAt,
                    responseReceivedAt: configuration.clock.now
                ) {
                    return .result(Sent(data: refreshed.body, request: outgoing), refreshed.response)
                }
                // The entry was evicted while the request was in flight: ask again, unconditionally.
                bypassCache = true
                return .again
            }
            return .answer(
                Sent(data: answer.data, request: outgoing, prepared: prepared, at: sentAt, storable: answer.storable),
                response, endChecked: true)
        }

        guard let sentAt = sent.at else { return (sent.data, response) }
        if cacheable {
            cache.store(
                response,
                body: sent.data,
                for: sent.request,
                prepared: sent.prepared,
                storable: sent.storable,
                requestSentAt: sentAt,
                responseReceivedAt: configuration.clock.now
            )
        } else if !["GET", "HEAD", "OPTIONS", "TRACE"].contains(method), response.statusCode < 400 {
            cache.invalidate(for: sent.request)
        }
        return (sent.data, response)
    }

    /// Creates one URLSession task, registers it under the lock that guards `isActive`, then starts it, with
    /// ``Configuration/requestTimeout`` as its deadline (``TaskBridge``); an answer is handed back only if the session
    /// was still active when it came.
    ///
    /// At the deadline the task is cancelled (`cancelWithoutRacingCompletion`, like every cancellation), and
    /// the attempt fails with `URLError.timedOut` (unless the session ended or the caller was cancelled meanwhile:
    /// then it is the cancellation it was).
    ///
    /// - Parameters:
    ///   - request: The request, with its `Authorization`.
    ///   - judgingStorability: Whether to find out if the session's cache may store the answer
    ///     (``ResponseCache/mayStore(_:)``): in the completion handler, where the response was just read and is
    ///     still in the processor's cache; after the hop to the caller the same reading cost several times more.
    /// - Returns: What the completion handler answered (the body, and whether the cache may store the answer,
    ///   `false` when not judged), and its response, checked to be HTTP.
    /// - Throws: `TransportFailure` for a failure below HTTP (a timeout as `URLError.timedOut`), `sessionEnded`,
    ///   or `malformedResponse` for an answer that is not HTTP.
    private func send(_ request: URLRequest, judgingStorability: Bool) async throws -> (
        DataCompletion, HTTPURLResponse
    ) {
        let urlSession: URLSession
        switch route {
        case .urlSession(let made): urlSession = made
        #if os(Linux)
            case .curl(let curl): return try await send(request, on: curl, judgingStorability: judgingStorability)
        #endif
        }
        var id: Int?
        let answered: DataCompletion
        do {
            answered = try await TaskBridge.run(
                cancellingThrough: urlSession,
                deadline: configuration.requestTimeout,
                onTimeout: { [self] error in
                    guard (error as? TransportFailure)?.isCancellation == true, isActive else { return nil }
                    return TransportFailure(underlying: URLError(.timedOut), request: request)
                },
                notStarted: TransportFailure(underlying: URLError(.cancelled)),
                discardUnstarted: { task in
                    // Cancelled, so that the session does not keep the task registered (and can be invalidated).
                    urlSession.cancelWithoutRacingCompletion([task])
                },
                create: { (answer: TaskAnswer<DataCompletion>) in
                    // Created under `creation`, not the lifetime lock: creating waits for FoundationNetworking's work
                    // queue, and every other request's token check, registration and forgetting would wait with it.
                    let task = creation.withSharedLock { open -> URLSessionTask? in
                        guard open else { return nil }
                        return urlSession.dataTask(with: request) { data, response, error in
                            if let error {
                                answer.resume(throwing: TransportFailure(underlying: error, request: request))
                            } else if let response {
                                let storable =
                                    judgingStorability
                                    && (response as? HTTPURLResponse).map(ResponseCache.mayStore) == true
                                answer.resume(
                                    returning: DataCompletion(
                                        data: data ?? Data(), response: response, storable: storable))
                            } else {
                                let noResponse = URLError(.badServerResponse)
                                answer.resume(throwing: TransportFailure(underlying: noResponse, request: request))
                            }
                        }
                    }
                    guard let task else { throw SessionError.ended }
                    configuration.beforeStart?(self)
                    // Registered under the lock that `end()` flips `isActive` under, as the last check before the
                    // start: either `end()` takes this task with the others and cancels it, or the session had ended
                    // by now and the task is cancelled here, never started.
                    let registered = lifetime(.register(InFlightRequest(sessionTask: task, answer: answer))).id
                    guard let registered else {
                        urlSession.cancelWithoutRacingCompletion([task])
                        throw SessionError.ended
                    }
                    id = registered
                    return task
                }
            )
        } catch {
            // Forgotten here, not in the completion handler: that runs on FoundationNetworking's work queue
            // (`ImmediateDelegateQueue`), and must not wait for the lifetime lock, which a transfer's creation
            // holds while it waits for that queue. After `end()` there is nothing left to forget: it took them all.
            if let id { lifetime(.forget(id)) }
            throw error
        }
        return try handOver(answered, registeredAs: id)
    }

    /// Forgets a finished attempt and checks the session's end, under one lock: a response that arrives after
    /// `end()` is never handed over. Then checks the answer is HTTP.
    func handOver(_ answered: DataCompletion, registeredAs id: Int?) throws -> (DataCompletion, HTTPURLResponse) {
        guard lifetime(.complete(id)).flag else { throw SessionError.ended }
        guard let http = answered.response as? HTTPURLResponse else {
            throw SessionError(.malformedResponse, "the answer was not an HTTP response")
        }
        return (answered, http)
    }
}

// Structs, not tuples, for the values a request hands through generic code (the continuation's `DataCompletion`,
// declared beside the lifetime that registers it, and the attempt's `Sent`): there a tuple is moved and tested
// through the runtime's tuple witnesses and metadata, on every request; a struct's are the compiler's own. `send`
// returns a plain tuple: nothing generic moves it.

/// What an attempt of `data(for:)` hands back: the body, the request as sent, and what storing the
/// answer in the cache needs (`at` is `nil` for an answer the cache gave, which is not stored again).
private struct Sent {
    let data: Data
    let request: URLRequest
    var prepared: ResponseCache.Request?
    var at: ContinuousClock.Instant?
    var storable = false
}
