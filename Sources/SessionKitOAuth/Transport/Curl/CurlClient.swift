#if os(Linux)
    import CSessionKitCurl
    import Foundation
    import FoundationNetworking

    /// How long a libcurl transfer may take, each enforced by the process's event loop: `nil` is no limit.
    package struct CurlDeadlines: Sendable, Equatable {
        /// From the start until the connection (and its TLS handshake) is made.
        package var connect: Duration?
        /// From the start until the first byte of an answer's head.
        package var firstByte: Duration?
        /// From the start until the last byte of the answer.
        package var whole: Duration?
        /// How long bytes may stop moving either way, at any point (libcurl's low-speed limit of one byte per
        /// second, so counted in whole seconds, rounded up): what `URLSession`'s `timeoutIntervalForRequest` is.
        package var idle: Duration?

        package init(
            connect: Duration? = nil, firstByte: Duration? = nil, whole: Duration? = nil, idle: Duration? = nil
        ) {
            self.connect = connect
            self.firstByte = firstByte
            self.whole = whole
            self.idle = idle
        }
    }

    /// A request body libcurl reads as it sends, never copied whole: an upload's.
    package enum CurlUpload: Sendable {
        /// Bytes held in memory, read from where they are.
        case data(Data)
        /// A file, opened when the transfer is made and read as the body leaves.
        case file(URL)
    }

    /// What a streaming transfer reports as it runs, on the loop's thread, in order; each must return quickly.
    ///
    /// A streaming transfer keeps none of its body: each chunk goes to `data` as it arrives, and its completion
    /// answers with an empty body.
    package struct CurlStreamEvents: Sendable {
        /// The final head of the answer arrived (never a `1xx`), before any byte of its body.
        package var head: @Sendable (HTTPURLResponse) -> Void
        /// A chunk of the body arrived, decoded.
        package var data: @Sendable (Data) -> Void
        /// Part of the request body left: the bytes sent so far and the total.
        package var sent: (@Sendable (_ total: Int64, _ expected: Int64) -> Void)?

        package init(
            head: @escaping @Sendable (HTTPURLResponse) -> Void,
            data: @escaping @Sendable (Data) -> Void,
            sent: (@Sendable (_ total: Int64, _ expected: Int64) -> Void)? = nil
        ) {
            self.head = head
            self.data = data
            self.sent = sent
        }
    }

    /// The requests of one owner (a user session) on libcurl: they share connections, TLS sessions and DNS answers
    /// with each other through one share handle, and with nothing else, so one user's connections are never
    /// another's. ``close()`` fails every transfer still running at once and frees the share handle.
    ///
    /// Every transfer runs on ``CurlEventLoop/shared``; the client's state is the loop thread's, reached through it.
    package final class CurlClient: @unchecked Sendable {
        private let loop: CurlEventLoop
        // The loop thread's.
        private var share: UnsafeMutableRawPointer?
        private var live = [ObjectIdentifier: CurlTransfer]()
        private var closed = false

        /// A PEM file of the certificates the client trusts instead of the system's store, if any.
        private let trustedCertificates: String?
        /// The proxies every request of the client goes through.
        private let proxies: CurlProxies

        /// Makes a client.
        ///
        /// - Parameters:
        ///   - trustedCertificates: A PEM file of certificate authorities to trust instead of the system's store (a
        ///     private CA); `nil`, the default, verifies servers against the system's store.
        ///   - proxies: The proxies to send through; by default those the environment names (read once per process).
        package init(trustedCertificates: URL? = nil, proxies: CurlProxies = .fromEnvironment) {
            loop = .shared
            self.trustedCertificates = trustedCertificates?.path
            self.proxies = proxies
        }

        /// The share handle, made on the loop's thread for the client's first transfer: a client that never sends
        /// (a session that is signed in and idle) holds none of libcurl's caches.
        private func madeShare() -> UnsafeMutableRawPointer {
            if let share { return share }
            guard let made = curl_share_init() else { fatalError("libcurl could not make a share handle") }
            sk_curl_share_setopt_long(made, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_CONNECT.rawValue))
            sk_curl_share_setopt_long(made, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
            sk_curl_share_setopt_long(made, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
            // No cookie engine: a request carries the `Cookie` field its sender wrote, and `Set-Cookie` is handed
            // back as a field. A session keeps its cookies in one jar whichever transport sends a request.
            share = made
            return made
        }

        deinit {
            // Nothing runs on a client no one holds: every transfer holds it until it completes.
            if let share { curl_share_cleanup(share) }
        }

        /// Sends `request`, once, as it is: no redirect is followed and no field is added but `Expect:` (and
        /// `Accept-Encoding` when the request has none).
        ///
        /// - Returns: A handle that cancels the transfer; `completion` runs once, on the loop's thread, and must not
        ///   block: with the answer, or with a `URLError` (`cancelled` when cancelled or closed, `timedOut` at a
        ///   deadline, the codes `URLSession` uses for the rest).
        /// - Throws: `CurlRequestRefusal` for a request the transport does not send.
        @discardableResult
        package func start(
            _ request: URLRequest, deadlines: CurlDeadlines = CurlDeadlines(),
            completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), URLError>) -> Void
        ) throws(CurlRequestRefusal) -> CurlTransferHandle {
            let handle = try prepare(request, deadlines: deadlines)
            start(handle, completion: completion)
            return handle
        }

        /// Sends `request` and waits for its answer; cancelling the calling task cancels the transfer.
        package func data(for request: URLRequest, deadlines: CurlDeadlines = CurlDeadlines()) async throws -> (
            Data, HTTPURLResponse
        ) {
            let handle = try prepare(request, deadlines: deadlines)
            // A cancellation before the start reaches the loop first, and the start then finds the transfer
            // cancelled: the loop takes both in the order they were handed over.
            let answer = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    startCollecting(handle) { continuation.resume(with: $0) }
                }
            } onCancel: {
                handle.cancel()
            }
            // Made here, on the caller's thread, not on the loop's (``CurlAnswer``).
            guard let response = answer.response() else { throw URLError(.badServerResponse) }
            return (answer.data, response)
        }

        /// Makes a transfer for `request`, not started, sending `upload` (read as it leaves) instead of the request's
        /// `httpBody` when there is one.
        ///
        /// - Returns: The transfer's handle, for ``start(_:streaming:completion:)`` and to cancel it.
        /// - Throws: `CurlRequestRefusal` for a request the transport does not send, or an upload file it cannot
        ///   open.
        package func prepare(
            _ request: URLRequest, deadlines: CurlDeadlines, upload: CurlUpload? = nil
        ) throws(CurlRequestRefusal) -> CurlTransferHandle {
            let transfer = try CurlTransfer(
                request, deadlines: deadlines, trusting: trustedCertificates, proxies: proxies, upload: upload)
            return CurlTransferHandle(transfer: transfer, loop: loop)
        }

        /// Hands `handle`'s transfer to the loop, which adds it to the multi handle unless the client was closed or
        /// the transfer cancelled first. A handle is started once.
        ///
        /// With `streaming`, the answer goes there as it arrives and `completion` answers with an empty body;
        /// without, the body is collected for `completion`. A transfer `outlivingClose` (a write handed off to run
        /// to its end) is not failed by ``close()``, which then frees the share handle after it.
        package func start(
            _ handle: CurlTransferHandle, streaming: CurlStreamEvents? = nil, outlivingClose: Bool = false,
            completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), URLError>) -> Void
        ) {
            startCollecting(handle, streaming: streaming, outlivingClose: outlivingClose) { result in
                completion(
                    result.flatMap { answer in
                        answer.response().map { .success((answer.data, $0)) } ?? .failure(URLError(.badServerResponse))
                    })
            }
        }

        /// ``start(_:streaming:outlivingClose:completion:)`` answering with the answer as collected: `answering` runs
        /// on the loop's thread, and the reader makes the response on its own (``CurlAnswer/response()``), off the
        /// one thread every transfer of the process waits on.
        package func startCollecting(
            _ handle: CurlTransferHandle, streaming: CurlStreamEvents? = nil, outlivingClose: Bool = false,
            answering: @escaping @Sendable (Result<CurlAnswer, URLError>) -> Void
        ) {
            let transfer = handle.transfer
            // Set before the loop sees the transfer: handing it over orders these writes before the loop's reads.
            if let streaming { transfer.stream(to: streaming) }
            transfer.completion = answering
            transfer.outlivesClose = outlivingClose
            // Held by the transfer until it completes: the share handle it uses lives as long as the client.
            transfer.client = self
            loop.perform { [self, transfer] in
                guard !closed, !transfer.cancelled else {
                    transfer.finish(with: URLError(.cancelled), loop: loop)
                    return
                }
                transfer.use(madeShare())
                live[ObjectIdentifier(transfer)] = transfer
                loop.add(transfer)
            }
        }

        /// Fails every transfer still running with `cancelled`, at once, but those outliving the close, and any
        /// started later; frees the share handle (its connections close) once the last transfer has completed.
        /// Returns at once; the transfers complete on the loop's thread.
        package func close() {
            loop.perform { [self] in
                guard !closed else { return }
                closed = true
                for transfer in Array(live.values) where !transfer.outlivesClose {
                    loop.remove(transfer, failingWith: URLError(.cancelled))
                }
                // A transfer handed to the loop but not yet added completes when its turn comes (see `start`).
                freeShareIfIdle()
            }
        }

        /// Forgets a transfer that completed; on the loop's thread.
        func forget(_ transfer: CurlTransfer) {
            live[ObjectIdentifier(transfer)] = nil
            freeShareIfIdle()
        }

        /// Frees the share handle of a closed client whose last transfer completed (each left it when its easy
        /// handle was cleaned up); on the loop's thread.
        private func freeShareIfIdle() {
            guard closed, live.isEmpty, let share else { return }
            self.share = nil
            curl_share_cleanup(share)
        }

        /// Runs `work` on the transport's loop thread, after everything handed to it before (for tests that hold
        /// the loop to order events).
        package static func onLoop(_ work: @escaping @Sendable () -> Void) {
            CurlEventLoop.shared.perform(work)
        }

        /// What the process's transport loop holds, described (for a test that waited too long to say why).
        package static func loopReport() async -> String {
            await withCheckedContinuation { continuation in
                CurlEventLoop.shared.perform { continuation.resume(returning: CurlEventLoop.shared.report()) }
            }
        }

        /// The number of transfers running; on the loop's thread (for tests, through ``CurlEventLoop``).
        package func running() async -> Int {
            await withCheckedContinuation { continuation in
                loop.perform { [self] in continuation.resume(returning: live.count) }
            }
        }
    }

    /// Cancels one transfer: it completes with `URLError(.cancelled)` unless it completed first.
    package struct CurlTransferHandle: Sendable {
        fileprivate let transfer: CurlTransfer
        fileprivate let loop: CurlEventLoop

        /// The address of the transfer's libcurl handle (for tests of what happens when an address is used again).
        package var address: UInt { UInt(bitPattern: transfer.easy) }

        package func cancel() {
            loop.perform { [transfer, loop] in
                // Not started yet: its start finds it cancelled.
                transfer.cancelled = true
                loop.remove(transfer, failingWith: URLError(.cancelled))
            }
        }
    }
#endif
