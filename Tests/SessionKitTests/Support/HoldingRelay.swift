import Foundation

@testable import SessionKitTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A loopback TCP relay that takes one client's request and holds it, then passes it to the server when told: what
/// the network does to a request the client wrote and the server reads later (a full queue, a slow link, a server busy
/// elsewhere). The client sees its bytes written as soon as the relay has them.
///
/// One connection, one request: it reads the head and as much body as `Content-Length` says, reports that it holds
/// them, waits for ``pass()``, then opens a connection to the upstream port, writes the bytes and reads the answer to
/// its end (discarding it: the client may have gone). Every wait is on a thread of its own.
final class HoldingRelay: @unchecked Sendable {
    /// The port clients connect to.
    let port: Int
    private let listener: Int32
    private let held = DispatchSemaphore(value: 0)
    private let released = DispatchSemaphore(value: 0)
    private let passed = DispatchSemaphore(value: 0)
    private let closedByClient = Locked(false)

    /// Whether the client closed its connection while the relay held its request (a cancelled transfer does).
    var clientClosed: Bool { closedByClient.withLock { $0 } }

    /// Starts listening on a free loopback port; the request it holds goes to `upstream` on 127.0.0.1.
    init(upstream: Int) throws {
        // The test servers' own listener, made blocking: the relay's one thread waits in `accept` and `read`.
        let (fd, port) = try Socket.makeLoopbackListener(backlog: 8)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        listener = fd
        self.port = port
        let (held, released, passed, closedByClient) = (held, released, passed, closedByClient)
        Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            defer { close(client) }
            let request = Self.readRequest(from: client)
            held.signal()
            // Watches for the client's close while holding (a bounded wait per look, not a sleep: the release ends it).
            while released.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
                if !closedByClient.withLock({ $0 }), Self.peerClosed(client) { closedByClient.withLock { $0 = true } }
            }
            if case .success(let server) = RawHTTPClient.open(port: upstream) {
                _ = RawHTTPClient.sendAll(server, request)
                _ = RawHTTPClient.readResponse(server)
                close(server)
            }
            passed.signal()
        }.start()
    }

    deinit {
        close(listener)
    }

    /// Whether a whole request arrived and is held, within `limit`.
    func holdsARequest(within limit: Duration) async -> Bool {
        await Self.onThread { [held] in held.wait(timeout: .now() + limit.timeInterval) == .success }
    }

    /// Lets the held request go to the server; returns once the server answered it (or could not be reached), or
    /// after `limit`.
    @discardableResult
    func pass(within limit: Duration = .seconds(10)) async -> Bool {
        released.signal()
        return await Self.onThread { [passed] in passed.wait(timeout: .now() + limit.timeInterval) == .success }
    }

    /// Reads a head and the body its `Content-Length` announces (or up to the peer's close).
    private static func readRequest(from fd: Int32) -> [UInt8] {
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { return bytes }
            bytes += buffer[0..<count]
            guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { continue }
            let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
            let length =
                head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            if bytes.count - end >= length { return bytes }
        }
    }

    /// Whether the peer closed its side: a read would return end of file now.
    private static func peerClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
    }

    private static func onThread(_ work: @escaping @Sendable () -> Bool) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }
}

extension Duration {
    fileprivate var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
