#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The BSD socket calls ``LoopbackRedirectListener`` needs, for Glibc and Darwin.
///
/// Every descriptor made here is close-on-exec (a browser or helper the app launches must not inherit the
/// listener) and non-blocking (the listener's thread must never wait on one peer); accepted connections never
/// raise `SIGPIPE` and send without Nagle's delay.
package enum LoopbackSocket {
    /// A failed system call and the `errno` it left.
    package struct Failure: Error {
        /// The call that failed.
        package var operation: String
        /// `errno` after the call.
        package var code: Int32

        /// A `SessionError` for it; `errno` text only, nothing a peer sent.
        package func sessionError(_ context: String) -> SessionError {
            SessionError(
                .networkUnavailable,
                "\(context): \(operation) failed: \(String(cString: strerror(code))) (errno \(code))")
        }
    }

    /// The outcome of one non-blocking read, write or accept.
    package enum IO: Equatable {
        /// This many bytes moved, or (for accept) this descriptor arrived.
        case done(Int)
        /// The call would have blocked.
        case wouldBlock
        /// A read returned zero: the peer closed its side.
        case endOfStream
        /// The call failed with this `errno`.
        case failed(Int32)
    }

    /// Opens a TCP listener on 127.0.0.1 (the IPv4 loopback literal, RFC 8252 §7.3 and §8.3) on a port the system
    /// picks. No `SO_REUSEADDR`: the port is fresh, and nothing else may bind it while the listener holds it.
    ///
    /// - Parameter backlog: How many connections may wait to be accepted.
    /// - Returns: The listening descriptor and its port.
    /// - Throws: ``Failure``; nothing is left open then.
    package static func makeListener(backlog: Int32) throws(Failure) -> (descriptor: Int32, port: Int) {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw Failure(operation: "socket", code: errno) }
        do throws(Failure) {
            try configure(fd)
            var address = sockaddr_in()
            #if canImport(Darwin)
                address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
            #endif
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw Failure(operation: "bind", code: errno) }
            guard listen(fd, backlog) == 0 else { throw Failure(operation: "listen", code: errno) }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw Failure(operation: "getsockname", code: errno) }
            return (fd, Int(UInt16(bigEndian: address.sin_port)))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one waiting connection, configured as the type describes.
    ///
    /// - Parameter listener: A non-blocking listening descriptor.
    /// - Returns: `.done(descriptor)`, `.wouldBlock`, or `.failed(errno)` (out of descriptors among them).
    package static func accept(_ listener: Int32) -> IO {
        while true {
            // accept4 would set the flags atomically, but Glibc's module map hides it (_GNU_SOURCE).
            let fd = systemAccept(listener, nil, nil)
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
            }
            do throws(Failure) {
                try configure(fd)
                #if canImport(Darwin)
                    // Darwin has no MSG_NOSIGNAL: a write to a closed peer would raise SIGPIPE without this.
                    try setOption(fd, SOL_SOCKET, SO_NOSIGPIPE)
                #endif
                // The answer is one write, but the peer's delayed ACK must never hold a second segment back.
                try setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY)
            } catch {
                close(fd)
                return .failed(error.code)
            }
            return .done(Int(fd))
        }
    }

    /// Reads what is available without blocking.
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> IO {
        while true {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 { return .done(count) }
            if count == 0 { return .endOfStream }
            let code = errno
            if code == EINTR { continue }
            return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
        }
    }

    /// Writes what the socket takes without blocking, never raising `SIGPIPE`.
    package static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> IO {
        guard !bytes.isEmpty else { return .done(0) }
        #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)
        #else
            let flags: Int32 = 0
        #endif
        while true {
            let count = send(fd, bytes.baseAddress, bytes.count, flags)
            if count >= 0 { return .done(count) }
            let code = errno
            if code == EINTR { continue }
            return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
        }
    }

    /// Ends the sending side: the peer reads end-of-stream after the answer.
    package static func shutdownWriting(_ fd: Int32) {
        _ = shutdown(fd, Int32(SHUT_WR))
    }

    /// Closes a descriptor this process owns.
    package static func close(_ fd: Int32) {
        #if canImport(Glibc)
            _ = Glibc.close(fd)
        #else
            _ = Darwin.close(fd)
        #endif
    }

    /// A non-blocking, close-on-exec pipe whose writing end wakes the listener's thread out of `poll`.
    package static func makeWakePipe() throws(Failure) -> (reading: Int32, writing: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw Failure(operation: "pipe", code: errno) }
        do throws(Failure) {
            for end in ends { try configure(end) }
        } catch {
            ends.forEach(close)
            throw error
        }
        return (ends[0], ends[1])
    }

    /// Writes one byte to a wake pipe; a full pipe already guarantees the wake-up.
    package static func signal(_ fd: Int32) {
        var byte: UInt8 = 1
        #if canImport(Glibc)
            _ = Glibc.write(fd, &byte, 1)
        #else
            _ = Darwin.write(fd, &byte, 1)
        #endif
    }

    /// Waits for events on `descriptors` for at most `milliseconds` (`revents` filled in).
    ///
    /// - Returns: How many descriptors have events, 0 on timeout, or -1 with `errno` set.
    package static func poll(_ descriptors: inout [pollfd], milliseconds: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.poll(&descriptors, nfds_t(descriptors.count), milliseconds)
        #else
            Darwin.poll(&descriptors, nfds_t(descriptors.count), milliseconds)
        #endif
    }

    /// Close-on-exec and non-blocking.
    private static func configure(_ fd: Int32) throws(Failure) {
        guard fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else { throw Failure(operation: "fcntl(FD_CLOEXEC)", code: errno) }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw Failure(operation: "fcntl(O_NONBLOCK)", code: errno)
        }
    }

    private static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32) throws(Failure) {
        var value: Int32 = 1
        guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw Failure(operation: "setsockopt", code: errno)
        }
    }

    private static func systemAccept(
        _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?
    ) -> Int32 {
        #if canImport(Glibc)
            Glibc.accept(fd, address, length)
        #else
            Darwin.accept(fd, address, length)
        #endif
    }
}
