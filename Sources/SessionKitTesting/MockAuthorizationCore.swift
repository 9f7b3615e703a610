import Foundation
import SessionKit

/// The part of a ``MockAuthorizationServer`` its route handlers share: the state, the injected behaviour, and
/// the handlers themselves. Separate from the server object so the routes the ``LocalServer`` keeps do not keep
/// the mock alive.
final class MockAuthorizationCore: Sendable {
    struct Controls {
        var failures: [MockAuthorizationServer.Endpoint: [MockAuthorizationServer.Failure]] = [:]
        var holds: [MockAuthorizationServer.Endpoint: [(gate: Gate, afterProcessing: Bool)]] = [:]
        var delays: [MockAuthorizationServer.Endpoint: Duration] = [:]
    }

    let state: Lock<MockAuthorizationState>
    let controls = Lock(Controls())
    let clock: any SessionClock
    let clientID: String
    let issuer: String
    let tokenCacheControl: String
    let baseURL: URL
    /// The OpenID Connect provider's keys and documents, when ``MockAuthorizationServer/Configuration/openID`` is on.
    let openID: MockOpenIDIssuer?
    /// Whether ``MockAuthorizationServer/Configuration/dpop`` is on.
    let dpop: Bool

    /// - Throws: `CryptoError` when the OpenID provider's keys cannot be generated.
    init(configuration: MockAuthorizationServer.Configuration, baseURL: URL) throws {
        state = Lock(MockAuthorizationState(settings: configuration))
        clock = configuration.clock
        clientID = configuration.clientID
        tokenCacheControl = configuration.tokenResponseCacheControl
        self.baseURL = baseURL
        let text = baseURL.absoluteString
        issuer = text.hasSuffix("/") ? String(text.dropLast()) : text
        dpop = configuration.dpop
        openID =
            configuration.openID
            ? try MockOpenIDIssuer(
                issuer: issuer, clientID: configuration.clientID, dpop: configuration.dpop,
                revocationListing: configuration.revocationEndpointListing) : nil
    }

    private func url(_ path: String) -> URL {
        URL(string: String(path.dropFirst()), relativeTo: baseURL)?.absoluteURL ?? baseURL
    }

    func install(on server: LocalServer) {
        server.route("/token") { [self] request in
            let form = request.method == "POST" ? MockAuthorizationState.decodeForm(request.bodyText) : nil
            state.withLock { $0.countTokenRequest(grantType: form?["grant_type"]) }
            return await serve(.token, request) { [self] in
                guard request.method == "POST" else { return .status(405) }
                guard let form else { return tokenResponse(.error("invalid_request", "the body is not a valid form")) }
                let (now, wallNow) = (clock.now, clock.wallNow)
                // The proof's signature is checked outside the lock; what needs the state, under it.
                let proof =
                    dpop
                    ? MockDPoPProof.check(
                        request.headers(named: "DPoP"), method: request.method, targetURI: issuer + request.path,
                        now: wallNow) : nil
                let reply = state.withLock { state in
                    guard let proof else { return state.token(form, now: now, wallNow: wallNow) }
                    var reply = state.token(
                        form, proof: proof, arrivedAt: request.arrivedAt, now: now, wallNow: wallNow)
                    // RFC 9449 §8: the server may hand out its nonce with any answer.
                    if let nonce = state.dpop.nonce { reply.headers["DPoP-Nonce"] = nonce }
                    return reply
                }
                return tokenResponse(reply, wallNow: wallNow)
            }
        }
        server.route("/revoke") { [self] request in
            state.withLock { $0.revocationRequests += 1 }
            return await serve(.revocation, request) { [self] in
                guard request.method == "POST" else { return .status(405) }
                guard let form = MockAuthorizationState.decodeForm(request.bodyText) else {
                    return response(.error("invalid_request", "the body is not a valid form"))
                }
                return response(state.withLock { $0.revoke(form) })
            }
        }
        server.route("/device") { [self] request in
            state.withLock { $0.deviceAuthorizationRequests += 1 }
            return await serve(.deviceAuthorization, request) { [self] in
                guard request.method == "POST" else { return .status(405) }
                guard let form = MockAuthorizationState.decodeForm(request.bodyText) else {
                    return response(.error("invalid_request", "the body is not a valid form"))
                }
                let now = clock.now
                let verification = url("/device/verify")
                return tokenResponse(state.withLock { $0.startDevice(form, now: now, verificationURI: verification) })
            }
        }
        server.route("GET", "/device/verify") { _ in .text("Enter the code shown on your device.") }
        server.route("/authorize") { [self] request in
            await serve(.authorization, request) { [self] in
                guard request.method == "GET" else { return .status(405) }
                guard let query = MockAuthorizationState.decodeForm(request.query ?? "") else {
                    return .text("the query is not validly encoded", status: 400)
                }
                let (now, wallNow) = (clock.now, clock.wallNow)
                guard let answer = state.withLock({ $0.authorize(query, now: now, wallNow: wallNow, issuer: issuer) })
                else {
                    return .text("Sign in to continue.", headers: [("Cache-Control", "no-store")])
                }
                var headers: [(name: String, value: String)] = [("Cache-Control", "no-store")]
                if let location = answer.location { headers.append(("Location", location)) }
                return .text(answer.text, status: answer.status, headers: headers)
            }
        }
        server.route("GET", "/callback") { _ in .text("Signed in. The app reads the code from this URL.") }
        server.route("/api/me") { [self] request in
            await serveProtected(request) { _, user in
                .json(#"{"user":"\#(user)"}"#, headers: [("Cache-Control", "no-store")])
            }
        }
        if let openID { installOpenID(openID, on: server) }
    }

    /// The OpenID Connect provider's routes: discovery, keys, UserInfo and end-session.
    private func installOpenID(_ openID: MockOpenIDIssuer, on server: LocalServer) {
        server.route("/.well-known/openid-configuration") { [self] request in
            await serve(.openIDConfiguration, request) {
                guard request.method == "GET" || request.method == "HEAD" else { return .status(405) }
                return .json(openID.discoveryJSON)
            }
        }
        server.route("/.well-known/oauth-authorization-server") { [self] request in
            await serve(.authorizationServerMetadata, request) {
                guard request.method == "GET" || request.method == "HEAD" else { return .status(405) }
                return .json(openID.authorizationServerMetadataJSON)
            }
        }
        server.route("/jwks") { [self] request in
            await serve(.keySet, request) {
                guard request.method == "GET" || request.method == "HEAD" else { return .status(405) }
                return LocalServer.Response(
                    headers: [("Content-Type", "application/jwk-set+json")], body: Data(openID.keySetJSON.utf8))
            }
        }
        server.route("/userinfo") { [self] request in
            // OpenID Connect Core §5.3.2: at least `sub`.
            await serveProtected(request) { _, user in
                .json(#"{"name":"\#(user)","sub":"\#(user)"}"#, headers: [("Cache-Control", "no-store")])
            }
        }
        server.route("/logout") { [self] request in
            state.withLock { $0.endSessionRequests += 1 }
            return await serve(.endSession, request) { [self] in
                // RP-Initiated Logout 1.0 §2: GET with a query, or POST with a form.
                let parameters: [String: String]?
                switch request.method {
                case "GET": parameters = MockAuthorizationState.decodeForm(request.query ?? "")
                case "POST": parameters = MockAuthorizationState.decodeForm(request.bodyText)
                default: return .status(405)
                }
                guard let parameters else { return .text("the parameters are not validly encoded", status: 400) }
                let answer = state.withLock { $0.endSession(parameters) }
                var headers: [(name: String, value: String)] = [("Cache-Control", "no-store")]
                if let location = answer.location { headers.append(("Location", location)) }
                return .text(answer.text, status: answer.status, headers: headers)
            }
        }
    }

    /// Signs the ID token `draft` describes and remembers it as one this server issued (unless it was tampered
    /// with): an `id_token_hint` the end-session endpoint accepts.
    ///
    /// - Throws: `CryptoError` when the platform cannot sign.
    func signIDToken(_ draft: MockAuthorizationState.IDTokenDraft, now: Date) throws -> String? {
        guard let openID else { return nil }
        let token = try openID.sign(draft, now: now)
        if draft.tampering == nil { state.withLock { $0.idTokenUsers[token] = draft.user } }
        return token
    }

    /// Checks the access token (and DPoP proof), then answers with `handler`, with the resource endpoint's failures
    /// and holds.
    func serveProtected(
        _ request: LocalServer.Request,
        _ handler: @escaping @Sendable (LocalServer.Request, String) async -> LocalServer.Response
    ) async -> LocalServer.Response {
        // Checked on arrival, before any hold, as a resource server validates a token before acting.
        let access = checkAccess(request)
        return await serve(.resource, request) {
            switch access {
            case .granted(let user): return await handler(request, user)
            case .refused(let response): return response
            }
        }
    }

    /// The resource server's decision about `request`'s credentials (RFC 6750 §2.1, RFC 9449 §7.1).
    func checkAccess(_ request: LocalServer.Request) -> MockAuthorizationServer.ResourceAccess {
        let now = clock.now
        guard dpop else {
            let user = request.bearerToken.flatMap { token in state.withLock { $0.accessTokenUser(token, now: now) } }
            if let user { return .granted(user: user) }
            return .refused(
                Self.unauthorized(.refused(scheme: "Bearer", error: request.bearerToken == nil ? nil : "invalid_token"))
            )
        }
        var scheme: String?
        var token: String?
        if let authorization = request.header("Authorization") {
            let parts = authorization.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            if parts.count == 2 {
                scheme = parts[0].lowercased()
                token = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        // The signature is checked outside the lock; what needs the state, under it.
        let proof =
            scheme == "dpop"
            ? MockDPoPProof.check(
                request.headers(named: "DPoP"), method: request.method, targetURI: issuer + request.path,
                now: clock.wallNow) : nil
        let decision = state.withLock { state in
            state.resourceAccess(scheme: scheme, token: token, proof: proof, arrivedAt: request.arrivedAt, now: now)
        }
        if case .granted(let user) = decision { return .granted(user: user) }
        return .refused(Self.unauthorized(decision, dpop: true))
    }

    /// The 401 of a refused resource request: its challenge (RFC 6750 §3, RFC 9449 §7.1), and the nonce to use.
    private static func unauthorized(
        _ decision: MockAuthorizationState.ResourceDecision, dpop: Bool = false
    ) -> LocalServer.Response {
        guard case .refused(let scheme, let error, let nonce) = decision else { return .status(500) }
        var challenge = #"\#(scheme) realm="mock""#
        // RFC 6750 §3.1: no error code when the request carried no token at all.
        if let error { challenge += #", error="\#(error)""# }
        if scheme == "DPoP" { challenge += #", algs="ES256""# }
        var headers: [(name: String, value: String)] = [("WWW-Authenticate", challenge)]
        // Without a token, both ways in are offered.
        if dpop, error == nil { headers.append(("WWW-Authenticate", #"DPoP realm="mock", algs="ES256""#)) }
        if let nonce { headers.append(("DPoP-Nonce", nonce)) }
        return .json(#"{"error":"\#(error ?? "invalid_token")"}"#, status: 401, headers: headers)
    }

    /// Applies the endpoint's next hold and next failure, its delay, and otherwise answers with `process`.
    private func serve(
        _ endpoint: MockAuthorizationServer.Endpoint,
        _ request: LocalServer.Request,
        _ process: @Sendable () async -> LocalServer.Response
    ) async -> LocalServer.Response {
        let (hold, failure, delay) = controls.withLock { controls in
            let hold = controls.holds[endpoint]?.isEmpty == false ? controls.holds[endpoint]?.removeFirst() : nil
            let failure =
                controls.failures[endpoint]?.isEmpty == false ? controls.failures[endpoint]?.removeFirst() : nil
            return (hold, failure, controls.delays[endpoint])
        }
        if let hold, !hold.afterProcessing { await hold.gate.wait() }
        var response: LocalServer.Response
        switch failure {
        case nil:
            response = await process()
        case .processThenDrop?:
            _ = await process()
            response = LocalServer.Response(status: 200).failing(with: .closeBeforeResponding)
        case .neverAnswer?:
            // A gate nobody opens: it returns only when the client goes away or the server stops.
            await Gate().wait()
            return .status(503)
        case let failure?:
            response = Self.response(for: failure)
        }
        if let hold, hold.afterProcessing { await hold.gate.wait() }
        if let delay { response = response.delayed(by: delay) }
        // RFC 9110 §6.6.1: an origin server with a clock sends Date; an OpenID client sets its idea of the
        // provider's clock from it. Not on the resource routes, whose caching a test may be checking.
        if endpoint != .resource, response.header("Date") == nil {
            response.headers.append(("Date", HTTPDate.format(clock.wallNow)))
        }
        return response
    }

    private static func response(for failure: MockAuthorizationServer.Failure) -> LocalServer.Response {
        func retryAfter(_ delay: Duration?) -> [(name: String, value: String)] {
            delay.map { [("Retry-After", "\(max($0.components.seconds, 0))")] } ?? []
        }
        let html = [("Content-Type", "text/html; charset=utf-8")]
        switch failure {
        case .serviceUnavailable(let delay):
            return LocalServer.Response(
                status: 503, headers: html + retryAfter(delay), body: Data("<h1>Service Unavailable</h1>".utf8))
        case .tooManyRequests(let delay):
            return .json(#"{"message":"too many requests"}"#, status: 429, headers: retryAfter(delay))
        case .internalServerError:
            return LocalServer.Response(status: 500, headers: html, body: Data("<h1>Internal Server Error</h1>".utf8))
        case .bareStatus(let status):
            return LocalServer.Response(status: status)
        case .oauthError(let code, let status):
            return .json(
                #"{"error":\#(JSONValue.quoted(code))}"#, status: status,
                headers: [("Cache-Control", "no-store")])
        case .malformedBody(let body):
            return .json(body.body, headers: [("Cache-Control", "no-store")])
        case .fault(let fault):
            return LocalServer.Response.json(#"{"access_token":"at-lost","token_type":"Bearer","expires_in":3600}"#)
                .failing(with: fault)
        case .processThenDrop, .neverAnswer:
            return .status(500)  // handled by the caller
        }
    }

    /// A token response, its ID token signed as issued at `wallNow` (now when `nil`).
    private func tokenResponse(_ reply: MockAuthorizationState.Reply, wallNow: Date? = nil) -> LocalServer.Response {
        let wallNow = wallNow ?? clock.wallNow
        var reply = reply
        if let issued = reply.issued, let draft = issued.idToken {
            do {
                reply = .tokens(issued, idToken: try signIDToken(draft, now: wallNow))
            } catch {
                reply = .error("server_error", "the ID token could not be signed", status: 500)
            }
        }
        // RFC 6749 §5.1: token responses must not be cached.
        var response = response(reply)
        response.headers += [
            ("Cache-Control", tokenCacheControl), ("Pragma", "no-cache"), ("Date", HTTPDate.format(wallNow)),
        ]
        return response
    }

    private func response(_ reply: MockAuthorizationState.Reply) -> LocalServer.Response {
        let headers = reply.headers.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
        guard let json = reply.json else { return LocalServer.Response(status: reply.status, headers: headers) }
        return .json(json, status: reply.status, headers: headers)
    }
}
