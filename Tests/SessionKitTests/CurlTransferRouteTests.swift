#if os(Linux)
    import Foundation
    import FoundationNetworking
    import SessionKitTesting
    import Testing

    @testable import SessionKit
    @testable import SessionKitOAuth

    /// A session's transfer route on the libcurl transport (uploads, downloads, byte streams), chosen per session so
    /// that it runs in every pass of `scripts/test`: bodies streamed both ways and never held whole, progress in
    /// order, the session's cookies, and the end's rules where libcurl differs from URLSession (its loop, not a
    /// delegate queue, delivers the chunks).
    @Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CurlTransferRouteTests {
        static func session(requestTimeout: Duration = .seconds(30)) -> UserSession {
            var configuration = UserSession.Configuration(requestTimeout: requestTimeout, retryPolicy: .never)
            configuration.transport = .libcurl
            return UserSession(
                account: CurlDataRouteTests.alice,
                tokens: TokenSet(accessToken: "token-alice", refreshToken: "refresh-alice", lifetime: .seconds(3600)),
                configuration: configuration)
        }

        static func request(_ server: LocalServer, _ path: String, method: String = "GET") -> URLRequest {
            var request = URLRequest(url: server.url(path))
            request.httpMethod = method
            return request
        }

        /// `count` bytes that are not one byte repeated, so that a lost or reordered chunk shows.
        static func pattern(_ count: Int) -> Data {
            Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        }

        @Test func theRouteIsLibcurlAndMakesNoTransferURLSession() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/f") { _ in .text("file") }
                let session = Self.session()
                defer { session.end() }
                _ = try await session.download(for: Self.request(server, "/f"))
                #expect(session.curl != nil)
                #expect(session.madeTransferSession == nil)
            }
        }

        /// An upload from memory arrives whole under its own method, with no form type libcurl would add to a body
        /// under a method other than POST; progress is told in order up to the whole size.
        @Test(arguments: ["PUT", "POST", "PATCH"])
        func anUploadFromDataArrivesWholeWithProgress(method: String) async throws {
            try await LocalServer.withRunning { server in
                server.route(method, "/up") { request in
                    .text("\(request.body.count) \(request.header("Content-Type") ?? "none")")
                }
                let session = Self.session()
                defer { session.end() }
                let body = Self.pattern(3_000_000)
                let sent = Lock<[Int64]>([])
                let (data, response) = try await session.upload(
                    for: Self.request(server, "/up", method: method), from: body
                ) { progress in
                    sent.withLock { $0.append(progress.completedBytes) }
                }
                #expect(response.statusCode == 200)
                let type = method == "POST" ? "application/x-www-form-urlencoded" : "none"
                #expect(text(data) == "3000000 \(type)")
                #expect(server.requests.first?.body == body)
                #expect(server.requests.first?.bearerToken == "token-alice")
                let reported = sent.withLock { $0 }
                #expect(reported.last == 3_000_000)
                #expect(reported == reported.sorted() && Set(reported).count == reported.count)
            }
        }

        /// An upload from a file is read as it leaves: the server gets the file's bytes, the request's own
        /// `Content-Type` is kept, and the last progress is the file's size.
        @Test func anUploadFromAFileArrivesWholeWithItsOwnType() async throws {
            try await TemporaryDirectory.with { root in
                try await LocalServer.withRunning { server in
                    server.route("PUT", "/video") { request in
                        .text("\(request.body.count) \(request.header("Content-Type") ?? "none")")
                    }
                    let body = Self.pattern(5_000_000)
                    let file = root.appendingPathComponent("video.bin")
                    try body.write(to: file)
                    let session = Self.session()
                    defer { session.end() }
                    var request = Self.request(server, "/video", method: "PUT")
                    request.setValue("video/mp4", forHTTPHeaderField: "Content-Type")
                    let last = Lock<UserSession.TransferProgress?>(nil)
                    let (data, _) = try await session.upload(for: request, fromFile: file) { progress in
                        last.withLock { $0 = progress }
                    }
                    #expect(text(data) == "5000000 video/mp4")
                    #expect(server.requests.first?.body == body)
                    let whole = UserSession.TransferProgress(completedBytes: 5_000_000, expectedBytes: 5_000_000)
                    #expect(last.withLock { $0 } == whole)
                }
            }
        }

        /// A download lands in a file, byte for byte, with progress from the head's zero to the whole size, and the
        /// cookies its answer sets are the session's.
        @Test func aDownloadLandsWholeWithProgressAndItsCookiesAreKept() async throws {
            let body = Self.pattern(4_000_000)
            try await LocalServer.withRunning { server in
                server.route("GET", "/report") { _ in
                    LocalServer.Response(headers: [("Set-Cookie", "seen=1; Path=/")], body: body)
                }
                server.route("GET", "/echo") { request in .text(request.header("Cookie") ?? "none") }
                let session = Self.session()
                defer { session.end() }
                let updates = Lock<[UserSession.TransferProgress]>([])
                let (file, response) = try await session.download(for: Self.request(server, "/report")) { progress in
                    updates.withLock { $0.append(progress) }
                }
                #expect(response.statusCode == 200)
                #expect(try Data(contentsOf: file) == body)
                let seen = updates.withLock { $0 }
                #expect(seen.first?.completedBytes == 0)
                #expect(seen.last == UserSession.TransferProgress(completedBytes: 4_000_000, expectedBytes: 4_000_000))
                #expect(seen.map(\.completedBytes) == seen.map(\.completedBytes).sorted())
                let (cookie, _) = try await session.data(for: Self.request(server, "/echo"))
                #expect(text(cookie) == "seen=1")
            }
        }

        /// A transfer whose bytes stop moving for the request timeout fails as `timedOut`, with no file left.
        @Test func aStalledDownloadTimesOutAtTheRequestTimeout() async throws {
            try await LocalServer.withRunning { server in
                let gate = CurlTransportTests.routeHeld(server, "/stalled")
                defer { gate.open() }
                let session = Self.session(requestTimeout: .seconds(1))
                defer { session.end() }
                let error = await #expect(throws: SessionError.self) {
                    try await session.download(for: Self.request(server, "/stalled"))
                }
                #expect(error?.code == .timedOut)
                let left = (try? FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path)) ?? []
                #expect(left.isEmpty)
            }
        }

        /// Holds the transport's loop inside a socket event (another client's transfer, whose chunk's callback
        /// blocks), not inside its inbox: once let go, the loop reads the sockets that became ready meanwhile before
        /// it drains the inbox, where a session's close waits. Returns what lets it go.
        static func holdLoopInASocketEvent(_ server: LocalServer) async throws -> @Sendable () -> Void {
            let go = Gate()
            server.route("GET", "/holder") { _ in
                await go.wait()
                return .text("h")
            }
            let client = CurlClient(proxies: .none)
            let holding = Gate()
            let held = DispatchSemaphore(value: 0)
            let transfer = try client.prepare(
                URLRequest(url: server.url("/holder")), deadlines: CurlDeadlines(whole: .seconds(60)))
            client.start(
                transfer,
                streaming: CurlStreamEvents(
                    head: { _ in },
                    data: { _ in
                        holding.open()
                        held.wait()
                    })
            ) { _ in }
            await go.waitForArrivals(1)
            go.open()
            await holding.wait()
            return {
                held.signal()
                client.close()
            }
        }

        /// Chunks the loop reads after `end()` and before the client's close reaches it are dropped: with the loop
        /// held, the trickling server's bytes wait in the socket, the session ends (its close waits behind them), and
        /// once the loop reads them no progress is told and no byte is written. Progress runs on the loop's thread,
        /// so what was told before the end is counted exactly.
        @Test func aDownloadTellsNothingAfterTheEnd() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/file") { _ in
                    LocalServer.Response(body: Data("e".utf8)).failing(with: .trickle(every: .milliseconds(1)))
                }
                let session = Self.session()
                let told = Lock(0)
                let started = Gate()
                let download = Task {
                    try await session.download(for: Self.request(server, "/file")) { _ in
                        told.withLock { $0 += 1 }
                        started.open()
                    }
                }
                await started.wait()
                let release = try await Self.holdLoopInASocketEvent(server)
                // The server goes on sending: its bytes wait in the socket for the held loop.
                try await Task.sleep(for: .milliseconds(200))
                session.end()
                let toldBeforeTheEnd = told.withLock { $0 }
                release()
                let error = await #expect(throws: SessionError.self) { try await download.value }
                #expect(error?.code == .sessionEnded)
                #expect(told.withLock { $0 } == toldBeforeTheEnd, "progress was told after the end")
                #expect(await transfersStop(in: session))
            }
        }

        /// The same for a byte stream: the bytes read after the end are dropped, so the consumer gets at most what
        /// was handed over before the loop was held (it reads on meanwhile), never the bytes that waited in the socket.
        @Test func aByteStreamYieldsNothingReadAfterTheEnd() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/events") { _ in
                    LocalServer.Response(body: Data("e".utf8)).failing(with: .trickle(every: .milliseconds(1)))
                }
                let session = Self.session()
                let (bytes, _) = try await session.bytes(for: Self.request(server, "/events"))
                let consumed = Lock(0)
                let consumer = Task {
                    do {
                        for try await _ in bytes { consumed.withLock { $0 += 1 } }
                    } catch let error as SessionError {
                        #expect(error.code == .sessionEnded)
                    }
                }
                let release = try await Self.holdLoopInASocketEvent(server)
                // The consumer drains what was handed over; the server's next bytes wait in the socket.
                try await Task.sleep(for: .milliseconds(200))
                let beforeTheEnd = consumed.withLock { $0 }
                session.end()
                release()
                try await consumer.value
                // About 200 bytes waited in the socket; a few handed over just before the hold may still arrive.
                let afterTheEnd = consumed.withLock { $0 } - beforeTheEnd
                #expect(afterTheEnd < 20, "\(afterTheEnd) bytes reached the consumer after the end")
                #expect(await transfersStop(in: session))
            }
        }

        /// Leaving a byte stream early cancels its transfer; the client keeps running nothing.
        @Test func leavingAByteStreamEarlyCancelsItsTransfer() async throws {
            try await LocalServer.withRunning { server in
                server.route("GET", "/events") { _ in
                    LocalServer.Response(body: Data("e".utf8)).failing(with: .trickle(every: .milliseconds(5)))
                }
                let session = Self.session()
                defer { session.end() }
                do {
                    let (bytes, _) = try await session.bytes(for: Self.request(server, "/events"))
                    for try await _ in bytes { break }
                }
                #expect(await transfersStop(in: session), "the transfer goes on after its consumer left")
            }
        }

        /// A write handed off runs to its end on the session's client after `end()` (which fails every other
        /// transfer of the client at once), carries the token it was started with, and ignores its caller's
        /// cancellation; the client then keeps nothing running.
        @Test func aHandedOffWriteOutlivesTheEndWhileEveryOtherTransferStops() async throws {
            try await LocalServer.withRunning { server in
                let gate = Gate()
                defer { gate.open() }
                server.route("POST", "/upload") { request in
                    await gate.wait()
                    return .text("stored \(request.bearerToken ?? "none")", status: 201)
                }
                let other = CurlTransportTests.routeHeld(server, "/other")
                defer { other.open() }
                let session = Self.session()
                let write = Task {
                    try await session.write(Self.request(server, "/upload", method: "POST"), policy: .handOff)
                }
                let read = Task { try await session.download(for: Self.request(server, "/other")) }
                await gate.waitForArrivals(1)
                await other.waitForArrivals(1)
                write.cancel()
                session.end()
                let ended = await #expect(throws: SessionError.self) { try await read.value }
                #expect(ended?.code == .sessionEnded)
                #expect(await session.curl?.running() == 1, "the handed-off write did not outlive the end")
                gate.open()
                let (data, response) = try await write.value
                #expect(response.statusCode == 201)
                #expect(text(data) == "stored token-alice")
                #expect(await transfersStop(in: session))
            }
        }

        /// A caller cancelled while its upload runs stops the transfer, and the session stays active.
        @Test func cancellingTheCallerStopsTheUploadAndKeepsTheSession() async throws {
            try await LocalServer.withRunning { server in
                let gate = Gate()
                defer { gate.open() }
                server.route("PUT", "/held") { _ in
                    await gate.wait()
                    return .text("late")
                }
                let session = Self.session()
                defer { session.end() }
                let upload = Task {
                    try await session.upload(for: Self.request(server, "/held", method: "PUT"), from: Data("x".utf8))
                }
                await gate.waitForArrivals(1)
                upload.cancel()
                await #expect(throws: (any Error).self) { try await upload.value }
                #expect(await transfersStop(in: session))
                #expect(session.isActive)
            }
        }
    }
#endif
