import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A download is fetched in ranges, so that what waits in memory for the disk is bounded by one range: the ranges
/// of one version only are joined, each range follows `data(for:)`'s rules, and every way a server can answer
/// a range request (ignoring it, changing the resource, encoding it, an error midway) ends in the right file.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RangedDownloadTests {
    static let segment = 64 * 1024

    /// A body of `count` bytes that is not one byte repeated, so that a lost or misplaced range shows.
    static func pattern(_ count: Int, seed: Int = 0) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: ($0 &+ seed) &* 31 &+ $0 >> 8) })
    }

    static func session(
        _ user: String = "alice", segment: Int = segment, endpoint: ScriptedTokenEndpoint? = nil
    ) -> UserSession {
        UserSession(
            account: Account(issuer: issuer, subject: user), tokens: tokens(user),
            configuration: UserSession.Configuration(retryPolicy: .never, downloadSegmentBytes: segment),
            tokenEndpoint: endpoint)
    }

    /// What the server does with a range request.
    struct Behaviour: Sendable {
        var etag: String? = "\"v1\""
        var lastModified: String?
        var honoursRanges = true
        var honoursIfRange = true
        var contentEncoding: String?
        /// The body served from this request number on (1-based), a new version with another ETag.
        var changesAt: Int?
        /// Answers this request number with this status (and a small body).
        var failsAt: (number: Int, status: Int)?
        /// Answers every range shifted by this many bytes.
        var shift = 0
    }

    /// Serves `body` at `/file.bin` for `token-alice`, honouring `Range` and `If-Range` as `behaviour` says.
    static func serve(_ body: Data, on server: LocalServer, _ behaviour: Behaviour = Behaviour()) {
        let count = Lock(0)
        server.route("/file.bin") { request in
            let number = count.withLock { count -> Int in
                count += 1
                return count
            }
            guard request.bearerToken?.hasPrefix("token-alice") == true else { return .status(401) }
            if let failure = behaviour.failsAt, failure.number == number {
                return .text("no longer here", status: failure.status)
            }
            let changed = behaviour.changesAt.map { number >= $0 } ?? false
            let current = changed ? pattern(body.count, seed: 7) : body
            let etag = changed ? "\"v2\"" : behaviour.etag
            var headers: [(name: String, value: String)] = []
            if let etag { headers.append(("ETag", etag)) }
            if let lastModified = behaviour.lastModified { headers.append(("Last-Modified", lastModified)) }
            if let encoding = behaviour.contentEncoding { headers.append(("Content-Encoding", encoding)) }
            let ifRange = request.header("If-Range")
            let validatorMatches = ifRange == nil || !behaviour.honoursIfRange || ifRange == etag
            guard behaviour.honoursRanges, validatorMatches, let range = request.header("Range"),
                range.hasPrefix("bytes="), current.count > 0
            else { return LocalServer.Response(status: 200, headers: headers, body: current) }
            let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            guard bounds.count == 2, bounds[0] < current.count else {
                return LocalServer.Response(status: 416, headers: [("Content-Range", "bytes */\(current.count)")])
            }
            let first = bounds[0] + behaviour.shift
            let last = min(bounds[1], current.count - 1)
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(current.count)"))
            return LocalServer.Response(status: 206, headers: headers, body: current.subdata(in: first..<(last + 1)))
        }
    }

    static func download(_ session: UserSession, _ server: LocalServer) async throws -> (Data, HTTPURLResponse) {
        let (file, response) = try await session.download(for: get(server, "/file.bin"))
        return (try Data(contentsOf: file), response)
    }

    static func ranges(_ server: LocalServer) -> [String] {
        server.requests.map { $0.header("Range") ?? "-" }
    }

    /// `Accept-Encoding: identity` is what SessionKit asks when the caller asked nothing; an encoding the caller
    /// chose is the caller's, and goes on every range as given.
    @Test func theCallersOwnAcceptEncodingIsKept() async throws {
        let body = Self.pattern(Self.segment * 2 + 10)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server)
            let session = Self.session()
            defer { session.end() }
            var request = get(server, "/file.bin")
            request.setValue("identity;q=1, *;q=0", forHTTPHeaderField: "Accept-Encoding")
            let (file, _) = try await session.download(for: request)
            #expect(try Data(contentsOf: file) == body)
            #expect(server.requests.count == 3)
            #expect(server.requests.allSatisfy { $0.header("Accept-Encoding") == "identity;q=1, *;q=0" })
        }
    }

    // MARK: - Ranges joined

    @Test func aLargeDownloadIsFetchedInRangesAndAssembledIntoTheWholeBody() async throws {
        let body = Self.pattern(Self.segment * 3 + 1000)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server)
            let session = Self.session()
            defer { session.end() }
            let updates = Lock<[UserSession.TransferProgress]>([])
            let (file, response) = try await session.download(for: get(server, "/file.bin")) { progress in
                updates.withLock { $0.append(progress) }
            }
            #expect(try Data(contentsOf: file) == body)
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "Content-Length") == "\(body.count)")
            #expect(response.value(forHTTPHeaderField: "Content-Range") == nil)
            #expect(server.requests.count == 4)
            #expect(Self.ranges(server).first == "bytes=0-\(Self.segment - 1)")
            #expect(server.requests.dropFirst().allSatisfy { $0.header("If-Range") == "\"v1\"" })
            #expect(server.requests.allSatisfy { $0.header("Accept-Encoding") == "identity" })
            let reported = updates.withLock { $0 }
            #expect(reported.map(\.completedBytes) == reported.map(\.completedBytes).sorted(), "progress went back")
            #expect(
                reported.last
                    == UserSession.TransferProgress(completedBytes: Int64(body.count), expectedBytes: Int64(body.count))
            )
        }
    }

    @Test func lastModifiedServesAsTheValidatorWithoutAStrongETag() async throws {
        let body = Self.pattern(Self.segment * 2)
        try await LocalServer.withRunning { server async throws in
            let date = "Tue, 01 Dec 2026 10:00:00 GMT"
            Self.serve(body, on: server, Behaviour(etag: "W/\"weak\"", lastModified: date))
            let session = Self.session()
            defer { session.end() }
            #expect(try await Self.download(session, server).0 == body)
            #expect(server.requests.count == 2)
            #expect(server.requests.last?.header("If-Range") == date)
        }
    }

    /// Ranges are joined only for a body sent as it is (`Content-Encoding` absent, empty or `identity`, in any
    /// case): byte ranges of an encoded body are ranges of the encoding (RFC 9110 §14.1.2), which cannot be joined
    /// into the resource. (FoundationNetworking fails an answer in an encoding it does not know before SessionKit
    /// sees it, and decodes those it knows, so the other side is checked on the rule itself.)
    @Test(arguments: [nil, "identity", "Identity", " identity "] as [String?])
    func aBodySentAsItIsIsJoinedFromRanges(_ encoding: String?) async throws {
        let body = Self.pattern(Self.segment * 3 + 1000)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(contentEncoding: encoding))
            let session = Self.session()
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(data == body)
            #expect(response.statusCode == 200)
            let ranges = Self.ranges(server)
            #expect(ranges.count == 4 && !ranges.contains("-"), "\(ranges)")
        }
    }

    @Test func onlyAnAnswerWithoutAnEncodingIsTakenAsTheBodyItself() throws {
        func identity(_ encoding: String?) throws -> Bool {
            let headers = encoding.map { ["Content-Encoding": $0] } ?? [:]
            let response = try #require(
                HTTPURLResponse(
                    url: URL(string: "https://files.example/f")!, statusCode: 206, httpVersion: "HTTP/1.1",
                    headerFields: headers))
            return UserSession.isIdentityEncoded(response)
        }
        for encoding in [nil, "", "identity", "IDENTITY", " identity"] as [String?] {
            #expect(try identity(encoding), "\(encoding ?? "none")")
        }
        for encoding in ["gzip", "br", "x-squeezed", "identity, gzip", "gzip, identity"] {
            #expect(try !identity(encoding), "\(encoding)")
        }
    }

    @Test func aServerThatIgnoresRangesAnswersTheWholeBodyInOneRequest() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(honoursRanges: false))
            let session = Self.session()
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(data == body)
            #expect(response.statusCode == 200)
            #expect(server.requests.count == 1)
        }
    }

    @Test func aResourceThatChangesMidwayIsDownloadedWholeInItsNewVersionAndNeverMixed() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(changesAt: 2))
            let session = Self.session()
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(data == Self.pattern(body.count, seed: 7))
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "ETag") == "\"v2\"")
            #expect(server.requests.count == 2)
        }
    }

    @Test func aChangeTheServerHidesByIgnoringIfRangeStartsTheDownloadAgainWhole() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(honoursIfRange: false, changesAt: 2))
            let session = Self.session()
            defer { session.end() }
            let (data, _) = try await Self.download(session, server)
            #expect(data == Self.pattern(body.count, seed: 7))
            #expect(
                Self.ranges(server) == [
                    "bytes=0-\(Self.segment - 1)", "bytes=\(Self.segment)-\(2 * Self.segment - 1)", "-",
                ])
            #expect(try FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path).count == 1)
        }
    }

    /// Without a validator `If-Range` can carry, two ranges could come from two versions: the first range is
    /// dropped and the download asked for whole.
    @Test(arguments: [nil, "W/\"weak\""])
    func withoutAValidatorToJoinRangesTheDownloadIsOneWholeRequest(_ etag: String?) async throws {
        let body = Self.pattern(Self.segment * 2 + 5)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(etag: etag))
            let session = Self.session()
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(data == body)
            #expect(response.statusCode == 200)
            #expect(Self.ranges(server) == ["bytes=0-\(Self.segment - 1)", "-"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path).count == 1)
        }
    }

    @Test func anEmptyResourceAnswered416IsDownloadedWithOneMoreRequest() async throws {
        try await LocalServer.withRunning { server async throws in
            Self.serve(Data(), on: server)
            server.route("/file.bin") { request in
                request.header("Range") == nil
                    ? LocalServer.Response(status: 200)
                    : LocalServer.Response(status: 416, headers: [("Content-Range", "bytes */0")])
            }
            let session = Self.session()
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(data.isEmpty)
            #expect(response.statusCode == 200)
            #expect(try FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path).count == 1)
        }
    }

    // MARK: - Each range under data(for:)'s rules

    @Test func a401OnALaterRangeIsRecoveredAndTheRangesStoredAreKept() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(failsAt: (2, 401)))
            let endpoint = ScriptedTokenEndpoint { _, n in TokenSet(accessToken: "token-alice-\(n + 1)", lifetime: nil)
            }
            let session = Self.session(endpoint: endpoint)
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(data == body)
            #expect(response.statusCode == 200)
            #expect(endpoint.count == 1)
            #expect(Self.ranges(server)[1] == Self.ranges(server)[2], "the rejected range was asked for again")
        }
    }

    /// `end()` between two ranges of a session a manager made (its downloads go to the account's directory, which
    /// outlives the session): no further range is asked for, the download fails with `sessionEnded`, and the ranges
    /// already on disk are deleted with their file.
    @Test func endBetweenRangesAsksForNoMoreAndLeavesNoFile() async throws {
        let body = Self.pattern(Self.segment * 4)
        try await TemporaryDirectory.with { root in
            try await LocalServer.withRunning { server async throws in
                Self.serve(body, on: server)
                let manager = SessionManager(
                    configuration: .init(
                        store: InMemoryCredentialStore(),
                        sessionConfiguration: UserSession.Configuration(downloadSegmentBytes: Self.segment),
                        dataDirectory: root))
                let session = try await manager.signIn(alice, tokens: tokens("alice"))
                let directory = session.downloadsDirectory
                let error = await #expect(throws: SessionError.self) {
                    try await session.download(for: get(server, "/file.bin")) { progress in
                        if progress.completedBytes >= Int64(Self.segment) { session.end() }
                    }
                }
                #expect(error?.code == .sessionEnded)
                #expect(server.requests.count == 1, "a range was asked for after end()")
                #expect(FileManager.default.fileExists(atPath: directory.path))
                let left = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
                #expect(left.isEmpty, "the ranges stored before end() were left behind")
            }
        }
    }

    @Test func anErrorOnALaterRangeEndsTheDownloadWithThatAnswerInTheFile() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(failsAt: (2, 404)))
            let session = Self.session()
            defer { session.end() }
            let (data, response) = try await Self.download(session, server)
            #expect(response.statusCode == 404)
            #expect(String(decoding: data, as: UTF8.self) == "no longer here")
        }
    }

    @Test func anotherRangeThanTheOneAskedForIsAMalformedResponseAndLeavesNoFile() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server, Behaviour(shift: 1))
            let session = Self.session()
            defer { session.end() }
            let error = await #expect(throws: SessionError.self) { try await Self.download(session, server) }
            #expect(error?.code == .malformedResponse)
            let left = (try? FileManager.default.contentsOfDirectory(atPath: session.downloadsDirectory.path)) ?? []
            #expect(left.isEmpty)
        }
    }

    @Test func aRequestWithItsOwnRangeOrNoSegmentSizeIsSentAsItIs() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server)
            let session = Self.session()
            defer { session.end() }
            var own = get(server, "/file.bin")
            own.setValue("bytes=10-19", forHTTPHeaderField: "Range")
            let (file, response) = try await session.download(for: own)
            #expect(response.statusCode == 206)
            #expect(try Data(contentsOf: file) == body.subdata(in: 10..<20))

            let whole = Self.session(segment: 0)
            defer { whole.end() }
            #expect(try await Self.download(whole, server).0 == body)
            #expect(Self.ranges(server) == ["bytes=10-19", "-"])
        }
    }

    /// A caller's own `If-Range` is a conditional request of the caller's: it goes as one request, as given, never
    /// split into ranges of SessionKit's (whose `If-Range` would replace it).
    @Test func aRequestWithItsOwnIfRangeIsSentAsItIs() async throws {
        let body = Self.pattern(Self.segment * 3)
        try await LocalServer.withRunning { server async throws in
            Self.serve(body, on: server)
            let session = Self.session()
            defer { session.end() }
            var own = get(server, "/file.bin")
            own.setValue("\"v0\"", forHTTPHeaderField: "If-Range")
            let (file, response) = try await session.download(for: own)
            #expect(response.statusCode == 200)
            #expect(try Data(contentsOf: file) == body)
            #expect(server.requests.count == 1)
            #expect(server.requests.first?.header("If-Range") == "\"v0\"")
            #expect(Self.ranges(server) == ["-"])
        }
    }
}

/// `Content-Range` is read strictly: anything but one well-formed byte range is refused, never guessed at.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ContentRangeTests {
    @Test func aWellFormedRangeIsRead() throws {
        let range = try #require(ContentRange("bytes 0-1048575/1073741824"))
        #expect(range.first == 0)
        #expect(range.last == 1_048_575)
        #expect(range.completeLength == 1_073_741_824)
        #expect(range.count == 1_048_576)
        #expect(ContentRange("Bytes 5-9/*")?.completeLength == nil)
        #expect(ContentRange("  bytes 5-9/10 ")?.last == 9)
    }

    @Test(arguments: [
        "", "bytes", "bytes ", "items 0-9/10", "bytes */10", "bytes 9-5/10", "bytes 0-10/10", "bytes 0-9",
        "bytes 0-9/10/11", "bytes -1-9/10", "bytes 0--9/10", "bytes 0-9/-1", "bytes 0-9/1x",
        "bytes 0-99999999999999999999/*",
        "bytes ٠-٩/١٠", "bytes 0-9, 20-29/100",
    ])
    func aMalformedRangeIsRefused(_ value: String) {
        #expect(ContentRange(value) == nil, "\(value)")
    }
}
