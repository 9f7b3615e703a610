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
            let transfer = try prepare(request, on: curl, upload: nil, deadlines: configuration.requestTimeout)
            let handle = RequestHandle()
            var id: Int?
            let collected: CurlAnswer
            do {
                collected = try await withTaskCancellationHandler {
                    try await withUnsafeThrowingContinuation { continuation in
                        let answer = TaskAnswer<CurlAnswer>(handle, continuation)
                        configuration.beforeStart?(self)
                        // Registered as the last check before the start: either `end()` takes this transfer with the
                        // others and answers it, or the session had ended and it is never started.
                        let entry = InFlightRequest(sessionTask: nil, transfer: transfer, collected: answer)
                        id = lifetime(.register(entry)).id
                        guard id != nil else {
                            answer.resume(throwing: SessionError.ended)
                            return
                        }
                        // On the loop's thread only the hand-over: the response, its cookies and whether the
                        // cache may keep it are worked out below, on the caller's thread (``CurlAnswer``).
                        curl.startCollecting(transfer) { result in
                            switch result {
                            case .success(let collected): answer.resume(returning: collected)
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
            guard let response = collected.response() else {
                if let id { lifetime(.forget(id)) }
                throw TransportFailure(underlying: URLError(.badServerResponse), request: request)
            }
            // Handed over first: the answer of a session that ended meanwhile is refused, and its cookies are not
            // kept in the jar `end()` emptied.
            let (handed, http) = try handOver(
                DataCompletion(data: collected.data, response: response, storable: false), registeredAs: id)
            keepCookies(of: http)
            let storable = judgingStorability && ResponseCache.mayStore(http)
            return (DataCompletion(data: handed.data, response: http, storable: storable), http)
        }

        /// Makes a transfer for `request` on the session's client, carrying the session's cookies.
        ///
        /// The session's one cookie jar is used as a `URLSession` uses its own: the stored cookies for the URL are
        /// sent, after any `Cookie` the request writes itself, and what an answer sets is kept
        /// (``keepCookies(of:)``); a hop across origins carries the new origin's own cookies only. Which cookies go is
        /// decided here (``cookiesToSend(from:to:)``), not by the jar: FoundationNetworking's matches the host alone.
        ///
        /// `whole` is the request's deadline; without one the transfer's bytes may not stop moving for
        /// ``Configuration/requestTimeout`` (what the transfer URLSession's request timeout is).
        ///
        /// - Returns: The transfer, not started.
        /// - Throws: `invalidInput`, naming the reason, for a request the transport refuses: nothing was sent.
        func prepare(
            _ request: URLRequest, on curl: CurlClient, upload: CurlUpload?, deadlines whole: Duration? = nil
        ) throws -> CurlTransferHandle {
            var outgoing = request
            if let jar = cookies, let url = request.url,
                case let cookies = Self.cookiesToSend(from: jar, to: url), !cookies.isEmpty,
                let stored = HTTPCookie.requestHeaderFields(with: cookies)["Cookie"]
            {
                let written = request.value(forHTTPHeaderField: "Cookie").map { $0 + "; " } ?? ""
                outgoing.setValue(written + stored, forHTTPHeaderField: "Cookie")
            }
            let deadlines =
                whole != nil ? CurlDeadlines(whole: whole) : CurlDeadlines(idle: configuration.requestTimeout)
            do {
                return try curl.prepare(outgoing, deadlines: deadlines, upload: upload)
            } catch {
                // Refused before anything was sent: the caller's input, with what was wrong with it.
                throw SessionError(.invalidInput, "the request cannot be sent as written (\(error))")
            }
        }

        /// The cookies of `jar` that a request to `url` carries (RFC 6265 §5.4): those whose domain matches the host
        /// (the jar's own match), whose path path-matches the URL's (§5.1.4), that have not expired, and, for a
        /// `Secure` cookie, only over https.
        ///
        /// FoundationNetworking's jar on Linux matches the host alone: it would send a `Secure` cookie in the clear
        /// to `http://` on the same host (a redirect that downgrades, an app's plain request), and a cookie scoped to
        /// `/account` to every path.
        static func cookiesToSend(from jar: HTTPCookieStorage, to url: URL, now: Date = Date()) -> [HTTPCookie] {
            guard let matched = jar.cookies(for: url), !matched.isEmpty else { return [] }
            let secure = url.scheme?.lowercased() == "https"
            let path = url.path.isEmpty ? "/" : url.path
            return matched.filter { cookie in
                (secure || !cookie.isSecure) && (cookie.expiresDate.map { $0 > now } ?? true)
                    && Self.pathMatches(path, cookie.path)
            }
        }

        /// RFC 6265 §5.1.4: the request's path is the cookie's, or lies below it at a `/`. Compared as bytes, as the
        /// RFC says ("identical"): `String`'s own comparison takes canonically equivalent text as equal, so a path
        /// spelled `/cafe\u{301}` would match a cookie scoped to `/caf\u{E9}`.
        static func pathMatches(_ requestPath: String, _ cookiePath: String) -> Bool {
            let request = requestPath.utf8
            let cookie = cookiePath.isEmpty ? "/".utf8 : cookiePath.utf8
            guard request.starts(with: cookie) else { return false }
            return request.count == cookie.count || cookie.last == UInt8(ascii: "/")
                || request.dropFirst(cookie.count).first == UInt8(ascii: "/")
        }

        /// Keeps the cookies `response` sets in the session's jar.
        ///
        /// A `Secure` cookie set by an answer that came over plain HTTP is dropped (RFC 6265bis, its storage model): an
        /// attacker on the clear channel could otherwise plant one that later requests over https would carry.
        func keepCookies(of response: HTTPURLResponse) {
            // The field looked for without Foundation's case-insensitive compare, which costs about a microsecond a
            // field, on every answer.
            guard let jar = cookies, let url = response.url,
                let fields = response.allHeaderFields as? [String: String],
                fields.keys.contains(where: { $0.utf8.count == 10 && $0.lowercased() == "set-cookie" })
            else { return }
            let secure = url.scheme?.lowercased() == "https"
            let cookies = HTTPCookie.cookies(withResponseHeaderFields: fields, for: url).filter {
                secure || !$0.isSecure
            }
            jar.setCookies(cookies, for: url, mainDocumentURL: nil)
        }

        /// Runs one streaming transfer (an upload, a download, a byte stream) on the session's client, its events
        /// made by `events` for the call's answer: the transfer route's rules on libcurl.
        ///
        /// It starts only while the session is active, else the call throws `sessionEnded` and nothing is sent;
        /// `end()` closes the client, which fails the transfer with `URLError.cancelled` whether it was running or
        /// still on its way to the loop. The caller's cancellation cancels it, before or after the start.
        func stream<Value: Sendable>(
            _ transfer: CurlTransferHandle, on curl: CurlClient,
            events makeEvents: (TaskAnswer<Value>) -> TransferEvents
        ) async throws -> Value {
            try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { continuation in
                    let answer = TaskAnswer<Value>(RequestHandle(), continuation)
                    let events = makeEvents(answer)
                    guard isActive else {
                        answer.resume(throwing: SessionError.ended)
                        return
                    }
                    configuration.beforeStart?(self)
                    let head = events.response
                    let streaming = CurlStreamEvents(
                        head: { [weak self] response in
                            self?.keepCookies(of: response)
                            head?(response)
                        },
                        data: events.data ?? { _ in },
                        sent: events.sent)
                    curl.startCollecting(transfer, streaming: streaming) { result in
                        if case .failure(let error) = result {
                            events.completed(error)
                        } else {
                            events.completed(nil)
                        }
                    }
                }
            } onCancel: {
                transfer.cancel()
            }
        }
    }
#endif
