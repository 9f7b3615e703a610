import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A browser reduced to raw sockets, for tests that must send what no HTTP client sends (a malformed request line,
/// an oversize head, nothing at all) to a server on loopback, and see exactly what comes back.
///
/// Every call blocks on a Dispatch thread, never on the cooperative pool, and every wait is bounded.
enum RawHTTPClient {
    /// What the server sent before it closed.
    struct Response: Sendable {
        /// The status code, or 0 when nothing parseable came back.
        let status: Int
        /// The header fields, names lower-cased.
        let headers: [String: String]
        /// The body.
        let body: String
        /// Whether the server closed the connection (end of stream) within the bound.
        let closed: Bool
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Connects to `address:port`.
    ///
    /// - Returns: The connected descriptor, or the `errno` of a failed `connect` (`ECONNREFUSED` when nothing
    ///   listens).
    static func open(port: Int, address: String = "127.0.0.1") -> Result<Int32, Failure> {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return .failure(Failure(description: "socket: errno \(errno)")) }
        #if canImport(Darwin)
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, address, &socketAddress.sin_addr)
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            return .failure(Failure(description: code == ECONNREFUSED ? "refused" : "connect: errno \(code)"))
        }
        return .success(fd)
    }

    /// Whether a connection to `port` is refused: nothing listens there.
    static func isRefused(port: Int, address: String = "127.0.0.1") -> Bool {
        switch open(port: port, address: address) {
        case .success(let fd):
            close(fd)
            return false
        case .failure(let failure):
            return failure.description == "refused"
        }
    }

    /// Sends all of `bytes`; `false` when the peer went away.
    @discardableResult
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)
        #else
            let flags: Int32 = 0
        #endif
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + sent, bytes.count - sent, flags)
            }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// Reads until the server closes, or `limit` passes.
    static func readResponse(_ fd: Int32, within limit: Duration = .seconds(10)) -> Response {
        let deadline = ContinuousClock.now.advanced(by: limit)
        var bytes: [UInt8] = []
        var closed = false
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while ContinuousClock.now < deadline {
            let remaining = ContinuousClock.now.duration(to: deadline)
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, remaining.components.seconds * 1000 + 1))
            guard poll(&descriptor, 1, min(milliseconds, 1000)) >= 0 else { break }
            guard descriptor.revents != 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 {
                closed = true
                break
            }
            bytes += buffer[..<count]
        }
        return parse(bytes, closed: closed)
    }

    /// Connects, sends `request`, and reads the answer until the server closes.
    static func exchange(port: Int, _ request: String) async throws -> Response {
        try await exchange(port: port, Array(request.utf8))
    }

    /// Connects, sends `request`, and reads the answer until the server closes.
    static func exchange(port: Int, _ request: [UInt8]) async throws -> Response {
        try await blocking {
            let fd = try open(port: port).get()
            defer { close(fd) }
            sendAll(fd, request)
            return readResponse(fd)
        }
    }

    /// A `GET` of `target` as a browser sends it.
    static func get(_ target: String, port: Int) -> String {
        "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUser-Agent: SessionKitTests\r\nAccept: text/html\r\n\r\n"
    }

    /// Runs blocking work on a Dispatch thread.
    static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// How many descriptors this process has open (Linux: `/proc/self/fd`; `nil` elsewhere).
    static func openDescriptorCount() -> Int? {
        try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    private static func parse(_ bytes: [UInt8], closed: Bool) -> Response {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else {
            return Response(status: 0, headers: [:], body: text, closed: closed)
        }
        let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        return Response(status: status, headers: headers, body: String(text[end.upperBound...]), closed: closed)
    }
}
