import Foundation
import SessionKitTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// LocalServer byte by byte, through a raw TCP client: framing, connection handling and bad input.
@Suite(.timeLimit(.minutes(10))) struct LocalServerWireTests {
    private static let echo: LocalServer.Handler = { request in
        .text("\(request.method) \(request.path) #\(request.connectionID) \(request.bodyText)")
    }

    @Test func keepsTheConnectionAliveBetweenRequests() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            let responses = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send(rawGET("/1"))
                let first = try connection.readResponse()
                try connection.send(rawGET("/2"))
                return [first, try connection.readResponse()]
            }
            #expect(responses.map { $0?.status } == [200, 200])
            #expect(responses.map { $0?.header("Connection") } == [nil, nil])
            let ids = server.requests.map(\.connectionID)
            #expect(ids.count == 2 && ids[0] == ids[1])
        }
    }

    @Test func recordsHeadersInTheOrderSent() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            _ = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send(rawGET("/h", headers: ["Z-Last: 1", "A-First: 2", "z-last: 3"]))
                return try connection.readResponse()?.status
            }
            let request = try #require(server.requests.first)
            #expect(request.headers.map(\.name) == ["Host", "Z-Last", "A-First", "z-last"])
            #expect(request.header("Z-LAST") == "1" && request.headers(named: "z-last") == ["1", "3"])
        }
    }

    @Test func answersPipelinedRequestsInOrder() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            // The first answer is the slowest: out-of-order answers would show.
            server.route("/1") { request in await Self.echo(request).delayed(by: .milliseconds(20)) }
            let bodies = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                let post = "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody"
                try connection.send(rawGET("/1") + post + rawGET("/3"))
                return try (0..<3).map { _ in try connection.readResponse()?.bodyText }
            }
            #expect(bodies == ["GET /1 #1 ", "POST /2 #1 body", "GET /3 #1 "])
        }
    }

    @Test func closesAfterTheResponseForHTTP10() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            let (response, closed) = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send("GET /old HTTP/1.0\r\n\r\n")
                return (try connection.readResponse(), try connection.isClosedByServer())
            }
            #expect(response?.status == 200 && response?.header("Connection") == "close")
            #expect(server.requests.first?.version == "HTTP/1.0")
            #expect(closed)
        }
    }

    @Test func respectsConnectionClose() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            let (response, closed) = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send(rawGET("/bye", headers: ["Connection: close"]))
                return (try connection.readResponse(), try connection.isClosedByServer())
            }
            #expect(response?.status == 200 && response?.header("Connection") == "close")
            #expect(closed)
        }
    }

    @Test func headIsAnsweredWithLengthButWithoutBody() async throws {
        let hello: LocalServer.Handler = { _ in .text("hello") }
        try await LocalServer.withRunning(handler: hello) { server async throws in
            let (head, next) = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n")
                let head = try connection.readResponse(bodyless: true)
                // Had the server sent a body, it would be read here in place of the next status line.
                try connection.send(rawGET("/"))
                return (head, try connection.readResponse())
            }
            #expect(head?.status == 200 && head?.header("Content-Length") == "5" && head?.body == [])
            #expect(next?.status == 200 && next?.bodyText == "hello")
        }
    }

    @Test func decodesChunkedUploads() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            let response = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send("POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n")
                try connection.send("5;ext=1\r\nworld\r\n0\r\nX-Checksum: abc\r\n\r\n")
                return try connection.readResponse()
            }
            #expect(response?.bodyText == "POST /c #1 hello world")
            #expect(server.requests.first?.bodyText == "hello world")
        }
    }

    @Test func sendsContinueBeforeTheBody() async throws {
        try await LocalServer.withRunning(handler: Self.echo) { server async throws in
            let (interim, final) = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send("PUT /u HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
                let interim = try connection.readResponse()
                try connection.send("abc")
                return (interim, try connection.readResponse())
            }
            #expect(interim?.status == 100)
            #expect(final?.bodyText == "PUT /u #1 abc")
        }
    }

    // MARK: - Bad input: an error status, the connection closed, other connections untouched

    struct BadInputCase: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: String
        var status: Int
        var testDescription: String { name }
    }

    static let badInput: [BadInputCase] = [
        BadInputCase(name: "malformed request line", bytes: "GET / HTTP/1.1 now\r\nHost: h\r\n\r\n", status: 400),
        BadInputCase(name: "not HTTP at all", bytes: "\u{16}\u{3}\u{1}\u{2}\u{0}\u{1}\r\n\r\n", status: 400),
        BadInputCase(
            name: "malformed header", bytes: "GET / HTTP/1.1\r\nHost: h\r\nNo colon here\r\n\r\n", status: 400),
        BadInputCase(
            name: "header over the limit",
            bytes: "GET / HTTP/1.1\r\nHost: h\r\nX-Big: \(String(repeating: "b", count: 2000))\r\n\r\n", status: 431),
        BadInputCase(
            name: "head that never ends", bytes: "GET / HTTP/1.1\r\n" + String(repeating: "X-A: a\r\n", count: 300),
            status: 431),
        BadInputCase(
            name: "body over the limit", bytes: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1025\r\n\r\n",
            status: 413),
        BadInputCase(
            name: "chunked body over the limit",
            bytes: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n401\r\n", status: 413),
    ]

    @Test(arguments: badInput)
    func badInputIsRefusedAndTheConnectionClosed(_ input: BadInputCase) async throws {
        let configuration = LocalServer.Configuration(maximumHeaderBytes: 1024, maximumBodyBytes: 1024)
        try await LocalServer.withRunning(configuration: configuration, handler: Self.echo) { server async throws in
            let (response, closed, bystander) = try await onDedicatedThread {
                // A connection opened (and used) before the bad one, and used again after it.
                let bystander = try RawConnection(port: server.port)
                try bystander.send(rawGET("/before"))
                _ = try bystander.readResponse()
                let connection = try RawConnection(port: server.port)
                try connection.send(input.bytes)
                let response = try connection.readResponse()
                let closed = try connection.isClosedByServer()
                try bystander.send(rawGET("/after"))
                return (response, closed, try bystander.readResponse())
            }
            #expect(response?.status == input.status)
            #expect(response?.header("Connection") == "close")
            #expect(closed)
            #expect(bystander?.bodyText == "GET /after #1 ")
            #expect(server.requests.map(\.path) == ["/before", "/after"])
        }
    }

    @Test(arguments: ["GET /stalled HTTP/1.1\r\nHo", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n12345"])
    func stalledRequestIsTimedOut(partial: String) async throws {
        let configuration = LocalServer.Configuration(requestTimeout: .milliseconds(100))
        try await LocalServer.withRunning(configuration: configuration, handler: Self.echo) { server async throws in
            let (response, closed, bystander) = try await onDedicatedThread {
                let bystander = try RawConnection(port: server.port)
                let connection = try RawConnection(port: server.port)
                try connection.send(partial)
                let response = try connection.readResponse()
                let closed = try connection.isClosedByServer()
                try bystander.send(rawGET("/after"))
                return (response, closed, try bystander.readResponse())
            }
            #expect(response?.status == 408)
            #expect(closed)
            #expect(bystander?.status == 200)
            #expect(server.requests.map(\.path) == ["/after"])
        }
    }

    @Test func idleKeptAliveConnectionIsClosed() async throws {
        let configuration = LocalServer.Configuration(idleTimeout: .milliseconds(100))
        try await LocalServer.withRunning(configuration: configuration, handler: Self.echo) { server async throws in
            let (response, rest) = try await onDedicatedThread {
                let connection = try RawConnection(port: server.port)
                try connection.send(rawGET("/once"))
                return (try connection.readResponse(), try connection.readToEnd())
            }
            #expect(response?.status == 200)
            #expect(rest.isEmpty)
        }
    }

    @Test func servesAThousandConnectionsWithRequestsInFlightAtOnce() async throws {
        let count = 1000
        raiseDescriptorLimit(toAtLeast: 4 * count)
        // No handler answers before every request has arrived: all are in flight at once.
        let arrivals = Arrivals(target: count)
        let handler: LocalServer.Handler = { request in
            arrivals.arrive()
            try? await arrivals.reached.wait()
            return .text(request.path)
        }
        try await LocalServer.withRunning(handler: handler) { server async throws in
            let connections = try await onDedicatedThread {
                try (0..<count).map { index in
                    let connection = try RawConnection(port: server.port)
                    try connection.send(rawGET("/\(index)"))
                    return connection
                }
            }
            try await arrivals.reached.wait()
            let bodies = try await onDedicatedThread { try connections.map { try $0.readResponse()?.bodyText } }

            #expect(bodies == (0..<count).map { "/\($0)" })
            #expect(Set(server.requests.map(\.connectionID)).count == count)
        }
    }
}

/// Raises the soft limit on open descriptors (a thousand connections need two thousand in one process).
func raiseDescriptorLimit(toAtLeast wanted: Int) {
    var limit = rlimit()
    #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
        let resource = RLIMIT_NOFILE
    #endif
    guard getrlimit(resource, &limit) == 0, limit.rlim_cur < rlim_t(wanted) else { return }
    limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
    setrlimit(resource, &limit)
}
