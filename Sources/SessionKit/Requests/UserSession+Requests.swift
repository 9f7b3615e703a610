import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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

    /// Refreshes the access token now, whatever the current one's expiry; the session holds the new tokens when
    /// this returns.
    ///
    /// - Important: Single flight: a call made while a refresh is running waits for that refresh instead of
    ///   starting another, and every refresh counts against ``RefreshPolicy``'s loop guard.
    /// - Throws: ``SessionError``: `accessExpired` when the session cannot refresh, and the refresh errors.
    public func refreshTokens() async throws {
        guard let refresher else {
            throw SessionError(.accessExpired, "this session has no token endpoint to refresh with")
        }
        _ = try await refresher.forceRefresh(self)
    }

    func backoff(before attempt: Int, retryAfter: Duration?) async throws {
        let delay = configuration.retryPolicy.delay(
            beforeAttempt: attempt,
            retryAfter: retryAfter,
            random: Double.random(in: 0..<1)
        )
        try await configuration.clock.sleep(for: delay)
    }

    func retryAfter(of response: HTTPURLResponse) -> Duration? {
        guard let value = response.value(forHTTPHeaderField: "Retry-After") else { return nil }
        return RetryAfter.parse(value, now: configuration.clock.wallNow)
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
        let urlSession = urlSession
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
        // Forgotten, and the session's end checked, under one lock: a response that arrives after `end()` is never
        // handed over.
        guard lifetime(.complete(id)).flag else { throw SessionError.ended }
        guard let http = answered.response as? HTTPURLResponse else {
            throw SessionError(.malformedResponse, "the answer was not an HTTP response")
        }
        return (answered, http)
    }
}

// Structs, not tuples, for the values a request hands through generic code (the continuation, the attempt's
// result): there a tuple is moved and tested through the runtime's tuple witnesses and metadata, on every request; a
// struct's are the compiler's own. `send` returns a plain tuple: nothing generic moves it.

/// A `data(for:)` call in flight, as the session's registry holds it: its task, for `end()` to cancel, and the
/// right to answer its caller, for `end()` to answer first.
struct InFlightRequest: Sendable, CarriesSessionTask {
    let sessionTask: URLSessionTask
    let answer: TaskAnswer<DataCompletion>
}

/// What one data task's completion handler answers: the body, the response, and whether the cache may store it.
struct DataCompletion: Sendable {
    let data: Data
    let response: URLResponse
    let storable: Bool
}

/// What an attempt of `data(for:)` hands back: the body, the request as sent, and what storing the
/// answer in the cache needs (`at` is `nil` for an answer the cache gave, which is not stored again).
private struct Sent {
    let data: Data
    let request: URLRequest
    var prepared: ResponseCache.Request?
    var at: ContinuousClock.Instant?
    var storable = false
}
