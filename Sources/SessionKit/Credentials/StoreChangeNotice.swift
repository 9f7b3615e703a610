import Foundation
import SessionKitOAuth

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The change notice between processes sharing a credential store. A process that deletes an account's record (a
// sign-out, a switch that signs the others out, a rejected grant) rewrites one small file beside the store's refresh
// lock; every other process watches that file and, when it changes, asks the store whether each account it has a
// live session of still has a record. The file says only that something changed: what changed is read from the
// store itself, so a notice can neither sign anyone out on its own nor carry anything secret.
//
// Linux watches the lock's directory with inotify, so a notice reaches a sleeping watcher thread within the
// kernel's wake-up time and costs nothing while nothing changes. Apple platforms watch the file itself with a
// kqueue vnode source (DispatchSource): the file sits in the app group container that the app and its extensions
// already share for the lock, so no name has to be agreed on besides the lock's, and no entitlement is needed.
// Darwin's notify_post would wake the others as fast, but it names a notification in a global namespace that any
// process can post to; a file in the group container can be written only by the group.

extension CrossProcessLock {
    /// The lock is one file for every account of the store: a refresh of one account waits for another's.
    ///
    /// - Parameter account: Not used.
    /// - Returns: The held lock.
    /// - Throws: ``SessionError`` `refreshTimedOut` after ``timeout``, `storageFailure` when the file cannot be
    ///   opened or locked; `CancellationError`.
    public func lock(for account: Account) async throws -> HeldStoreLock {
        let held = try await acquire()
        return HeldStoreLock { held.release() }
    }

    /// Rewrites the notice file beside the lock; the file names no account, so every process checks every
    /// live session.
    ///
    /// - Parameter account: Not written.
    public func announceChange(of account: Account) async {
        announceChange()
    }

    /// Watches the notice file (inotify on Linux, a kqueue vnode source on Apple platforms).
    ///
    /// - Parameter onChange: Called on the watcher's thread after each notice, for every account.
    /// - Returns: The watch, or `nil` when the lock's directory cannot be watched.
    public func watchChanges(_ onChange: @escaping @Sendable (StoreChange) -> Void) -> (any StoreChangeWatch)? {
        StoreChangeWatcher(lock: self) {
            onChange(StoreChange(scope: .everyAccount, fromThisProcess: noticeIsOwn()))
        }
    }

    /// The file whose change tells the other processes to check their sessions: `<lock file>-changes`, beside the
    /// lock.
    package var noticeFile: URL {
        file.deletingLastPathComponent().appendingPathComponent(file.lastPathComponent + "-changes")
    }

    /// Tells every process watching this lock that records may have been deleted: rewrites ``noticeFile`` with
    /// this process's ``noticeSender`` and the time. A notice that cannot be written is lost: the other processes
    /// then learn of the deletion at their next refresh, which finds the record gone.
    package func announceChange() {
        let path = noticeFile.path
        guard let descriptor = try? POSIXFile.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
        else { return }
        var bytes = Array("\(Self.noticeSender) \(DispatchTime.now().uptimeNanoseconds)\n".utf8)
        _ = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
        _ = close(descriptor)
    }

    /// Who this process signs its notices as: a random number drawn once per process, not the process identifier,
    /// which two processes in different PID namespaces sharing a store can both have.
    package static let noticeSender = String(UInt64.random(in: 1...UInt64.max), radix: 16)

    /// Whether the notice in ``noticeFile`` now was written by this process; `false` when it cannot be read.
    ///
    /// Only for the story told (``DiagnosticEvent/Kind/crossProcessNotice``'s `from`): a notice read after another
    /// one overwrote it names the later sender, and nothing is decided on it; every notice is checked against the
    /// store whoever sent it.
    package func noticeIsOwn() -> Bool {
        guard let descriptor = try? POSIXFile.open(noticeFile.path, O_RDONLY | O_NOFOLLOW) else { return false }
        defer { _ = close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return false }
        return buffer[..<count].split(separator: UInt8(ascii: " ")).first.map { Array($0) }
            == Array(Self.noticeSender.utf8)
    }
}

/// Watches a ``CrossProcessLock``'s notice file and calls a handler when another process (or this one) announces a
/// change. The handler runs on the watcher's thread: it must only start work, not do it.
package final class StoreChangeWatcher: StoreChangeWatch {
    #if canImport(Glibc) || canImport(Musl)
        /// The write end of the pipe whose byte stops the thread; the thread owns and closes everything else.
        private let stopWrite: Int32
    #elseif canImport(Darwin)
        private let source: any DispatchSourceFileSystemObject
    #endif
    private let stopped = Lock(false)

    /// Starts watching; `nil` when the platform cannot watch the lock's directory (it is missing, or the
    /// process has no inotify descriptors left): the processes then learn of deletions at their next refresh.
    ///
    /// - Parameters:
    ///   - lock: The lock whose ``CrossProcessLock/noticeFile`` to watch.
    ///   - onChange: Called on the watcher's thread after each notice.
    package init?(lock: CrossProcessLock, onChange: @escaping @Sendable () -> Void) {
        let name = lock.noticeFile.lastPathComponent
        #if canImport(Glibc) || canImport(Musl)
            let descriptor = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
            guard descriptor >= 0 else { return nil }
            // Closing the file after writing it, or renaming one onto it: how a notice arrives.
            let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO)
            var fds: [Int32] = [0, 0]
            guard inotify_add_watch(descriptor, lock.file.deletingLastPathComponent().path, mask) >= 0,
                pipe(&fds) == 0
            else {
                _ = close(descriptor)
                return nil
            }
            // Not inherited by a child the app starts.
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            self.stopWrite = fds[1]
            let stopRead = fds[0]
            let thread = Thread {
                Self.run(inotify: descriptor, stop: stopRead, name: name, onChange: onChange)
            }
            thread.name = "SessionKit.StoreChangeWatcher"
            thread.start()
        #elseif canImport(Darwin)
            let path = lock.noticeFile.path
            guard let descriptor = try? POSIXFile.open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_EVTONLY, mode: 0o600)
            else { return nil }
            let source = DispatchSource.makeFileSystemObjectSource(
                fileDescriptor: descriptor, eventMask: [.write, .extend], queue: .global(qos: .utility))
            source.setEventHandler(handler: onChange)
            source.setCancelHandler { _ = close(descriptor) }
            source.resume()
            self.source = source
            _ = name
        #else
            return nil
        #endif
    }

    deinit { stop() }

    /// Stops watching; the handler is not called after the watcher's thread sees this. Idempotent.
    package func stop() {
        guard
            stopped.withLock({ stopped in
                defer { stopped = true }
                return !stopped
            })
        else { return }
        #if canImport(Glibc) || canImport(Musl)
            var byte: UInt8 = 0
            _ = write(stopWrite, &byte, 1)
            _ = close(stopWrite)
        #elseif canImport(Darwin)
            source.cancel()
        #endif
    }

    #if canImport(Glibc) || canImport(Musl)
        /// The watcher's thread: sleeps in `poll` until inotify has events or the stop pipe is written; calls
        /// `onChange` once per batch of events that names the notice file (or overflowed), then closes both
        /// descriptors when stopped.
        private static func run(inotify: Int32, stop: Int32, name: String, onChange: @Sendable () -> Void) {
            defer {
                _ = close(inotify)
                _ = close(stop)
            }
            let wanted = Array(name.utf8)
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                var fds = [
                    pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: stop, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&fds, 2, -1)
                if ready < 0 {
                    if errno == EINTR { continue }
                    return
                }
                if fds[1].revents != 0 { return }
                guard fds[0].revents != 0 else { continue }
                var changed = false
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    changed = changed || Self.names(wanted, in: buffer[..<count])
                }
                if changed { onChange() }
            }
        }

        /// Whether a batch of inotify events names `wanted`, or says events were dropped (a full queue).
        static func names(_ wanted: [UInt8], in events: ArraySlice<UInt8>) -> Bool {
            let header = MemoryLayout<inotify_event>.size
            var offset = events.startIndex
            while events.endIndex - offset >= header {
                let mask = events.withUnsafeBytes {
                    $0.loadUnaligned(fromByteOffset: offset - events.startIndex + 4, as: UInt32.self)
                }
                let length = Int(
                    events.withUnsafeBytes {
                        $0.loadUnaligned(fromByteOffset: offset - events.startIndex + 12, as: UInt32.self)
                    })
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { return true }
                let nameStart = offset + header
                guard nameStart + length <= events.endIndex else { return false }
                // The name is padded with NULs to `length`.
                let nameBytes = events[nameStart..<(nameStart + length)].prefix { $0 != 0 }
                if nameBytes.elementsEqual(wanted) { return true }
                offset = nameStart + length
            }
            return false
        }
    #endif
}
