import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Sends a write (POST, PUT, PATCH, DELETE) with a policy for what sign-out does if it is still in flight.
    ///
    /// - `.wait(d)`: sign-out waits up to `d` for it, then cancels it.
    /// - `.handOff`: it runs on a URLSession of its own that sign-out lets finish; its outcome is kept by the
    ///   manager for the same account's next session (``SessionManager/takeWriteReconciliations(for:)``). It is
    ///   never replayed.
    /// - `.discard`: sign-out cancels it; the manager tells the account's next session to fetch the server's
    ///   state instead of replaying it.
    ///
    /// - Parameters:
    ///   - request: The write; it carries this session's token.
    ///   - policy: What sign-out does with it.
    /// - Returns: The body and the response.
    /// - Throws: What ``data(for:)`` throws.
    /// - Important: The policy applies only to a write still in flight when sign-out reaches it; a write is never
    ///   replayed automatically under another session, whatever its policy.
    public func write(_ request: URLRequest, policy: WritePolicy) async throws -> (Data, HTTPURLResponse) {
        let done = Broadcast<Void>()
        guard let id = lifetime(.beginWrite(PendingWrite(policy: policy, done: done))).id else {
            throw SessionError.ended
        }
        defer {
            lifetime(.endWrite(id))
            done.resolve(.success(()))
        }
        let summary = "\(request.httpMethod ?? "GET") \(request.url?.path ?? "")"
        switch policy {
        case .wait, .discard:
            do {
                return try await data(for: request)
            } catch let error as SessionError where error.code == .sessionEnded && policy == .discard {
                ledger?.record(.discarded(summary: summary), for: account)
                throw error
            }
        case .handOff:
            do {
                let result = try await sendHandedOff(request)
                if !isActive {
                    ledger?.record(.completed(summary: summary, status: result.1.statusCode), for: account)
                }
                return result
            } catch {
                if !isActive {
                    let code = (error as? SessionError)?.code ?? .networkUnavailable
                    ledger?.record(.failed(summary: summary, code: code), for: account)
                }
                throw error
            }
        }
    }

    /// The writes in flight now, with their policies and completion signals (for sign-out).
    var pendingWrites: [PendingWrite] {
        guard case .writes(let writes) = lifetime(.pendingWrites) else { return [] }
        return writes
    }

    /// Sends a handed-off write, following its redirects by the session's rules (``RedirectDecision``): the token
    /// only on same-origin hops of a chain that never left the origin; a DPoP proof refused for its nonce is sent
    /// again once with it.
    private func sendHandedOff(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        if let refusal = configuration.credentialScope.refusal(of: request.url) { throw refusal }
        var request = request
        var carriesCredentials = true
        var hops = 0
        // Whether a proof refused for its nonce was sent again (RFC 9449 §9): once, as every request kind does. That
        // is no replay: the proof was refused, so the write did not run.
        var resentWithNonce = false
        while true {
            let (data, response) = try await sendHandedOffOnce(request, carriesCredentials: carriesCredentials)
            switch RedirectDecision.after(
                response, to: request, carriesCredentials: carriesCredentials, hops: hops,
                scope: configuration.credentialScope)
            {
            case .deliver:
                if carriesCredentials, noteDPoPNonce(of: response, for: request.url), !resentWithNonce {
                    resentWithNonce = true
                    diagnoseNonceResend(of: request)
                    continue
                }
                return (data, response)
            case .refuse(let error):
                diagnoseRefusedRedirect(from: request, response: response, error: error)
                throw error
            case .follow(let next, let carries):
                if carriesCredentials, !carries {
                    diagnoseWithheld(from: request, to: next, status: response.statusCode)
                }
                (request, carriesCredentials, hops) = (next, carries, hops + 1)
            }
        }
    }

    private func sendHandedOffOnce(
        _ request: URLRequest, carriesCredentials: Bool
    ) async throws -> (Data, HTTPURLResponse) {
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
                configuration.httpCookieStorage = urlSession.configuration.httpCookieStorage
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
