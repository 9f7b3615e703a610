#if os(Linux)
    import Foundation
    import FoundationNetworking
    import SessionKitOAuth

    extension UserSession {
        /// `send` on the libcurl transport: one transfer on the session's client, registered with the lifetime before
        /// it starts, with ``Configuration/requestTimeout`` as its whole-request deadline, enforced by the transport's
        /// event loop. The same answers as the URLSession route: an answer after `end()` is never handed over, a
        /// deadline is `URLError.timedOut`, a failure below HTTP a `TransportFailure`.
        func send(_ request: URLRequest, on curl: CurlClient, judgingStorability: Bool) async throws -> (
            DataCompletion, HTTPURLResponse
        ) {
            // The session's one cookie jar (its ephemeral URLSession's storage), as that URLSession uses it: the
            // stored cookies for the URL are sent, after any `Cookie` the request writes itself, and what the answer
            // sets is kept. The jar applies domain, path and `Secure`; a hop across origins carries the new origin's
            // own cookies only, as on the URLSession route.
            let jar = urlSession.configuration.httpCookieStorage
            var outgoing = request
            if let jar, let url = request.url, let cookies = jar.cookies(for: url), !cookies.isEmpty,
                let stored = HTTPCookie.requestHeaderFields(with: cookies)["Cookie"]
            {
                let written = request.value(forHTTPHeaderField: "Cookie").map { $0 + "; " } ?? ""
                outgoing.setValue(written + stored, forHTTPHeaderField: "Cookie")
            }
            let transfer: CurlTransferHandle
            do {
                transfer = try curl.prepare(outgoing, deadlines: CurlDeadlines(whole: configuration.requestTimeout))
            } catch {
                // Refused before anything was sent: the caller's input, with what was wrong with it.
                throw SessionError(.invalidInput, "the request cannot be sent as written (\(error))")
            }
            let handle = RequestHandle()
            var id: Int?
            let answered: DataCompletion
            do {
                answered = try await withTaskCancellationHandler {
                    try await withUnsafeThrowingContinuation { continuation in
                        let answer = TaskAnswer<DataCompletion>(handle, continuation)
                        configuration.beforeStart?(self)
                        // Registered as the last check before the start: either `end()` takes this transfer with the
                        // others and answers it, or the session had ended and it is never started.
                        id =
                            lifetime(.register(InFlightRequest(sessionTask: nil, transfer: transfer, answer: answer)))
                            .id
                        guard id != nil else {
                            answer.resume(throwing: SessionError.ended)
                            return
                        }
                        curl.start(transfer) { result in
                            switch result {
                            case .success(let (data, response)):
                                if let jar, let url = request.url,
                                    let fields = response.allHeaderFields as? [String: String],
                                    fields.keys.contains(where: {
                                        $0.caseInsensitiveCompare("Set-Cookie") == .orderedSame
                                    })
                                {
                                    jar.setCookies(
                                        HTTPCookie.cookies(withResponseHeaderFields: fields, for: url), for: url,
                                        mainDocumentURL: nil)
                                }
                                let storable = judgingStorability && ResponseCache.mayStore(response)
                                answer.resume(
                                    returning: DataCompletion(data: data, response: response, storable: storable))
                            case .failure(let error):
                                answer.resume(throwing: TransportFailure(underlying: error, request: request))
                            }
                        }
                    }
                } onCancel: {
                    transfer.cancel()
                }
            } catch {
                if let id { lifetime(.forget(id)) }
                throw error
            }
            return try handOver(answered, registeredAs: id)
        }
    }
#endif
