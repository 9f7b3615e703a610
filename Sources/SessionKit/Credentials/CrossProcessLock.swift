import Foundation
import SessionKitOAuth

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An advisory lock on a file that makes a token refresh single-flight across the processes sharing one credential
/// store: an app and its extensions, several copies of a command-line tool, a server's workers.
///
/// A session whose store names a lock (``CredentialStore/refreshLock``) holds it only around "re-read the stored
/// record, refresh if it still needs it, store the result". A process that waited finds the tokens another process
/// stored meanwhile and uses them instead of presenting the refresh token that process already rotated. Sign-out's
/// deletion of the record takes the lock too, so a refresh in another process never writes a signed-out account's
/// record back.
///
/// The lock is `flock(2)` on the file, opened with `O_CLOEXEC` (a child process inherits nothing): the kernel drops
/// it when its holder exits or is killed, so a dead holder never blocks the others. The wait polls without blocking
/// any thread and is bounded by ``timeout``.
///
/// - Important: Every process must name the same file, on a local file system (`flock` over NFS is not reliable).
///   The file holds nothing and is never deleted: deleting it while processes run would let two of them lock two
///   different files. Refreshes of different accounts in one store share the lock; each holds it for one token
///   request.
public struct CrossProcessLock: StoreCoordination, Hashable {
    /// The lock file; created with mode `0600` when missing, and its directory must exist.
    public let file: URL
    /// The longest a refresh waits for the lock before failing with `refreshTimedOut` (the session stays signed in
    /// and the next request tries again); sign-out's deletion waits as long, then deletes anyway.
    public let timeout: Duration

    /// Names a lock file.
    ///
    /// - Parameters:
    ///   - file: The file every process sharing the store names, such as `<credentials directory>/.refresh.lock`,
    ///     or a file in the app group container on Apple platforms.
    ///   - timeout: The bound on a wait for the lock; 30 seconds by default (a holder holds it for one token
    ///     request, whose own deadline is 30 seconds by default).
    public init(file: URL, timeout: Duration = .seconds(30)) {
        self.file = file.standardizedFileURL
        self.timeout = timeout
    }

    /// The lock, held: releasing it closes the descriptor, which drops the lock.
    final class Held: Sendable {
        private let descriptor: Int32

        fileprivate init(descriptor: Int32) {
            self.descriptor = descriptor
        }

        /// Releases the lock. Call it exactly once.
        func release() {
            _ = flock(descriptor, LOCK_UN)
            _ = close(descriptor)
        }
    }

    /// Waits for the lock, at most ``timeout``.
    ///
    /// Every attempt is a non-blocking `flock`; between attempts the task sleeps (250 µs at first, doubling to
    /// 10 ms), so no thread blocks however long another process holds the lock.
    ///
    /// - Returns: The held lock; release it.
    /// - Throws: ``SessionError`` `refreshTimedOut` when ``timeout`` passed, `storageFailure` when the file cannot
    ///   be opened or locked (a missing directory, a directory or symbolic link in its place); `CancellationError`
    ///   when the waiting task was cancelled.
    func acquire() async throws -> Held {
        let path = file.path
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var pause = Duration.microseconds(250)
        while true {
            if let held = try Self.tryLock(path) { return held }
            let now = ContinuousClock.now
            guard now < deadline else {
                throw SessionError(
                    .refreshTimedOut, "another process has held the refresh lock \(path) for more than \(timeout)")
            }
            try await Task.sleep(for: min(pause, deadline - now))
            pause = min(pause * 2, .milliseconds(10))
        }
    }

    /// One attempt: the held lock, or `nil` when another open file description holds it.
    static func tryLock(_ path: String) throws(SessionError) -> Held? {
        while true {
            let descriptor: Int32
            do {
                descriptor = try POSIXFile.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o600)
            } catch {
                throw SessionError(.storageFailure, "cannot open the refresh lock \(path): \(error.reason)")
            }
            var locked = flock(descriptor, LOCK_EX | LOCK_NB)
            while locked != 0 && errno == EINTR { locked = flock(descriptor, LOCK_EX | LOCK_NB) }
            if locked != 0 {
                let failure = POSIXFile.Failure(errorNumber: errno)
                _ = close(descriptor)
                if failure.errorNumber == EWOULDBLOCK { return nil }
                throw SessionError(.storageFailure, "cannot lock the refresh lock \(path): \(failure.reason)")
            }
            // Locked the file that is at the path now, not one that was replaced after it was opened.
            var opened = stat()
            var current = stat()
            if fstat(descriptor, &opened) == 0, stat(path, &current) == 0, opened.st_dev == current.st_dev,
                opened.st_ino == current.st_ino
            {
                return Held(descriptor: descriptor)
            }
            _ = close(descriptor)
        }
    }
}
