import Foundation
import SessionKitOAuth

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension Diagnostics {
    /// A sink that appends each event to the file at `url` as one JSON line (``DiagnosticEvent/jsonLine``) ending in
    /// a newline: what `sessionkit timeline` reads.
    ///
    /// The file is created (mode `0600`: events name accounts) or appended to, never truncated, so several
    /// processes, or several launches, can share one file: each line is written with one `write(2)` to a file
    /// opened for appending, so lines of different processes do not interleave. ``flush()`` — which
    /// ``SessionManager/finishPendingWork(within:)`` calls last — returns once every event emitted before it is
    /// written and synced to the disk.
    ///
    /// ```swift
    /// sessions.diagnostics = try .file(at: URL(fileURLWithPath: "events.jsonl"))
    /// ```
    ///
    /// - Parameters:
    ///   - url: A file URL: an existing regular file, or a new file in an existing directory.
    ///   - level: The lowest level kept.
    /// - Returns: The sink.
    /// - Throws: ``SessionError`` `invalidInput` when `url` is not a file URL, names something that is not a regular
    ///   file (a directory, a pipe), or cannot be opened for writing (a missing directory, no permission).
    public static func file(at url: URL, level: DiagnosticEvent.Level = .info) throws(SessionError) -> Diagnostics {
        let file = try DiagnosticFile(url)
        return Diagnostics(level: level, handler: { file.append($0.jsonLine) }, onFlush: { file.sync() })
    }
}

/// The file a ``Diagnostics/file(at:level:)`` sink appends to; closed when the sink is released.
final class DiagnosticFile: Sendable {
    private let descriptor: Int32

    init(_ url: URL) throws(SessionError) {
        guard url.isFileURL else {
            throw SessionError(.invalidInput, "a diagnostics file must be a file URL")
        }
        // Non-blocking, so that a pipe with no reader fails at once instead of hanging the caller; refused below.
        let flags = O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK
        let descriptor: Int32
        do {
            descriptor = try POSIXFile.open(url.path, flags, mode: 0o600)
        } catch {
            throw SessionError(.invalidInput, "the diagnostics file cannot be opened for writing: \(error.reason)")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            _ = close(descriptor)
            throw SessionError(.invalidInput, "the diagnostics file is not a regular file")
        }
        self.descriptor = descriptor
    }

    deinit { _ = close(descriptor) }

    /// Appends `line` and a newline in one write. A line the system refuses (a full disk, an I/O error) is dropped:
    /// a log must not stop or slow the work it tells of, and nothing reads a count of lost lines.
    func append(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        bytes.withUnsafeBytes { buffer in try? POSIXFile.writeAll(descriptor, buffer) }
    }

    /// Asks the system to put what was written on the disk.
    func sync() {
        _ = fsync(descriptor)
    }
}
