#if os(Linux)
    import CSessionKitCurl
    import Foundation
    import Glibc

    /// The one thread per process that drives every libcurl transfer: a `curl_multi` handle moved by an epoll loop
    /// through libcurl's socket and timer callbacks.
    ///
    /// The rules, and why:
    /// - Every call into the multi handle, its easy handles and the share handles runs on this thread: libcurl's
    ///   handles may be used by one thread at a time, and one owner needs no lock around them. Other threads hand
    ///   work over with ``perform(_:)``, through a pipe that is both the queue and the loop's wake-up: each item is
    ///   one pointer, written atomically (it is under `PIPE_BUF`), so no lock is taken on either side.
    /// - The loop sleeps in `epoll_wait` until a socket is ready or the nearest timer is due (libcurl's own, or a
    ///   transfer's first-byte deadline). It never polls: a transfer waiting on a silent server costs no CPU, which
    ///   FoundationNetworking's loop did not hold.
    /// - A transfer's completion runs on this thread, after its handle has left the multi handle: it must not block.
    final class CurlEventLoop: @unchecked Sendable {
        /// The process's loop, started on first use and never stopped.
        static let shared = CurlEventLoop()

        private let epoll: Int32
        /// The inbox: read end (non-blocking, watched by epoll) and write end.
        private let inbox: (read: Int32, write: Int32)
        let multi: UnsafeMutableRawPointer

        // Owned by the loop thread.
        private var watched = Set<Int32>()
        private var curlTimer: UInt64?
        private var transfers = [UnsafeMutableRawPointer: CurlTransfer]()
        private var earliestFirstByte: UInt64?

        private init() {
            guard curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK, let multi = curl_multi_init() else {
                fatalError("libcurl could not be initialised")
            }
            self.multi = multi
            epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
            var ends: [Int32] = [-1, -1]
            let piped = pipe(&ends)
            precondition(epoll >= 0 && piped == 0, "the transport's event loop could not be created")
            inbox = (ends[0], ends[1])
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            _ = fcntl(inbox.read, F_SETFL, fcntl(inbox.read, F_GETFL) | O_NONBLOCK)
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.fd = inbox.read
            epoll_ctl(epoll, EPOLL_CTL_ADD, inbox.read, &event)

            let me = Unmanaged.passUnretained(self).toOpaque()
            sk_curl_multi_setopt_socket_callback(multi) { _, socket, what, loop, _ in
                guard let loop else { return -1 }
                Unmanaged<CurlEventLoop>.fromOpaque(loop).takeUnretainedValue().watch(socket, what)
                return 0
            }
            sk_curl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
            sk_curl_multi_setopt_timer_callback(multi) { _, milliseconds, loop in
                guard let loop else { return -1 }
                Unmanaged<CurlEventLoop>.fromOpaque(loop).takeUnretainedValue().setTimer(milliseconds)
                return 0
            }
            sk_curl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)

            let thread = Thread { [self] in run() }
            thread.name = "SessionKit.CurlEventLoop"
            thread.start()
        }

        /// Runs `work` on the loop's thread, after everything handed over before it; `work` must not block.
        func perform(_ work: @escaping @Sendable () -> Void) {
            var item = Unmanaged.passRetained(Work(work)).toOpaque()
            let size = MemoryLayout<UnsafeMutableRawPointer>.size
            // The write end blocks: a full pipe (thousands of items the loop has not read yet) makes the caller wait
            // for the loop, never drops an item.
            while withUnsafeBytes(of: &item, { write(inbox.write, $0.baseAddress, size) }) != size {
                precondition(errno == EINTR, "the transport's event loop inbox failed: \(errno)")
            }
        }

        /// What ``perform(_:)`` hands over.
        private final class Work {
            let run: @Sendable () -> Void
            init(_ run: @escaping @Sendable () -> Void) { self.run = run }
        }

        // MARK: - On the loop's thread

        /// Adds `transfer` to the multi handle; a transfer libcurl refuses completes with its error at once.
        func add(_ transfer: CurlTransfer) {
            let code = curl_multi_add_handle(multi, transfer.easy)
            guard code == CURLM_OK else {
                transfer.finish(with: URLError(.unknown), loop: self)
                return
            }
            transfers[transfer.easy] = transfer
            if let deadline = transfer.firstByteDeadline {
                earliestFirstByte = min(earliestFirstByte ?? deadline, deadline)
            }
        }

        /// Takes `transfer` out of the multi handle, if it is still in it, and completes it with `error`.
        ///
        /// The transfer is found by identity, not by its easy handle's address alone: once a transfer completes, its
        /// handle is freed, and the next `curl_easy_init` often returns the same address. A cancellation that arrives
        /// after its transfer completed (a caller cancelled a moment too late) would otherwise take out the newer
        /// transfer at that address, which then never completes: its caller would wait forever.
        func remove(_ transfer: CurlTransfer, failingWith error: URLError) {
            guard transfers[transfer.easy] === transfer else { return }
            transfers[transfer.easy] = nil
            curl_multi_remove_handle(multi, transfer.easy)
            transfer.finish(with: error, loop: self)
        }

        private func watch(_ socket: curl_socket_t, _ what: Int32) {
            if what == CURL_POLL_REMOVE {
                if watched.remove(socket) != nil { epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil) }
                return
            }
            var event = epoll_event()
            if what == CURL_POLL_IN || what == CURL_POLL_INOUT { event.events |= EPOLLIN.rawValue }
            if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { event.events |= EPOLLOUT.rawValue }
            event.data.fd = socket
            if watched.insert(socket).inserted {
                epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event)
            } else {
                epoll_ctl(epoll, EPOLL_CTL_MOD, socket, &event)
            }
        }

        private func setTimer(_ milliseconds: Int) {
            curlTimer = milliseconds < 0 ? nil : Self.now() + UInt64(milliseconds) * 1_000_000
        }

        private func run() {
            var events = [epoll_event](repeating: epoll_event(), count: 64)
            while true {
                let ready = epoll_wait(epoll, &events, Int32(events.count), timeout())
                if ready < 0 {
                    guard errno == EINTR else { fatalError("epoll_wait failed: \(errno)") }
                    continue
                }
                for index in 0..<Int(ready) {
                    let fd = events[index].data.fd
                    if fd == inbox.read {
                        drainInbox()
                        continue
                    }
                    let flags = events[index].events
                    var mask: Int32 = 0
                    if flags & EPOLLIN.rawValue != 0 { mask |= CURL_CSELECT_IN }
                    if flags & EPOLLOUT.rawValue != 0 { mask |= CURL_CSELECT_OUT }
                    if flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { mask |= CURL_CSELECT_ERR }
                    var running: Int32 = 0
                    curl_multi_socket_action(multi, fd, mask, &running)
                }
                let now = Self.now()
                if let due = curlTimer, due <= now {
                    curlTimer = nil
                    var running: Int32 = 0
                    curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
                }
                if let due = earliestFirstByte, due <= now { enforceFirstByteDeadlines(now: now) }
                collectFinished()
            }
        }

        /// Runs every item in the inbox, in order.
        private func drainInbox() {
            var items = [UnsafeMutableRawPointer?](repeating: nil, count: 256)
            let size = MemoryLayout<UnsafeMutableRawPointer>.size
            while true {
                let count = items.withUnsafeMutableBytes { read(inbox.read, $0.baseAddress, $0.count) }
                // Each write is one whole pointer and a pipe never splits a write under PIPE_BUF: whole pointers.
                guard count > 0 else { return }
                for index in 0..<(count / size) {
                    guard let item = items[index] else { continue }
                    Unmanaged<Work>.fromOpaque(item).takeRetainedValue().run()
                }
            }
        }

        /// Milliseconds until the nearest timer, -1 for none: rounded up, so the loop never wakes early and spins.
        private func timeout() -> Int32 {
            guard let due = [curlTimer, earliestFirstByte].compactMap({ $0 }).min() else { return -1 }
            let now = Self.now()
            guard due > now else { return 0 }
            return Int32(min((due - now + 999_999) / 1_000_000, UInt64(Int32.max)))
        }

        private func enforceFirstByteDeadlines(now: UInt64) {
            earliestFirstByte = nil
            for transfer in Array(transfers.values) {
                guard let deadline = transfer.firstByteDeadline, !transfer.answered else { continue }
                if deadline <= now {
                    remove(transfer, failingWith: URLError(.timedOut))
                } else {
                    earliestFirstByte = min(earliestFirstByte ?? deadline, deadline)
                }
            }
        }

        private func collectFinished() {
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let result = sk_curl_msg_result(message)
                guard let transfer = transfers.removeValue(forKey: easy) else { continue }
                curl_multi_remove_handle(multi, easy)
                transfer.finish(with: result == CURLE_OK ? nil : CurlFailure.urlError(for: result), loop: self)
            }
        }

        /// What the loop holds, for a test that waited too long to say why: the sockets watched, libcurl's timer, and
        /// each transfer's origin and path (never its query, which may carry a secret), how long libcurl has run it,
        /// whether its answer began, its connection's local port and the bytes moved; on the loop's thread.
        func report() -> String {
            let now = Self.now()
            var lines = [
                "curl loop: \(transfers.count) transfers, watched sockets \(watched.sorted()), "
                    + "timer \(curlTimer.map { "in \(Int64($0) - Int64(now)) ns" } ?? "none")"
            ]
            for transfer in transfers.values {
                var port = 0
                var (sent, received, elapsed): (curl_off_t, curl_off_t, curl_off_t) = (0, 0, 0)
                _ = sk_curl_easy_getinfo_long(transfer.easy, CURLINFO_LOCAL_PORT, &port)
                _ = sk_curl_easy_getinfo_offset(transfer.easy, CURLINFO_SIZE_UPLOAD_T, &sent)
                _ = sk_curl_easy_getinfo_offset(transfer.easy, CURLINFO_SIZE_DOWNLOAD_T, &received)
                _ = sk_curl_easy_getinfo_offset(transfer.easy, CURLINFO_TOTAL_TIME_T, &elapsed)
                let origin = Origin(transfer.url)?.description ?? "?"
                lines.append(
                    "  \(origin)\(transfer.url.path): \(elapsed / 1000) ms in libcurl, answered \(transfer.answered), cancelled "
                        + "\(transfer.cancelled), local port \(port), bytes sent \(sent), received \(received)")
            }
            return lines.joined(separator: "\n")
        }

        /// The monotonic clock in nanoseconds.
        static func now() -> UInt64 {
            var time = timespec()
            clock_gettime(CLOCK_MONOTONIC, &time)
            return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
        }
    }
#endif
