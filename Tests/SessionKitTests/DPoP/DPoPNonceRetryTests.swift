import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A resource's `use_dpop_nonce` (RFC 9449 §9) refuses the proof, not the request: a session sends the request once
/// more with the nonce, and only once. That resend is no 401 recovery, so a later `invalid_token` still gets its one
/// refresh and replay; and a resource that refuses every proof gets the request twice, its second answer the
/// caller's. Held for every request kind whose proofs a session makes per attempt.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct DPoPNonceRetryTests {
    /// The request kinds that send a bound token with a fresh proof on each attempt.
    enum Kind: String, CaseIterable, Sendable {
        case data, writeWaiting, writeHandedOff, upload, download, rangedDownload, bytes

        /// Sends `request` through `session`, its method and body set for the kind; a write carries an
        /// `Idempotency-Key` when `idempotencyKey` is set, so that a 401 may replay it.
        func send(
            _ request: URLRequest, through session: UserSession, idempotencyKey: Bool = false
        ) async throws -> (Int, String, HTTPURLResponse) {
            var request = request
            switch self {
            case .data:
                let (data, response) = try await session.data(for: request)
                return (response.statusCode, text(data), response)
            case .writeWaiting, .writeHandedOff:
                request.httpMethod = "POST"
                request.httpBody = Data(#"{"n":1}"#.utf8)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                if idempotencyKey { request.setValue("key-1", forHTTPHeaderField: "Idempotency-Key") }
                let policy: WritePolicy = self == .writeWaiting ? .wait(.seconds(5)) : .handOff
                let (data, response) = try await session.write(request, policy: policy)
                return (response.statusCode, text(data), response)
            case .upload:
                request.httpMethod = "PUT"
                let (data, response) = try await session.upload(for: request, from: Data(repeating: 7, count: 512))
                return (response.statusCode, text(data), response)
            case .download, .rangedDownload:
                let (file, response) = try await session.download(for: request)
                defer { try? FileManager.default.removeItem(at: file) }
                return (response.statusCode, text(try Data(contentsOf: file)), response)
            case .bytes:
                let (bytes, response) = try await session.bytes(for: request)
                var body = [UInt8]()
                for try await byte in bytes { body.append(byte) }
                return (response.statusCode, String(decoding: body, as: UTF8.self), response)
            }
        }
    }

    /// A DPoP-bound session whose refreshes return `bound-<n>`, bound to the same key.
    static func session(
        for kind: Kind, endpoint: ScriptedTokenEndpoint, key: DPoPKey, diagnostics: Diagnostics? = nil
    ) -> UserSession {
        UserSession(
            account: alice,
            tokens: TokenSet(accessToken: "bound", refreshToken: "refresh", tokenType: "DPoP", proofKey: key),
            configuration: UserSession.Configuration(
                retryPolicy: .never, downloadSegmentBytes: kind == .rangedDownload ? 16 << 20 : 0,
                diagnostics: diagnostics),
            tokenEndpoint: endpoint)
    }

    static func endpoint(_ key: DPoPKey) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint { _, n in
            TokenSet(accessToken: "bound-\(n)", refreshToken: "refresh-\(n)", tokenType: "DPoP", proofKey: key)
        }
    }

    /// The `nonce` claim of the request's proof, `nil` without one; an empty string when there is no proof.
    static func nonce(of request: LocalServer.Request) -> String? {
        guard let proof = request.header("DPoP"), let jws = try? CompactJWS(proof) else { return "" }
        return jws.claims["nonce"]?.stringValue
    }

    static func challenge(_ error: String, nonce: String?, body: String) -> LocalServer.Response {
        var headers: [(name: String, value: String)] = [("WWW-Authenticate", #"DPoP algs="ES256", error="\#(error)""#)]
        if let nonce { headers.append(("DPoP-Nonce", nonce)) }
        return .text(body, status: 401, headers: headers)
    }

    // MARK: - The nonce resend is not the 401 recovery

    @Test(arguments: Kind.allCases.filter { $0 != .writeHandedOff })
    func aNonceResendLeavesTheRequestsOneRefreshForALaterInvalidToken(_ kind: Kind) async throws {
        try await LocalServer.withRunning { server async throws in
            // A proof without the nonce is refused for it; the old token, proven with it, is then refused as
            // expired; the refreshed token, proven with the nonce, is served.
            server.route("/r") { request in
                guard Self.nonce(of: request) == "nonce-1" else {
                    return Self.challenge("use_dpop_nonce", nonce: "nonce-1", body: "nonce needed")
                }
                guard request.dpopToken == "bound-1" else {
                    return Self.challenge("invalid_token", nonce: nil, body: "token expired")
                }
                return .text("served")
            }
            let key = try DPoPKey.generate()
            let endpoint = Self.endpoint(key)
            let session = Self.session(for: kind, endpoint: endpoint, key: key)
            defer { session.end() }

            let (status, body, _) = try await kind.send(
                URLRequest(url: server.url("/r")), through: session, idempotencyKey: true)
            #expect(status == 200 && body == "served")
            #expect(endpoint.count == 1, "one refresh")
            let requests = server.requests
            #expect(requests.count == 3, "the request, its nonce resend, its replay after the refresh")
            #expect(requests.map(\.dpopToken) == ["bound", "bound", "bound-1"])
            #expect(requests.map { Self.nonce(of: $0) } == [nil, "nonce-1", "nonce-1"])
            #expect(Set(requests.compactMap { $0.header("DPoP") }).count == requests.count, "a proof per attempt")
        }
    }

    // MARK: - A bearer token has no nonce

    /// A nonce challenge answered to a bearer token is an ordinary 401, on every kind: the session reads no
    /// `DPoP-Nonce` (only a proof has a nonce, RFC 9449 §9), so it neither resends the request unchanged nor hands the
    /// challenge back; it refreshes once and replays, as for any refused token.
    @Test(arguments: Kind.allCases)
    func aNonceChallengeToABearerTokenIsAnOrdinaryUnauthorized(_ kind: Kind) async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/r") { request in
                guard request.header("Authorization") == "Bearer plain-1" else {
                    return Self.challenge("use_dpop_nonce", nonce: "nonce-1", body: "nonce needed")
                }
                return .text("served")
            }
            let endpoint = ScriptedTokenEndpoint { _, n in
                TokenSet(accessToken: "plain-\(n)", refreshToken: "refresh-\(n)")
            }
            let session = UserSession(
                account: alice, tokens: TokenSet(accessToken: "plain", refreshToken: "refresh"),
                configuration: UserSession.Configuration(
                    retryPolicy: .never, downloadSegmentBytes: kind == .rangedDownload ? 16 << 20 : 0),
                tokenEndpoint: endpoint)
            defer { session.end() }

            let (status, body, _) = try await kind.send(
                URLRequest(url: server.url("/r")), through: session, idempotencyKey: true)
            let requests = server.requests
            #expect(requests.allSatisfy { $0.header("DPoP") == nil }, "a bearer session sends no proof")
            if kind == .writeHandedOff {
                // A handed-off write recovers no 401 (it runs past the session's end, with no refresher to ask):
                // the caller gets the answer, sent once.
                #expect(status == 401 && body == "nonce needed")
                #expect(requests.count == 1, "no unchanged resend")
                #expect(endpoint.count == 0)
            } else {
                #expect(endpoint.count == 1, "one refresh")
                #expect(status == 200 && body == "served")
                #expect(
                    requests.map { $0.header("Authorization") } == ["Bearer plain", "Bearer plain-1"],
                    "the request, then its replay with the refreshed token; no unchanged resend")
            }
        }
    }

    // MARK: - Answered once

    @Test(arguments: Kind.allCases)
    func aResourceThatRefusesEveryProofForItsNonceGetsTheRequestTwiceAndTheCallerItsSecondAnswer(_ kind: Kind)
        async throws
    {
        try await LocalServer.withRunning { server async throws in
            let count = Lock(0)
            server.route("/r") { _ in
                let n = count.withLock { count -> Int in
                    count += 1
                    return count
                }
                return Self.challenge("use_dpop_nonce", nonce: "nonce-\(n)", body: "challenge \(n)")
            }
            let key = try DPoPKey.generate()
            let endpoint = Self.endpoint(key)
            let events = Lock<[DiagnosticEvent]>([])
            let diagnostics = Diagnostics(level: .debug) { event in events.withLock { $0.append(event) } }
            let session = Self.session(for: kind, endpoint: endpoint, key: key, diagnostics: diagnostics)
            defer { session.end() }

            let (status, body, response) = try await kind.send(URLRequest(url: server.url("/r")), through: session)
            diagnostics.flush()
            let retries = events.withLock { $0 }.filter { $0.kind == .dpopNonceRetry }
            let origin = try #require(Origin(server.url("/"))).description
            #expect(
                retries.map(\.fields) == [["endpoint": "resource", "origin": origin]],
                "the one resend is told, with the origin and never the path")
            #expect(retries.allSatisfy { $0.account == alice && $0.level == .info })
            #expect(status == 401)
            #expect(body == "challenge 2", "the caller gets the second answer")
            #expect(response.value(forHTTPHeaderField: "DPoP-Nonce") == "nonce-2")
            let requests = server.requests
            #expect(requests.count == 2, "the request and one resend with the nonce, nothing more")
            #expect(requests.map { Self.nonce(of: $0) } == [nil, "nonce-1"])
            #expect(requests.allSatisfy { $0.dpopToken == "bound" })
            #expect(endpoint.count == 0, "a refused proof is not an expired token: no refresh")
        }
    }
}
