import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Uploads, downloads and byte streams go through their session like `data(for:)`: each carries this session's
/// token, recovers a 401 under the same replay rules, is cancelled by `end()` and refused after it, and a download
/// lands in its own account's directory only.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct TransferTests {
    /// A session whose refresh hands out `token-<user>-<n>`.
    private static func refreshingSession(
        _ user: String, endpoint: ScriptedTokenEndpoint? = nil, downloadSegmentBytes: Int = 16 << 20
    ) -> (UserSession, ScriptedTokenEndpoint) {
        let endpoint =
            endpoint ?? ScriptedTokenEndpoint { _, n in TokenSet(accessToken: "token-\(user)-\(n + 1)", lifetime: nil) }
        let session = UserSession(
            account: Account(issuer: issuer, subject: user),
            tokens: tokens(user),
            configuration: UserSession.Configuration(retryPolicy: .never, downloadSegmentBytes: downloadSegmentBytes),
            tokenEndpoint: endpoint
        )
        return (session, endpoint)
    }

    private static func put(_ server: LocalServer, _ path: String) -> URLRequest {
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "PUT"
        return request
    }

    /// A body of `count` bytes that is not one byte repeated, so that a lost or reordered chunk shows.
    private static func pattern(_ count: Int) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
    }

    // MARK: - Token carried

    @Test func anUploadFromDataCarriesTheSessionsTokenAndItsBodyAndReportsProgress() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("PUT", "/photo") { request in .json(#"{"n":\#(request.body.count)}"#) }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            let body = Self.pattern(300_000)
            let sent = Lock<[Int64]>([])
            let (data, response) = try await session.upload(for: Self.put(server, "/photo"), from: body) { progress in
                sent.withLock { $0.append(progress.completedBytes) }
            }
            #expect(response.statusCode == 200)
            #expect(text(data) == #"{"n":300000}"#)
            #expect(server.requests.map(\.bearerToken) == ["token-alice"])
            #expect(server.requests.first?.body == body)
            let reported = sent.withLock { $0 }
            #expect(reported.last == 300_000)
            #expect(reported == reported.sorted())
        }
    }

    @Test func anUploadFromAFileCarriesTheSessionsTokenAndTheFilesBytes() async throws {
        try await TemporaryDirectory.with { directory in
            try await LocalServer.withRunning { server async throws in
                server.route("PUT", "/video") { request in .json(#"{"n":\#(request.body.count)}"#) }
                let file = directory.appendingPathComponent("video.bin")
                let body = Self.pattern(1_000_000)
                try body.write(to: file)
                let session = UserSession(account: alice, tokens: tokens("alice"))
                defer { session.end() }
                let progress = Lock<UserSession.TransferProgress?>(nil)
                let (data, _) = try await session.upload(for: Self.put(server, "/video"), fromFile: file) { update in
                    progress.withLock { $0 = update }
                }
                #expect(text(data) == #"{"n":1000000}"#)
                #expect(server.requests.map(\.bearerToken) == ["token-alice"])
                #expect(server.requests.first?.body == body)
                #expect(progress.withLock { $0 }?.fractionCompleted == 1)
            }
        }
    }

    @Test func anUploadFromAFileThatIsNotThereIsRefusedWithATypedError() async throws {
        let session = UserSession(account: alice, tokens: tokens("alice"))
        defer { session.end() }
        var request = URLRequest(url: URL(string: "http://127.0.0.1:9/")!)
        request.httpMethod = "PUT"
        for file in [URL(fileURLWithPath: "/nonexistent/sessionkit"), URL(fileURLWithPath: "/")] {
            let error = await #expect(throws: SessionError.self) {
                try await session.upload(for: request, fromFile: file)
            }
            #expect(error?.code == .invalidInput)
        }
    }

    @Test func aDownloadCarriesTheSessionsTokenAndLandsInTheSessionsDirectory() async throws {
        let body = Self.pattern(2_000_000)
        try await LocalServer.withRunning { server async throws in
            server.route("/files/report.pdf") { request in
                request.bearerToken == "token-alice" ? LocalServer.Response(body: body) : .status(403)
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            let updates = Lock<[UserSession.TransferProgress]>([])
            let (file, response) = try await session.download(for: get(server, "/files/report.pdf")) { progress in
                updates.withLock { $0.append(progress) }
            }
            #expect(response.statusCode == 200)
            #expect(try Data(contentsOf: file) == body)
            #expect(file.pathExtension == "pdf")
            #expect(file.path == session.downloadsDirectory.appendingPathComponent(file.lastPathComponent).path)
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let reported = updates.withLock { $0 }
            #expect(reported.last == UserSession.TransferProgress(completedBytes: 2_000_000, expectedBytes: 2_000_000))

            // A session without a manager downloads into a private directory that its end removes.
            session.end()
            #expect(!FileManager.default.fileExists(atPath: session.downloadsDirectory.path))
        }
    }

    @Test func aByteStreamCarriesTheSessionsTokenAndDeliversTheWholeBodyInOrder() async throws {
        let body = Self.pattern(500_000)
        try await LocalServer.withRunning { server async throws in
            server.route("/feed") { request in
                request.bearerToken == "token-alice" ? LocalServer.Response(body: body) : .status(403)
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            let (bytes, response) = try await session.bytes(for: get(server, "/feed"))
            #expect(response.statusCode == 200)
            var received = Data()
            for try await byte in bytes { received.append(byte) }
            #expect(received == body)
        }
    }

    // MARK: - 401 recovered

    @Test func eachKindRecoversA401WithOneRefreshAndReplays() async throws {
        try await TemporaryDirectory.with { directory in
            try await LocalServer.withRunning { server async throws in
                server.route("/r") { request in
                    request.bearerToken == "token-alice" ? .status(401) : .text("ok \(request.bearerToken ?? "")")
                }
                let file = directory.appendingPathComponent("f")
                try Data("file".utf8).write(to: file)
                typealias Kind = @Sendable (UserSession) async throws -> String
                let kinds: [(String, Kind)] = [
                    ("upload data", { try await text($0.upload(for: Self.put(server, "/r"), from: Data("x".utf8)).0) }),
                    ("upload file", { try await text($0.upload(for: Self.put(server, "/r"), fromFile: file).0) }),
                    ("download", { try await text(Data(contentsOf: $0.download(for: get(server, "/r")).0)) }),
                    // The same through a session that downloads in one request (no ranges).
                    (
                        "download in one request",
                        { try await text(Data(contentsOf: $0.download(for: get(server, "/r")).0)) }
                    ),
                    (
                        "bytes",
                        { session in
                            var received = Data()
                            for try await byte in try await session.bytes(for: get(server, "/r")).0 {
                                received.append(byte)
                            }
                            return text(received)
                        }
                    ),
                ]
                for (name, kind) in kinds {
                    let isDownload = name.hasPrefix("download")
                    let (session, endpoint) = Self.refreshingSession(
                        "alice", downloadSegmentBytes: name == "download in one request" ? 0 : 16 << 20)
                    defer { session.end() }
                    #expect(try await kind(session) == "ok token-alice-2", "\(name)")
                    #expect(endpoint.count == 1, "\(name)")
                    // The rejected attempt's download left nothing behind: one file, the answer's.
                    let left = (try? FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path))
                    #expect((left ?? []).count == (isDownload ? 1 : 0), "\(name)")
                }
                #expect(server.requests.count == 10)
            }
        }
    }

    /// The replay rule of `data(for:)`: a POST upload without an `Idempotency-Key` is refreshed for but not sent
    /// again; with one, it is.
    @Test func aPostUploadIsReplayedAfterA401OnlyWithAnIdempotencyKey() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/upload") { request in
                request.bearerToken == "token-alice" ? .status(401) : .text("stored")
            }
            let (session, endpoint) = Self.refreshingSession("alice")
            defer { session.end() }
            var request = URLRequest(url: server.url("/upload"))
            request.httpMethod = "POST"
            let error = await #expect(throws: SessionError.self) {
                try await session.upload(for: request, from: Data("photo".utf8))
            }
            #expect(error?.code == .accessExpired)
            #expect(server.requests.count == 1)
            #expect(endpoint.count == 1)

            request.setValue("k-1", forHTTPHeaderField: "Idempotency-Key")
            let (session2, _) = Self.refreshingSession("alice")
            defer { session2.end() }
            let (data, _) = try await session2.upload(for: request, from: Data("photo".utf8))
            #expect(text(data) == "stored")
            #expect(server.requests.suffix(2).map(\.bearerToken) == ["token-alice", "token-alice-2"])
        }
    }

    // MARK: - Cancelled by end()

    @Test func endCancelsAnUploadTheServerIsHolding() async throws {
        let never = Gate()
        try await LocalServer.withRunning { server async throws in
            server.route("/held") { _ in
                await never.wait()
                return .json("{}")
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            let upload = Task { try await session.upload(for: Self.put(server, "/held"), from: Data("x".utf8)) }
            await never.waitForArrivals(1)
            session.end()
            let stopped = await transfersStop(in: session)
            #expect(stopped, "end() returned, but the upload is still in flight")
            if !stopped { upload.cancel() }  // so that a failure ends the test instead of hanging it
            let error = await #expect(throws: SessionError.self) { try await upload.value }
            #expect(error?.code == .sessionEnded)
        }
    }

    /// A session a manager made downloads into its account's directory, which outlives the session (an account
    /// switch or a re-login ends it without a sign-out): the cancelled download's partial file must go by itself.
    @Test(arguments: [16 << 20, 0])
    func endCancelsADownloadMidBodyAndLeavesNoPartialFile(downloadSegmentBytes: Int) async throws {
        try await TemporaryDirectory.with { root in
            try await LocalServer.withRunning { server async throws in
                server.route("/big") { _ in
                    LocalServer.Response(body: Data("chunk".utf8)).failing(with: .trickle(every: .milliseconds(5)))
                }
                let manager = SessionManager(
                    configuration: .init(
                        store: InMemoryCredentialStore(),
                        sessionConfiguration: UserSession.Configuration(downloadSegmentBytes: downloadSegmentBytes),
                        dataDirectory: root))
                let session = try await manager.signIn(alice, tokens: tokens("alice"))
                let started = Gate()
                let download = Task {
                    try await session.download(for: get(server, "/big")) { progress in
                        if progress.completedBytes > 0 { started.open() }
                    }
                }
                await started.wait()
                let directory = session.downloadsDirectory
                #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).count == 1)
                session.end()
                let stopped = await transfersStop(in: session)
                #expect(stopped, "end() returned, but the download is still in flight")
                if !stopped { download.cancel() }
                let error = await #expect(throws: SessionError.self) { try await download.value }
                #expect(error?.code == .sessionEnded)
                #expect(FileManager.default.fileExists(atPath: directory.path))
                let left = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
                #expect(left.isEmpty)
            }
        }
    }

    @Test func aByteStreamEndsWithSessionEndedWhenTheSessionEndsMidStream() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/events") { _ in
                LocalServer.Response(body: Data("e".utf8)).failing(with: .trickle(every: .milliseconds(5)))
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            let (bytes, response) = try await session.bytes(for: get(server, "/events"))
            #expect(response.statusCode == 200)
            var received = 0
            let error = await #expect(throws: SessionError.self) {
                for try await _ in bytes {
                    received += 1
                    if received == 3 { session.end() }
                    // A stream that `end()` did not stop would run on forever (the server never finishes).
                    if received == 2_000 { break }
                }
            }
            #expect(error?.code == .sessionEnded)
            #expect(received >= 3 && received < 2_000)
        }
    }

    /// Chunks that reach the session after `end()` and before its transfer is cancelled are dropped, not handed to
    /// the consumer: the transfer session's delegate queue is held while chunks queue behind it, the session ends,
    /// and once the queue runs again the consumer gets no byte more, only `sessionEnded`. (On libcurl the same rule
    /// is checked with the transport's loop held: `CurlTransferRouteTests`.)
    @Test(.enabled(if: TransportChoice.process == .urlSession, "holds the transfer URLSession's delegate queue"))
    func chunksArrivingBetweenTheEndAndTheCancellationAreDropped() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/events") { _ in
                LocalServer.Response(body: Data("e".utf8)).failing(with: .trickle(every: .milliseconds(2)))
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            let (bytes, _) = try await session.bytes(for: get(server, "/events"))
            var iterator = bytes.makeAsyncIterator()
            for _ in 0..<3 { _ = try await iterator.next() }
            let queue = try #require(session.madeTransferSession).urlSession.delegateQueue
            let held = DispatchSemaphore(value: 0)
            queue.addOperation { held.wait() }
            // Twenty chunks wait behind the held operation, each an operation of its own.
            let queued = await eventually(within: .seconds(30)) { queue.operationCount >= 21 }
            session.end()
            held.signal()
            #expect(queued, "no chunk queued behind the held delegate queue")
            var afterEnd = 0
            do {
                while try await iterator.next() != nil { afterEnd += 1 }
            } catch let error as SessionError {
                #expect(error.code == .sessionEnded)
            }
            // At most the chunks handed over before the queue was held; never the twenty held behind it.
            #expect(afterEnd < 10, "\(afterEnd) bytes reached the consumer after the end")
        }
    }

    @Test func leavingAByteStreamEarlyCancelsItsTransfer() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/events") { _ in
                LocalServer.Response(body: Data("e".utf8)).failing(with: .trickle(every: .milliseconds(5)))
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            do {
                let (bytes, _) = try await session.bytes(for: get(server, "/events"))
                for try await _ in bytes { break }
            }
            #expect(await transfersStop(in: session), "the transfer goes on after its consumer left")
        }
    }

    // MARK: - Timeouts

    /// When no byte moves for the request timeout, the transfer fails with `timedOut`.
    @Test func aDownloadThatStallsFailsAfterTheRequestTimeout() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/stalled") { _ in LocalServer.Response(body: Data("late".utf8)).delayed(by: .seconds(30)) }
            let session = UserSession(
                account: alice, tokens: tokens("alice"),
                configuration: UserSession.Configuration(requestTimeout: .seconds(1), retryPolicy: .never))
            defer { session.end() }
            let error = await #expect(throws: SessionError.self) {
                try await session.download(for: get(server, "/stalled"))
            }
            #expect(error?.code == .timedOut)
            #expect(error?.underlyingError as? URLError != nil)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path)) ?? []
            #expect(left.isEmpty)
        }
    }

    // MARK: - WebSockets

    /// What a WebSocket promises that Linux can check: its handshake request carries this session's token (whatever
    /// header it came with), a URL that cannot be a WebSocket is refused with a typed error, and `end()` leaves the
    /// task finished. (FoundationNetworking opens WebSockets only with a libcurl built with WebSocket support, which
    /// Debian 12's is not: there the task fails at once with `unsupportedURL`, and no loopback handshake can run.)
    @Test func aWebSocketsHandshakeCarriesTheSessionsTokenAndEndFinishesIt() async throws {
        let session = UserSession(account: alice, tokens: tokens("alice"))
        var request = URLRequest(url: URL(string: "ws://127.0.0.1:9/socket")!)
        request.setValue("Bearer someone-else", forHTTPHeaderField: "Authorization")
        let task = try await session.webSocket(for: request)
        #expect(task.originalRequest?.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice")

        let refused = await #expect(throws: SessionError.self) {
            try await session.webSocket(for: URLRequest(url: URL(string: "ftp://127.0.0.1/socket")!))
        }
        #expect(refused?.code == .invalidInput)

        session.end()
        let finished = await eventually(within: .seconds(60)) { task.state == .completed }
        #expect(finished)
        let transfers = try #require(session.madeTransferSession)
        #expect(transfers.inFlight == 0)
    }

    /// Every scheme a WebSocket URL may have (RFC 6455 §3, and the http/https forms URLSession takes), in any case,
    /// makes a task that carries the token; `end()` finishes them all.
    /// A token within its leeway of expiring is refreshed before the handshake carries it, as for every other kind:
    /// the handshake never sends a token about to expire.
    @Test func aWebSocketsHandshakeCarriesARefreshedTokenWhenTheHeldOneIsExpiring() async throws {
        let clock = ManualClock()
        let endpoint = ScriptedTokenEndpoint { _, _ in TokenSet(accessToken: "token-alice-refreshed", lifetime: nil) }
        let session = UserSession(
            account: alice, tokens: tokens("alice", refresh: "refresh-alice", lifetime: .seconds(3600), clock: clock),
            configuration: UserSession.Configuration(retryPolicy: .never, clock: clock), tokenEndpoint: endpoint)
        defer { session.end() }
        // Within the leeway of its expiry, not past it.
        clock.advance(by: .seconds(3590))
        let task = try await session.webSocket(for: URLRequest(url: URL(string: "ws://127.0.0.1:9/socket")!))
        #expect(endpoint.count == 1)
        #expect(task.originalRequest?.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice-refreshed")
    }

    @Test func everyWebSocketSchemeInAnyCaseMakesATaskCarryingTheToken() async throws {
        let session = UserSession(account: alice, tokens: tokens("alice"))
        var tasks: [URLSessionWebSocketTask] = []
        for scheme in ["ws", "wss", "http", "https", "WSS", "Https"] {
            let task = try await session.webSocket(for: URLRequest(url: URL(string: "\(scheme)://127.0.0.1:9/s")!))
            #expect(
                task.originalRequest?.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice", "\(scheme)")
            tasks.append(task)
        }
        session.end()
        let finished = await eventually(within: .seconds(60)) { [tasks] in tasks.allSatisfy { $0.state == .completed } }
        #expect(finished)
        let transfers = try #require(session.madeTransferSession)
        #expect(await eventually(within: .seconds(60)) { transfers.inFlight == 0 })
    }

    // MARK: - Refused after end()

    @Test func everyKindIsRefusedAfterEndAndNothingLeaves() async throws {
        try await TemporaryDirectory.with { directory in
            try await LocalServer.withRunning { server async throws in
                server.route("/r") { _ in .text("ok") }
                let file = directory.appendingPathComponent("f")
                try Data("file".utf8).write(to: file)
                let session = UserSession(account: alice, tokens: tokens("alice"))
                session.end()
                let calls: [@Sendable () async throws -> Void] = [
                    { _ = try await session.upload(for: Self.put(server, "/r"), from: Data("x".utf8)) },
                    { _ = try await session.upload(for: Self.put(server, "/r"), fromFile: file) },
                    { _ = try await session.download(for: get(server, "/r")) },
                    { _ = try await session.bytes(for: get(server, "/r")) },
                    {
                        _ = try await session.webSocket(
                            for: URLRequest(url: URL(string: "ws://127.0.0.1:\(server.port)/ws")!))
                    },
                    { _ = try await session.authorize(get(server, "/r")) },
                    { _ = try await session.withAccessToken { _ in } },
                ]
                for call in calls {
                    let error = await #expect(throws: SessionError.self) { try await call() }
                    #expect(error?.code == .sessionEnded)
                }
                #expect(server.requests.isEmpty)
                #expect(!FileManager.default.fileExists(atPath: session.downloadsDirectory.path))
            }
        }
    }

    // MARK: - One account's transfer never reaches another's directory

    @Test func aDownloadLandsInItsOwnAccountsDirectoryAndGoesWithItsSignOut() async throws {
        try await TemporaryDirectory.with { root in
            try await LocalServer.withRunning { server async throws in
                server.route("/statement.pdf") { request in .text("statement of \(user(of: request))") }
                let manager = SessionManager(
                    configuration: .init(store: InMemoryCredentialStore(), dataDirectory: root))
                let aliceSession = try await manager.signIn(alice, tokens: tokens("alice"))
                let bobSession = try await manager.signIn(bob, tokens: tokens("bob"), makeCurrent: false)
                let (aliceFile, _) = try await aliceSession.download(for: get(server, "/statement.pdf"))
                let (bobFile, _) = try await bobSession.download(for: get(server, "/statement.pdf"))

                let aliceDirectory = try #require(manager.directory(for: alice))
                let bobDirectory = try #require(manager.directory(for: bob))
                #expect(aliceFile.path.hasPrefix(aliceDirectory.path + "/"))
                #expect(bobFile.path.hasPrefix(bobDirectory.path + "/"))
                #expect(try String(contentsOf: aliceFile, encoding: .utf8) == "statement of alice")
                #expect(try String(contentsOf: bobFile, encoding: .utf8) == "statement of bob")
                // Nothing of Alice's anywhere in Bob's directory.
                let bobFiles = FileManager.default.enumerator(atPath: bobDirectory.path)?.allObjects as? [String] ?? []
                for name in bobFiles {
                    let contents = (try? Data(contentsOf: bobDirectory.appendingPathComponent(name))) ?? Data()
                    #expect(!text(contents).contains("alice"), "\(name)")
                }

                await manager.signOut(aliceSession, options: SignOutOptions(serverSteps: []))
                #expect(!FileManager.default.fileExists(atPath: aliceFile.path))
                #expect(FileManager.default.fileExists(atPath: bobFile.path))
            }
        }
    }
}
