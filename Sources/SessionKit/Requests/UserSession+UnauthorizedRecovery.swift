import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

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
            switch RedirectDecision.after(
                response, to: request, carriesCredentials: carriesCredentials, hops: hops,
                scope: configuration.credentialScope)
            {
            case .deliver:
                break
            case .refuse(let error):
                discard(value)
                diagnoseRefusedRedirect(from: request, response: response, error: error)
                throw error
            case .follow(let next, let carries):
                discard(value)
                if carriesCredentials, !carries {
                    diagnoseWithheld(from: request, to: next, status: response.statusCode)
                }
                request = next
                carriesCredentials = carries
                hops += 1
                replayable = RetryPolicy.isReplayable(request)
                continue
            }

            let asksForNonce = token != nil && noteDPoPNonce(of: response, for: request.url)
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
