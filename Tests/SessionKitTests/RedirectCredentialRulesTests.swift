import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Once a redirect chain has left its request's origin, no later hop carries a credential: not a second hop within
/// the other origin (A → B → B), and not a hop that comes back (A → B → A → A), because every address after the
/// first hop came from a third party. The rule is held for every request kind a session sends, a session whose
/// token is bound to a DPoP key too, and the evidence is what two LocalServers on two ports of `127.0.0.1` (two
/// origins that differ by port only) received.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RedirectCredentialRulesTests {
    /// The request kinds a session sends, each one call that returns the final status and body.
    enum Kind: String, CaseIterable, Sendable {
        case data, writeWaiting, writeHandedOff, upload, download, rangedDownload, bytes

        /// Sends `request`, its method and body set for the kind, through `session`.
        func send(_ request: URLRequest, through session: UserSession) async throws -> (Int, String) {
            var request = request
            switch self {
            case .data:
                let (data, response) = try await session.data(for: request)
                return (response.statusCode, text(data))
            case .writeWaiting, .writeHandedOff:
                request.httpMethod = "POST"
                request.httpBody = Data(#"{"n":1}"#.utf8)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                let policy: WritePolicy = self == .writeWaiting ? .wait(.seconds(5)) : .handOff
                let (data, response) = try await session.write(request, policy: policy)
                return (response.statusCode, text(data))
            case .upload:
                request.httpMethod = "PUT"
                let (data, response) = try await session.upload(for: request, from: Data(repeating: 7, count: 512))
                return (response.statusCode, text(data))
            case .download, .rangedDownload:
                let (file, response) = try await session.download(for: request)
                defer { try? FileManager.default.removeItem(at: file) }
                return (response.statusCode, text(try Data(contentsOf: file)))
            case .bytes:
                let (bytes, response) = try await session.bytes(for: request)
                var body = [UInt8]()
                for try await byte in bytes { body.append(byte) }
                return (response.statusCode, String(decoding: body, as: UTF8.self))
            }
        }
    }

    /// How the session's token is presented.
    enum Binding: String, CaseIterable, Sendable {
        case bearer, dpop
    }

    /// Every field a hop after the chain left its origin must not carry.
    static let credentialFields = ["Authorization", "DPoP", "Cookie", "Proxy-Authorization", "X-Api-Key"]

    /// The landing's body; a ranged download fetches it in ranges of `segment` bytes, each range walking the chain.
    static let landing = Data("landed after the chain".utf8)
    static let segment = 6
    static let ranges = (landing.count + segment - 1) / segment

    /// A session for alice whose scope marks `X-Api-Key` as a credential.
    static func session(for kind: Kind, binding: Binding) throws -> UserSession {
        let tokens =
            switch binding {
            case .bearer: tokens("alice")
            case .dpop:
                TokenSet(
                    accessToken: "token-alice", refreshToken: "refresh-alice", tokenType: "DPoP",
                    proofKey: try DPoPKey.generate())
            }
        let segment =
            switch kind {
            case .rangedDownload: Self.segment
            case .download: 0
            default: 16 << 20
            }
        return UserSession(
            account: alice, tokens: tokens,
            configuration: UserSession.Configuration(
                retryPolicy: .never, downloadSegmentBytes: segment,
                credentialScope: .init(credentialHeaderFields: ["X-Api-Key"])))
    }

    /// A request carrying every credential the app might add by hand besides the session's token.
    static func withAppCredentials(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.setValue("app-cookie=1", forHTTPHeaderField: "Cookie")
        request.setValue("Basic cHJveHk6c2VjcmV0", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("key-of-alice", forHTTPHeaderField: "X-Api-Key")
        request.setValue("proof-of-alice", forHTTPHeaderField: "DPoP")
        return request
    }

    /// Serves ``landing`` at `path`, honouring `Range` with a strong ETag so that a download is joined from ranges.
    static func serveLanding(_ path: String, on server: LocalServer) {
        server.route(path) { request in
            let headers: [(name: String, value: String)] = [("ETag", "\"v1\"")]
            guard let range = request.header("Range"), range.hasPrefix("bytes=") else {
                return LocalServer.Response(status: 200, headers: headers, body: landing)
            }
            let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            guard bounds.count == 2, bounds[0] < landing.count else {
                return LocalServer.Response(status: 416, headers: [("Content-Range", "bytes */\(landing.count)")])
            }
            let last = min(bounds[1], landing.count - 1)
            return LocalServer.Response(
                status: 206, headers: headers + [("Content-Range", "bytes \(bounds[0])-\(last)/\(landing.count)")],
                body: landing.subdata(in: bounds[0]..<(last + 1)))
        }
    }

    static func redirect(to location: String) -> LocalServer.Response {
        LocalServer.Response(status: 307, headers: [("Location", location)])
    }

    /// The credential fields `request` carried.
    static func credentials(of request: LocalServer.Request) -> [String] {
        credentialFields.filter { request.header($0) != nil }
    }

    /// Runs `body` with origin A and origin B: one host, two ports.
    static func withTwoOrigins(_ body: (_ a: LocalServer, _ b: LocalServer) async throws -> Void) async throws {
        try await LocalServer.withRunning { b in
            try await LocalServer.withRunning { a in
                #expect(Origin(a.baseURL) != Origin(b.baseURL))
                try await body(a, b)
            }
        }
    }

    // MARK: - A redirect the session refuses

    /// A redirect the session refuses ends the request with that refusal, for every kind: nothing is sent again
    /// after it, and the caller gets the typed error. (A handed-off write follows its redirects in a loop of its
    /// own; a refusal that only left the `switch` there would send the same request for ever.)
    @Test(arguments: Kind.allCases)
    func aRefusedRedirectEndsTheRequestWithItsErrorAndSendsNothingMore(_ kind: Kind) async throws {
        try await LocalServer.withRunning { a in
            // Every answer sends the request back to the same place: past the hop limit the session refuses.
            a.route("/loop") { _ in Self.redirect(to: "/loop") }
            let session = try Self.session(for: kind, binding: .bearer)
            defer { session.end() }

            let error = try await #require(throws: SessionError.self) {
                _ = try await kind.send(URLRequest(url: a.url("/loop")), through: session)
            }
            #expect(error.code == .malformedResponse)
            #expect(error.message.contains("more than \(RedirectDecision.maximumHops) times"), "\(error.message)")
            let sent = a.requests.count
            #expect(sent == RedirectDecision.maximumHops + 1, "the loop was followed \(sent) times")
        }
    }

    // MARK: - A → B → B

    @Test(arguments: Kind.allCases, Binding.allCases)
    func aSecondHopWithinTheOtherOriginCarriesNoCredential(_ kind: Kind, _ binding: Binding) async throws {
        try await Self.withTwoOrigins { a, b in
            a.route("/start") { _ in Self.redirect(to: b.url("/hop").absoluteString) }
            // Relative: B sends the request on within B, an origin the token never belonged to.
            b.route("/hop") { _ in Self.redirect(to: "/land") }
            Self.serveLanding("/land", on: b)
            let session = try Self.session(for: kind, binding: binding)
            defer { session.end() }

            let (status, body) = try await kind.send(Self.withAppCredentials(a.url("/start")), through: session)
            #expect(status == 200 && body == text(Self.landing))

            // The chain started with every credential (so their absence below means they were removed)…
            let starts = a.requests
            #expect(!starts.isEmpty && starts.allSatisfy { $0.path == "/start" })
            #expect(kind != .rangedDownload || starts.count == Self.ranges, "each range walks the chain")
            #expect(starts.allSatisfy { Self.credentials(of: $0) == Self.credentialFields })
            #expect(
                starts.allSatisfy {
                    $0.header("Authorization") == "\(binding == .dpop ? "DPoP" : "Bearer") token-alice"
                })
            // …and B got none of them, on the first hop or the second.
            let atB = b.requests
            #expect(atB.count == 2 * starts.count)
            #expect(Set(atB.map(\.path)) == ["/hop", "/land"])
            for request in atB {
                #expect(Self.credentials(of: request).isEmpty, "\(request.method) \(request.path) carried credentials")
            }
        }
    }

    // MARK: - A → B → A → A

    @Test(arguments: Kind.allCases, Binding.allCases)
    func aChainThatCameBackToItsOriginCarriesNoCredentialThereNorAfter(_ kind: Kind, _ binding: Binding)
        async throws
    {
        try await Self.withTwoOrigins { a, b in
            a.route("/start") { _ in Self.redirect(to: b.url("/bounce").absoluteString) }
            b.route("/bounce") { _ in Self.redirect(to: a.url("/back").absoluteString) }
            // Back on A, a same-origin hop: its address still came from B's Location.
            a.route("/back") { _ in Self.redirect(to: "/home") }
            Self.serveLanding("/home", on: a)
            let session = try Self.session(for: kind, binding: binding)
            defer { session.end() }

            let (status, body) = try await kind.send(Self.withAppCredentials(a.url("/start")), through: session)
            #expect(status == 200 && body == text(Self.landing))

            let atA = a.requests
            let starts = atA.filter { $0.path == "/start" }
            #expect(!starts.isEmpty)
            #expect(kind != .rangedDownload || starts.count == Self.ranges, "each range walks the chain")
            #expect(starts.allSatisfy { Self.credentials(of: $0) == Self.credentialFields })
            let returned = atA.filter { $0.path != "/start" }
            #expect(returned.count == 2 * starts.count)
            #expect(Set(returned.map(\.path)) == ["/back", "/home"])
            for request in returned + b.requests {
                #expect(Self.credentials(of: request).isEmpty, "\(request.method) \(request.path) carried credentials")
            }
            #expect(b.requests.count == starts.count)
        }
    }
}
