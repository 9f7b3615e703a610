import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The pipeline's hand-off route: a write whose policy is `.handOff` runs to its end on a URLSession of its own that
// `end()` lets finish, so it cannot go through `sendAuthorized` (which hands nothing over after the end). It keeps
// the pipeline's other rules: the credential scope, the token only on hops of a chain that never left the origin
// (`nextHop`, the same redirect rule), a proof refused for its nonce sent again once; it is never replayed.

extension UserSession {
    /// Sends a handed-off write, following its redirects by the pipeline's one rule (`nextHop`): the token
    /// only on same-origin hops of a chain that never left the origin; a DPoP proof refused for its nonce is sent
    /// again once with it.
    func sendHandedOff(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        if let refusal = configuration.credentialScope.refusal(of: request.url) { throw refusal }
        var request = request
        var carriesCredentials = true
        var hops = 0
        // Whether a proof refused for its nonce was sent again (RFC 9449 §9): once, as every request kind does. That
        // is no replay: the proof was refused, so the write did not run.
        var resentWithNonce = false
        // Whether the write carries a proof, read once as it starts (a refresh keeps a bound token's key): only a proof
        // has a nonce (RFC 9449 §9), so a bearer write reads no `DPoP-Nonce`, as no other kind does.
        let proven: Bool
        if case .credential(let held?, _, _) = lifetime(.credential(at: nil, nonceFor: nil)) {
            proven = held.proofKey != nil
        } else {
            proven = false
        }
        while true {
            let (data, response) = try await sendHandedOffOnce(request, carriesCredentials: carriesCredentials)
            if let hop = try nextHop(after: response, to: request, carriesCredentials: carriesCredentials, hops: hops) {
                (request, carriesCredentials, hops) = (hop.request, hop.carriesCredentials, hops + 1)
                continue
            }
            if carriesCredentials, proven, noteDPoPNonce(of: response, for: request.url), !resentWithNonce {
                resentWithNonce = true
                diagnoseNonceResend(of: request)
                continue
            }
            return (data, response)
        }
    }

    private func sendHandedOffOnce(
        _ request: URLRequest, carriesCredentials: Bool
    ) async throws -> (Data, HTTPURLResponse) {
        #if os(Linux)
            if let curl {
                return try await sendHandedOffOnce(request, on: curl, carriesCredentials: carriesCredentials)
            }
        #endif
        // Not cancelled by the caller nor by `end()`: a handed-off write runs to its end on a session of its own.
        let (data, response): (Data, URLResponse) = try await TaskBridge.run(
            cancellingThrough: nil, notStarted: SessionError.ended
        ) { answer in
            while true {
                let made = try lifetime(.handoff(nonceFor: request.url)) { action -> URLSessionTask? in
                    guard case .handoff(let supply) = action else { throw SessionError.ended }
                    switch supply {
                    case .ended: throw SessionError.ended
                    case .make: return nil
                    case .use(let session, let credential, let nonce):
                        var outgoing = request
                        if carriesCredentials, let credential {
                            try applyCredential(
                                to: &outgoing, token: credential.token, proofKey: credential.proofKey, nonce: nonce)
                        }
                        // Created here, under the lock `end()` takes before it invalidates the hand-off session
                        // (which then waits for this task); started by the bridge after the lock is released.
                        return handOffTask(on: session, outgoing, answer)
                    }
                }
                if let made { return made }
                // Made with no lock held, and offered: a racer's spare, or one made after the end, is invalidated.
                let configuration = URLSessionConfiguration.ephemeral
                configuration.urlCache = nil
                configuration.httpCookieStorage = cookies
                // It follows no redirect itself: `sendHandedOff` judges every hop.
                let session = URLSession(
                    configuration: configuration, delegate: RedirectRefusal.shared, delegateQueue: nil)
                if case .offeredHandoff(.spare(let kept)) = lifetime(.offerHandoff(session)) {
                    session.finishTasksAndInvalidate()
                    if kept == nil { throw SessionError.ended }
                }
            }
        }
        guard let http = response as? HTTPURLResponse else {
            throw SessionError(.malformedResponse, "the answer was not an HTTP response")
        }
        return (data, http)
    }

    #if os(Linux)
        /// One hop of a handed-off write on the session's libcurl client, as a transfer that outlives the client's
        /// close: started under the lifetime lock while the session is active (with the credential it holds at that
        /// instant), so that `end()`, which closes the client after, lets it run to its end; the caller's
        /// cancellation does not reach it.
        private func sendHandedOffOnce(
            _ request: URLRequest, on curl: CurlClient, carriesCredentials: Bool
        ) async throws -> (Data, HTTPURLResponse) {
            try await withUnsafeThrowingContinuation { continuation in
                let answer = TaskAnswer<(Data, HTTPURLResponse)>(RequestHandle(), continuation)
                do {
                    try lifetime(.credential(at: nil, nonceFor: request.url)) { action in
                        guard case .credential(let credential?, _, let nonce) = action else { throw SessionError.ended }
                        var outgoing = request
                        if carriesCredentials {
                            try applyCredential(
                                to: &outgoing, token: credential.token, proofKey: credential.proofKey, nonce: nonce)
                        }
                        let transfer = try prepare(outgoing, on: curl, upload: nil)
                        curl.start(transfer, outlivingClose: true) { [weak self] result in
                            switch result {
                            case .success(let (data, response)):
                                self?.keepCookies(of: response)
                                answer.resume(returning: (data, response))
                            case .failure(let error):
                                answer.resume(throwing: TransportFailure(underlying: error).error(replayable: false))
                            }
                        }
                    }
                } catch {
                    answer.resume(throwing: error)
                }
            }
        }
    #endif

    /// A hand-off write's task on `session`, its answer going to `answer`.
    private func handOffTask(
        on session: URLSession, _ outgoing: URLRequest, _ answer: TaskAnswer<(Data, URLResponse)>
    ) -> URLSessionTask {
        session.dataTask(with: outgoing) { data, response, error in
            if let error {
                answer.resume(throwing: TransportFailure(underlying: error).error(replayable: false))
            } else if let response {
                answer.resume(returning: (data ?? Data(), response))
            } else {
                answer.resume(throwing: SessionError(.malformedResponse, "no response"))
            }
        }
    }
}
