#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A socket call that failed, with the `errno` it left.
struct SocketError: Error, CustomStringConvertible {
    /// The system call that failed.
    var operation: String
    /// The `errno` value after the call.
    var code: Int32

    var description: String { "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))" }
}

/// The outcome of one non-blocking read or write.
enum SocketIO: Equatable {
    /// This many bytes moved (always more than zero).
    case transferred(Int)
    /// The call would have blocked: nothing moved.
    case wouldBlock
    /// The peer closed its side: a read returned zero.
    case endOfStream
    /// The call failed with this `errno` (a reset or a closed peer among them).
    case failed(Int32)
}

/// The outcome of one non-blocking `accept`.
enum SocketAccept {
    /// A new connection, already non-blocking, close-on-exec, no-delay and SIGPIPE-free.
    case accepted(Int32)
    /// No connection is waiting.
    case wouldBlock
    /// `accept` failed with this `errno` (out of descriptors among them).
    case failed(Int32)
}

/// A thin wrapper over the BSD socket calls LocalServer needs, for Glibc and Darwin.
///
/// Every descriptor it makes is close-on-exec (a subprocess must not inherit the server's sockets) and
/// non-blocking (the server's one I/O thread must never wait on a single peer).
enum Socket {
    /// Opens a TCP listener on 127.0.0.1 with a port the system picks.
    ///
    /// - Parameter backlog: How many connections may wait to be accepted.
    /// - Returns: The listening descriptor and the port it is bound to.
    /// - Throws: `SocketError` when a call fails; nothing is left open then.
    static func makeLoopbackListener(backlog: Int32) throws(SocketError) -> (descriptor: Int32, port: Int) {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw SocketError(operation: "socket", code: errno) }
        do throws(SocketError) {
            #if canImport(Darwin)
                try setCloseOnExec(fd)
            #endif
            try setOption(fd, level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
            var address = loopbackAddress(port: 0)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw SocketError(operation: "bind", code: errno) }
            guard listen(fd, backlog) == 0 else { throw SocketError(operation: "listen", code: errno) }
            try setNonBlocking(fd)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw SocketError(operation: "getsockname", code: errno) }
            return (fd, Int(UInt16(bigEndian: address.sin_port)))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one waiting connection and configures it for the server.
    ///
    /// - Parameter listener: A non-blocking listening descriptor.
    /// - Returns: The connection, or why there is none.
    static func accept(from listener: Int32) -> SocketAccept {
        while true {
            // accept4 would save two calls, but Glibc's module map hides it (_GNU_SOURCE); connections are few
            // and long-lived, so the fcntl calls below cost nothing measurable.
            #if canImport(Glibc)
                let fd = Glibc.accept(listener, nil, nil)
            #else
                let fd = Darwin.accept(listener, nil, nil)
            #endif
            if fd < 0 {
                let code = errno
                if code == EINTR || code == ECONNABORTED { continue }
                return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
            }
            do throws(SocketError) {
                try setCloseOnExec(fd)
                try setNonBlocking(fd)
                #if canImport(Darwin)
                    // Darwin has no MSG_NOSIGNAL: a write to a closed peer would raise SIGPIPE without this.
                    try setOption(fd, level: SOL_SOCKET, name: SO_NOSIGPIPE, value: 1)
                #endif
                // Without it, a response written in two segments waits for the peer's delayed ACK (~40 ms).
                try setOption(fd, level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: 1)
            } catch {
                close(fd)
                return .failed(error.code)
            }
            return .accepted(fd)
        }
    }

    /// Reads what is available without blocking.
    ///
    /// - Parameters:
    ///   - descriptor: A non-blocking socket.
    ///   - buffer: Where the bytes go.
    /// - Returns: How many bytes arrived, or why none did.
    static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> SocketIO {
        while true {
            let count = recv(descriptor, buffer.baseAddress, buffer.count, 0)
            if count > 0 { return .transferred(count) }
            if count == 0 { return .endOfStream }
            let code = errno
            if code == EINTR { continue }
            return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
        }
    }

    /// Writes what the socket accepts without blocking, never raising SIGPIPE.
    ///
    /// - Parameters:
    ///   - descriptor: A non-blocking socket.
    ///   - bytes: What to send.
    /// - Returns: How many bytes were taken, or why none were.
    static func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> SocketIO {
        guard !bytes.isEmpty else { return .transferred(0) }
        #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)
        #else
            let flags: Int32 = 0
        #endif
        while true {
            let count = send(descriptor, bytes.baseAddress, bytes.count, flags)
            if count >= 0 { return .transferred(count) }
            let code = errno
            if code == EINTR { continue }
            return code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
        }
    }

    /// Ends the sending side: the peer reads end-of-stream once what was sent has arrived.
    ///
    /// - Parameter descriptor: A connected socket.
    static func shutdownWriting(_ descriptor: Int32) {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Closes a descriptor.
    ///
    /// - Parameter descriptor: A descriptor this process owns; it must not be used again.
    static func close(_ descriptor: Int32) {
        #if canImport(Glibc)
            _ = Glibc.close(descriptor)
        #else
            _ = Darwin.close(descriptor)
        #endif
    }

    /// Makes a non-blocking, close-on-exec pipe used to wake the I/O thread out of `poll`.
    ///
    /// - Returns: The reading and writing ends.
    /// - Throws: `SocketError` when the pipe cannot be made.
    static func makeWakePipe() throws(SocketError) -> (reading: Int32, writing: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SocketError(operation: "pipe", code: errno) }
        do throws(SocketError) {
            for end in ends {
                try setCloseOnExec(end)
                try setNonBlocking(end)
            }
        } catch {
            ends.forEach(close)
            throw error
        }
        return (ends[0], ends[1])
    }

    /// Writes one byte to a wake pipe; a full pipe already guarantees a wake-up, so that failure is ignored.
    ///
    /// - Parameter descriptor: The writing end of a wake pipe.
    static func signal(_ descriptor: Int32) {
        var byte: UInt8 = 1
        #if canImport(Glibc)
            _ = Glibc.write(descriptor, &byte, 1)
        #else
            _ = Darwin.write(descriptor, &byte, 1)
        #endif
    }

    /// Empties a wake pipe.
    ///
    /// - Parameter descriptor: The reading end of a wake pipe.
    static func drain(_ descriptor: Int32) {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let size = MemoryLayout.size(ofValue: bytes)
        while true {
            #if canImport(Glibc)
                let count = Glibc.read(descriptor, &bytes, size)
            #else
                let count = Darwin.read(descriptor, &bytes, size)
            #endif
            if count < size && !(count < 0 && errno == EINTR) { return }
        }
    }

    /// Waits for events on descriptors.
    ///
    /// - Parameters:
    ///   - descriptors: What to watch; `revents` is filled in.
    ///   - timeoutMilliseconds: How long to wait at most; -1 waits indefinitely.
    /// - Returns: How many descriptors have events, 0 on timeout, or -1 with `errno` set.
    static func poll(_ descriptors: inout [pollfd], timeoutMilliseconds: Int32) -> Int32 {
        #if canImport(Glibc)
            Glibc.poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds)
        #else
            Darwin.poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds)
        #endif
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    private static func setOption(_ fd: Int32, level: Int32, name: Int32, value: Int32) throws(SocketError) {
        var value = value
        guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw SocketError(operation: "setsockopt", code: errno)
        }
    }

    private static func setNonBlocking(_ fd: Int32) throws(SocketError) {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw SocketError(operation: "fcntl(O_NONBLOCK)", code: errno)
        }
    }

    private static func setCloseOnExec(_ fd: Int32) throws(SocketError) {
        guard fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
            throw SocketError(operation: "fcntl(FD_CLOEXEC)", code: errno)
        }
    }
}
