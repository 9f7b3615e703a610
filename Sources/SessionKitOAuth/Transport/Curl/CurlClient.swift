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

        package init(connect: Duration? = nil, firstByte: Duration? = nil, whole: Duration? = nil) {
            self.connect = connect
            self.firstByte = firstByte
            self.whole = whole
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

        /// A PEM file of the certificates the client trusts instead of the system's store, if any.
        private let trustedCertificates: String?

        /// Makes a client.
        ///
        /// - Parameter trustedCertificates: A PEM file of certificate authorities to trust instead of the system's
        ///   store (a private CA); `nil`, the default, verifies servers against the system's store.
        package init(trustedCertificates: URL? = nil) {
            loop = .shared
            self.trustedCertificates = trustedCertificates?.path
            guard let share = curl_share_init() else { fatalError("libcurl could not make a share handle") }
            sk_curl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_CONNECT.rawValue))
            sk_curl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
            sk_curl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
            // No cookie engine: a request carries the `Cookie` field its sender wrote, and `Set-Cookie` is handed
            // back as a field. A session keeps its cookies in one jar whichever transport sends a request.
            self.share = share
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
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    start(handle) { continuation.resume(with: $0) }
                }
            } onCancel: {
                handle.cancel()
            }
        }

        /// Makes a transfer for `request`, not started.
        package func prepare(_ request: URLRequest, deadlines: CurlDeadlines) throws(CurlRequestRefusal)
            -> CurlTransferHandle
        {
            CurlTransferHandle(
                transfer: try CurlTransfer(request, deadlines: deadlines, trusting: trustedCertificates), loop: loop)
        }

        /// Hands `handle`'s transfer to the loop, which adds it to the multi handle unless the client was closed or
        /// the transfer cancelled first. A handle is started once.
        package func start(
            _ handle: CurlTransferHandle,
            completion: @escaping @Sendable (Result<(Data, HTTPURLResponse), URLError>) -> Void
        ) {
            let transfer = handle.transfer
            // Set before the loop sees the transfer: handing it over orders this write before the loop's reads.
            transfer.completion = { completion($0.map { ($0.data, $0.response) }) }
            transfer.client = self
            loop.perform { [self, transfer] in
                guard let share, !transfer.cancelled else {
                    transfer.finish(with: URLError(.cancelled), loop: loop)
                    return
                }
                transfer.use(share)
                live[ObjectIdentifier(transfer)] = transfer
                loop.add(transfer)
            }
        }

        /// Fails every transfer still running with `cancelled`, at once, and any started later; then frees the share
        /// handle (its connections close). Returns at once; the transfers complete on the loop's thread.
        package func close() {
            loop.perform { [self] in
                guard let share else { return }
                self.share = nil
                for transfer in Array(live.values) { loop.remove(transfer, failingWith: URLError(.cancelled)) }
                // A transfer handed to the loop but not yet added completes when its turn comes (see `start`).
                live = [:]
                curl_share_cleanup(share)
            }
        }

        /// Forgets a transfer that completed; on the loop's thread.
        func forget(_ transfer: CurlTransfer) {
            live[ObjectIdentifier(transfer)] = nil
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

        package func cancel() {
            loop.perform { [transfer, loop] in
                // Not started yet: its start finds it cancelled.
                transfer.cancelled = true
                loop.remove(transfer, failingWith: URLError(.cancelled))
            }
        }
    }
#endif
