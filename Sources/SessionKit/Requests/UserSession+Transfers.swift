import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// How far a transfer has come: what ``upload(for:from:progress:)``, ``upload(for:fromFile:progress:)`` and
    /// ``download(for:progress:)`` report as bytes move.
    public struct TransferProgress: Sendable, Hashable {
        /// Bytes sent (an upload's request body) or received (a download's response body) so far in this attempt.
        public let completedBytes: Int64
        /// The total the transfer expects, when it is known (a `Content-Length`, a file's size).
        public let expectedBytes: Int64?

        /// The share done, from 0 to 1, when the total is known.
        public var fractionCompleted: Double? {
            guard let expectedBytes, expectedBytes > 0 else { return nil }
            return min(Double(completedBytes) / Double(expectedBytes), 1)
        }
    }

    /// Sends `request` with `body` as this session's account, streaming the body and reporting its progress.
    ///
    /// The same rules as ``data(for:)`` apply: the request carries this session's token, a 401 is recovered once
    /// and the upload replayed only when its method is idempotent or it carries an `Idempotency-Key`, transport
    /// failures and retryable statuses are retried under the same rule, ``end()`` cancels it and a call after
    /// `end()` is refused. The response is not cached.
    ///
    /// - Parameters:
    ///   - request: The request; its `Authorization` header is replaced, its `httpBody` ignored.
    ///   - body: The bytes to send.
    ///   - progress: Called with the bytes sent so far, in order, on a background queue; it must return quickly.
    ///     A replayed attempt starts again from zero.
    /// - Returns: The response's body (held in memory: upload answers are small) and the response.
    /// - Throws: What ``data(for:)`` throws.
    public func upload(
        for request: URLRequest,
        from body: Data,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> (Data, HTTPURLResponse) {
        try await upload(request, progress: progress, sending: .data(body))
    }

    /// Sends `request` with the contents of `file` as its body, read from disk as it is sent: a file of any size
    /// never sits in memory.
    ///
    /// The rules of ``upload(for:from:progress:)`` apply; a replayed attempt reads the file again.
    ///
    /// - Parameters:
    ///   - request: The request; its `Authorization` header is replaced, its `httpBody` ignored.
    ///   - file: A readable regular file.
    ///   - progress: Called with the bytes sent so far, in order, on a background queue.
    /// - Returns: The response's body and the response.
    /// - Throws: ``SessionError/Code/invalidInput`` when `file` is not a readable regular file; otherwise what
    ///   ``data(for:)`` throws.
    public func upload(
        for request: URLRequest,
        fromFile file: URL,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> (Data, HTTPURLResponse) {
        var isDirectory: ObjCBool = false
        guard file.isFileURL, FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory),
            !isDirectory.boolValue, FileManager.default.isReadableFile(atPath: file.path)
        else {
            throw SessionError(
                .invalidInput, "the upload's file is not a readable regular file: \(file.lastPathComponent)")
        }
        return try await upload(request, progress: progress, sending: .file(file))
    }

    /// An upload under ``sendAuthorized(_:attempt:discard:)``'s rules, its answer's body kept in memory.
    private func upload(
        _ request: URLRequest,
        progress: (@Sendable (TransferProgress) -> Void)?,
        sending source: TransferSource
    ) async throws -> (Data, HTTPURLResponse) {
        try await sendAuthorized(request) { outgoing in
            let received = TransferBody.memory()
            // A 303 (or a 301 or 302 answering a POST) is followed with a GET, which has no body to send.
            let sending = ["GET", "HEAD"].contains(HTTPMethod.of(outgoing)) ? .none : source
            let response = try await transfer(outgoing, into: received, progress: progress, sending: sending)
            return .answer(received.data, response)
        }
    }

    /// Downloads the response to `request` into a new file in this session's ``downloadsDirectory``, writing it as
    /// it arrives: the body is never assembled in memory.
    ///
    /// FoundationNetworking cannot pause a transfer, so chunks that arrive faster than the disk takes them wait in
    /// memory meanwhile. To bound that, a GET is fetched in ranges of
    /// ``Configuration/downloadSegmentBytes`` (16 MiB) when the server honours ranges: the first request asks for
    /// `Range: bytes=0-…` (with `Accept-Encoding: identity`, unless the request sets its own), and each next one
    /// for the following range with `If-Range` and the first answer's validator (a strong `ETag`, else
    /// `Last-Modified`), so parts of two versions are never joined: a server whose resource changed answers 200
    /// with the new version whole, and that is the download. A server that ignores ranges answers 200 to the first
    /// request, which is then the whole download; one that gives no validator (nor a complete length) is asked
    /// again for the whole body. The returned response of a download assembled from ranges is the first answer's,
    /// with status 200, `Content-Length` the whole size and no `Content-Range`. A request that sets `Range` or
    /// `If-Range` itself, or is not a GET, is sent as it is.
    ///
    /// The same rules as ``data(for:)`` apply, to each request: this session's token, one 401 recovery, replay of
    /// replayable requests only, cancelled by ``end()`` (the partial file is deleted) and refused after it.
    /// Whatever the status, the body is in the file; a 401 that was recovered, or a retried status, leaves no file
    /// behind.
    ///
    /// - Parameters:
    ///   - request: The request; its `Authorization` header is replaced.
    ///   - progress: Called with the bytes received so far, in order, on a background queue.
    /// - Returns: The file (yours to move or delete; it goes with the rest of the account's data at sign-out) and
    ///   the response.
    /// - Throws: What ``data(for:)`` throws, and ``SessionError/Code/storageFailure`` when the file cannot be
    ///   written.
    /// - Important: The file is in this session's directory, never in a folder another account can see: with a
    ///   ``SessionManager`` that has a data directory it is the account's own (purged at sign-out), otherwise a
    ///   private temporary directory that ``end()`` removes.
    public func download(
        for request: URLRequest,
        progress: (@Sendable (TransferProgress) -> Void)? = nil
    ) async throws -> (URL, HTTPURLResponse) {
        if let ranged = try await downloadInRanges(request, progress: progress) { return ranged }
        return try await downloadWhole(request, progress: progress)
    }

    /// Downloads the response to `request` with one request (and its retries), into a new file.
    func downloadWhole(
        _ request: URLRequest,
        progress: (@Sendable (TransferProgress) -> Void)?
    ) async throws -> (URL, HTTPURLResponse) {
        let pathExtension = request.url?.pathExtension ?? ""
        return try await sendAuthorized(request) { outgoing in
            let file = try TransferBody.file(in: self, extension: pathExtension)
            do {
                let response = try await transfer(outgoing, into: file, progress: progress, sending: .none)
                return .answer(try file.finish(), response)
            } catch {
                file.discard()
                throw error
            }
        } discard: { url in
            try? FileManager.default.removeItem(at: url)
        }
    }

    /// The directory ``download(for:progress:)`` writes into, created on first use (mode 0700).
    ///
    /// With a ``SessionManager`` that has a ``SessionManager/Configuration/dataDirectory``, it is the `downloads`
    /// folder in the account's own directory, purged with the rest of the account's data at sign-out. Otherwise it
    /// is a private temporary directory of this session, removed when the session ends.
    public var downloadsDirectory: URL {
        let temporary = FileManager.default.temporaryDirectory
            .appendingPathComponent("SessionKit-downloads-\(serial.rawValue)-\(UUID().uuidString)")
        guard case .directory(let directory) = lifetime(.downloads(temporary: temporary)) else { return temporary }
        return directory
    }

    /// Sets where downloads go: the account's directory, for a session a manager made.
    func useDownloadsDirectory(_ directory: URL?) {
        lifetime(.useDownloadsDirectory(directory))
    }
}
