import Foundation
import SessionKit

@testable import SessionKitTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(Glibc)
    private let streamSocketType = Int32(SOCK_STREAM.rawValue)
    private let sendFlags = Int32(MSG_NOSIGNAL)
    private let systemSend = Glibc.send
#else
    private let streamSocketType = SOCK_STREAM
    private let sendFlags: Int32 = 0
    private let systemSend = Darwin.send
#endif

/// A failure of the raw test client.
struct RawSocketError: Error, CustomStringConvertible {
    var operation: String
    var code: Int32

    var description: String { "\(operation): \(String(cString: strerror(code))) (errno \(code))" }
}

/// A response as the raw client read it off the wire.
struct RawResponse: Sendable {
    var statusLine: String
    var status: Int
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking TCP client for bytes no HTTP client would send. Every call blocks: call it from
/// ``onDedicatedThread(_:)``, never from a task directly.
///
/// Reads give up after 30 seconds so that a server bug fails the test instead of hanging it; no test relies on
/// that bound for its result.
final class RawConnection: Sendable {
    let descriptor: Int32
    private let pending = Lock<[UInt8]>([])

    /// Connects to 127.0.0.1:`port`.
    init(port: Int) throws {
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw RawSocketError(operation: "socket", code: errno) }
        #if canImport(Darwin)
            var noSignal: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &noSignal, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw RawSocketError(operation: "connect", code: code)
        }
        descriptor = fd
    }

    deinit {
        close(descriptor)
    }

    /// Sends all of `text` as UTF-8.
    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    /// Sends all of `bytes`.
    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                systemSend(descriptor, buffer.baseAddress! + sent, buffer.count - sent, sendFlags)
            }
            guard count > 0 else { throw RawSocketError(operation: "send", code: errno) }
            sent += count
        }
    }

    /// Reads one response (framed by `Content-Length`), or returns `nil` if the server closed first.
    ///
    /// - Parameter bodyless: Whether the response has no body whatever its headers say (a `HEAD` request).
    /// - Returns: The response, or `nil` at end of stream.
    /// - Throws: `RawSocketError` on a socket error or a malformed or truncated response.
    func readResponse(bodyless: Bool = false) throws -> RawResponse? {
        while true {
            if let response = try takeResponse(bodyless: bodyless) { return response }
            guard try receiveMore() else {
                guard pending.withLock(\.isEmpty) else {
                    throw RawSocketError(operation: "truncated response", code: 0)
                }
                return nil
            }
        }
    }

    /// Reads until the server closes; returns what came (after anything already buffered).
    func readToEnd() throws -> [UInt8] {
        while try receiveMore() {}
        return pending.withLock { pending in
            defer { pending = [] }
            return pending
        }
    }

    /// Whether the server has closed the connection: reads until end of stream (or a reset), failing if bytes come.
    func isClosedByServer() throws -> Bool {
        try readToEnd().isEmpty
    }

    /// Reads once; returns false at end of stream or on a reset.
    private func receiveMore() throws -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                pending.withLock { $0.append(contentsOf: buffer[..<count]) }
                return true
            }
            if count == 0 { return false }
            let code = errno
            if code == EINTR { continue }
            if code == ECONNRESET { return false }
            throw RawSocketError(operation: "recv", code: code)
        }
    }

    private func takeResponse(bodyless: Bool) throws -> RawResponse? {
        try pending.withLock { pending -> RawResponse? in
            let terminator: [UInt8] = Array("\r\n\r\n".utf8)
            guard let headEnd = pending.firstRange(of: terminator) else { return nil }
            let headText = String(decoding: pending[..<headEnd.lowerBound], as: UTF8.self)
            var lines = headText.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst()
            let statusParts = statusLine.split(separator: " ")
            guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
                throw RawSocketError(operation: "malformed status line: \(statusLine)", code: 0)
            }
            let headers = lines.compactMap { line -> (name: String, value: String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let length =
                bodyless || status == 204 || status == 304 || status < 200
                ? 0
                : Int(headers.first { $0.name.lowercased() == "content-length" }?.value ?? "0") ?? 0
            let bodyStart = headEnd.upperBound
            guard pending.count - bodyStart >= length else { return nil }
            let body = Array(pending[bodyStart..<bodyStart + length])
            pending.removeSubrange(..<(bodyStart + length))
            return RawResponse(statusLine: statusLine, status: status, headers: headers, body: body)
        }
    }
}

/// A GET request as a raw client writes it.
func rawGET(_ path: String, headers: [String] = []) -> String {
    "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers.map { "\($0)\r\n" }.joined() + "\r\n"
}
