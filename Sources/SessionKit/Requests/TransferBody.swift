import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where a transfer's response body goes: memory (an upload's answer) or a file (a download), and the first
/// failure to store it.
final class TransferBody: Sendable {
    private struct State {
        var data = Data()
        var written: Int64 = 0
        var expected: Int64?
        var failure: SessionError?
        /// Set by ``rewind(to:)``: the body is assembled from ranges, a 206 continuing it where it stands.
        var assemblesRanges = false
        /// The current answer of a ranged download is neither a range nor a whole body: it is kept in `data`.
        var holdsAnswer = false
        /// The response head of the current attempt, once it arrived.
        var response: HTTPURLResponse?
    }

    private let state = Lock(State())
    private let handle: FileHandle?
    /// The file, for a download.
    let url: URL?

    private init(handle: FileHandle?, url: URL?) {
        self.handle = handle
        self.url = url
    }

    /// A body kept in memory.
    static func memory() -> TransferBody { TransferBody(handle: nil, url: nil) }

    /// A body written to a new file in `session`'s downloads directory.
    ///
    /// - Throws: `sessionEnded` when the session has ended (no file is created after that), `storageFailure` when
    ///   the file cannot be created.
    static func file(in session: UserSession, extension pathExtension: String) throws -> TransferBody {
        let directory = session.downloadsDirectory
        let name = UUID().uuidString + (pathExtension.isEmpty ? "" : ".\(pathExtension)")
        let url = directory.appendingPathComponent(name)
        // Created under the lifetime lock while the session is active, so that once `end()` has returned (and a
        // sign-out purges the directory after it) no download creates a folder or a file of the account again.
        let handle = try session.lifetime(.isActive) { active -> FileHandle in
            guard active.flag else { throw SessionError.ended }
            do {
                try FileManager.default.createDirectory(
                    at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                guard
                    FileManager.default.createFile(
                        atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
                else { throw CocoaError(.fileWriteUnknown) }
                return try FileHandle(forWritingTo: url)
            } catch {
                throw SessionError(.storageFailure, "the download's file could not be created in \(directory.path)")
            }
        }
        return TransferBody(handle: handle, url: url)
    }

    /// The state as it is now, read in one step (its `Data` is shared, not copied).
    private var current: State { state.withLock { $0 } }
    /// What the body holds, for a body kept in memory.
    var data: Data { current.data }
    /// The total announced by the response, if any.
    var expected: Int64? { current.expected }
    /// Why the body could not be stored, if it could not.
    var failure: SessionError? { current.failure }
    /// The response head of the current attempt, once it arrived (``begin(_:)``).
    var response: HTTPURLResponse? { current.response }

    /// The bytes stored so far (for a ranged download, from the start of the file).
    var written: Int64 { current.written }

    /// The response head arrived. For a download assembled from ranges, a 206 goes on where the file stands, a
    /// 200 is the whole body and replaces what the file holds, and any other answer (a 401 or a 503 that may be
    /// retried, an error that may end the download) is held aside in memory until ``keepHeldAnswer()`` or the next
    /// ``rewind(to:)``, so the ranges already stored are not lost to it.
    func begin(_ response: HTTPURLResponse) {
        state.withLock { state in
            state.response = response
            let length = response.expectedContentLength
            state.expected = length >= 0 ? length : nil
            guard state.assemblesRanges else { return }
            switch response.statusCode {
            case 206:
                state.expected = ContentRange(response)?.completeLength
            case 200..<300:
                truncate(&state, to: 0)
            default:
                state.holdsAnswer = true
                state.data = Data()
            }
        }
    }

    /// Makes the file end at `offset`, where the next range is written, and forgets an answer held aside.
    ///
    /// - Throws: `storageFailure` when the file cannot be truncated.
    func rewind(to offset: Int64) throws {
        try state.withLock { state in
            state.assemblesRanges = true
            state.holdsAnswer = false
            state.response = nil
            state.data = Data()
            if state.written != offset { truncate(&state, to: offset) }
            if let failure = state.failure { throw failure }
        }
    }

    /// Makes the answer held aside the file's whole content: it ends the download.
    ///
    /// - Throws: `storageFailure` when the file cannot be written.
    func keepHeldAnswer() throws {
        try state.withLock { state in
            guard state.holdsAnswer, let handle else { return }
            truncate(&state, to: 0)
            do {
                try handle.write(contentsOf: state.data)
                state.written = Int64(state.data.count)
            } catch {
                state.failure = SessionError(.storageFailure, "the download could not be written to disk")
            }
            state.holdsAnswer = false
            state.data = Data()
            if let failure = state.failure { throw failure }
        }
    }

    private func truncate(_ state: inout State, to offset: Int64) {
        guard let handle else { return }
        do {
            try handle.truncate(atOffset: UInt64(offset))
            state.written = offset
        } catch {
            state.failure = SessionError(.storageFailure, "the download could not be written to disk")
        }
    }

    /// Stores a chunk.
    ///
    /// - Returns: The bytes stored so far, or `nil` when storing failed (the transfer must be cancelled).
    func append(_ chunk: Data) -> Int64? {
        state.withLock { state -> Int64? in
            guard state.failure == nil else { return nil }
            if state.holdsAnswer {
                state.data.append(chunk)
                return Int64(state.data.count)
            }
            if let handle {
                do {
                    try handle.write(contentsOf: chunk)
                } catch {
                    state.failure = SessionError(.storageFailure, "the download could not be written to disk")
                    return nil
                }
            } else {
                state.data.append(chunk)
            }
            state.written += Int64(chunk.count)
            return state.written
        }
    }

    /// Closes the file of a finished download.
    ///
    /// - Returns: The file.
    func finish() throws -> URL {
        try handle?.close()
        guard let url else { throw SessionError(.storageFailure, "no file") }
        return url
    }

    /// Closes and deletes the file of a download that will not be handed over.
    func discard() {
        try? handle?.close()
        if let url { try? FileManager.default.removeItem(at: url) }
    }
}
