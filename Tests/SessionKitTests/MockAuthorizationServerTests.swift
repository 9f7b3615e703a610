import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The mock checked on the wire with plain HTTP, independently of ``OAuthClient``.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct MockAuthorizationServerTests {
    struct Answer {
        var status: Int
        var fields: [String: String]
        var response: HTTPURLResponse

        func header(_ name: String) -> String? { response.value(forHTTPHeaderField: name) }
    }

    /// Sends a request on a connection of its own and reads a JSON object body into strings.
    private func send(
        _ url: URL, method: String = "POST", form: [(String, String)] = [], bearer: String? = nil
    ) async throws -> Answer {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.setValue("close", forHTTPHeaderField: "Connection")
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if method == "POST" {
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            request.httpBody = Data(
                form.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
                    .joined(separator: "&").utf8)
        }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var fields: [String: String] = [:]
        if let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            for (name, value) in object { fields[name] = "\(value)" }
        }
        return Answer(status: http.statusCode, fields: fields, response: http)
    }

    private func passwordGrant(_ mock: MockAuthorizationServer, _ user: String, password: String = "password")
        async throws -> Answer
    {
        try await send(
            mock.tokenEndpoint,
            form: [
                ("grant_type", "password"), ("username", user), ("password", password),
                ("client_id", "sessionkit-tests"),
            ])
    }

    private func refreshGrant(_ mock: MockAuthorizationServer, _ token: String) async throws -> Answer {
        try await send(
            mock.tokenEndpoint,
            form: [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "sessionkit-tests")])
    }

    private static func isRandomPart(_ text: Substring) -> Bool {
        text.count == 32 && text.allSatisfy { $0.isHexDigit }
    }

    // MARK: - Token endpoint

    @Test func tokensArePerUserAndUnguessable() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            try mock.addUser("bob")
            let first = try await passwordGrant(mock, "alice")
            let second = try await passwordGrant(mock, "alice")
            let bob = try await passwordGrant(mock, "bob")

            #expect(first.status == 200)
            #expect(first.fields["token_type"] == "Bearer" && first.fields["expires_in"] == "3600")
            #expect(first.header("Cache-Control") == "no-store" && first.header("Pragma") == "no-cache")
            let access = try #require(first.fields["access_token"])
            #expect(access.hasPrefix("at-alice-") && Self.isRandomPart(access.dropFirst("at-alice-".count)))
            #expect(try #require(first.fields["refresh_token"]).hasPrefix("rt-alice-"))
            #expect(second.fields["access_token"] != access)
            #expect(try #require(bob.fields["access_token"]).hasPrefix("at-bob-"))

            let wrong = try await passwordGrant(mock, "alice", password: "nope")
            #expect(wrong.status == 400 && wrong.fields["error"] == "invalid_grant")
            #expect(mock.tokenRequestCount(grant: .password) == 4)
            #expect(mock.tokenRequestCount == 4)
        }
    }

    @Test func rotationRetiresTheRefreshTokenAndReuseRevokesTheGrant() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let start = try mock.issueTokens(for: "alice")
            let first = try #require(start.refreshToken)
            let rotated = try await refreshGrant(mock, first)
            let second = try #require(rotated.fields["refresh_token"])
            let secondAccess = try #require(rotated.fields["access_token"])
            #expect(second != first)
            #expect(!mock.isActive(token: first) && mock.isActive(token: second))

            let replay = try await refreshGrant(mock, first)
            #expect(replay.status == 400 && replay.fields["error"] == "invalid_grant")
            #expect(mock.reuseDetectionCount == 1)
            #expect(![second, secondAccess, start.accessToken].contains { mock.isActive(token: $0) })
            let afterwards = try await refreshGrant(mock, second)
            #expect(afterwards.fields["error"] == "invalid_grant", "the whole family is gone")
        }
    }

    @Test func withoutRotationTheRefreshTokenStaysAndIsNotResent() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(rotatesRefreshTokens: false)) { mock in
            try mock.addUser("alice")
            let token = try #require(try mock.issueTokens(for: "alice").refreshToken)
            for _ in 0..<2 {
                let answer = try await refreshGrant(mock, token)
                #expect(answer.status == 200 && answer.fields["refresh_token"] == nil)
            }
            #expect(mock.isActive(token: token) && mock.reuseDetectionCount == 0)
            mock.rotatesRefreshTokens = true
            #expect(try await refreshGrant(mock, token).fields["refresh_token"] != nil)
            #expect(!mock.isActive(token: token))
        }
    }

    @Test func badTokenRequestsGetTheRightOAuthError() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let unsupported = try await send(
                mock.tokenEndpoint, form: [("grant_type", "client_credentials"), ("client_id", "sessionkit-tests")])
            #expect(unsupported.fields["error"] == "unsupported_grant_type")
            let missing = try await send(mock.tokenEndpoint, form: [("client_id", "sessionkit-tests")])
            #expect(missing.fields["error"] == "invalid_request")
            let repeated = try await send(
                mock.tokenEndpoint,
                form: [("grant_type", "password"), ("grant_type", "password"), ("client_id", "sessionkit-tests")])
            #expect(repeated.fields["error"] == "invalid_request")
            let client = try await send(mock.tokenEndpoint, form: [("grant_type", "password"), ("client_id", "x")])
            #expect(client.status == 401 && client.fields["error"] == "invalid_client")
            #expect(try await send(mock.tokenEndpoint, method: "GET").status == 405)
            #expect(mock.tokenRequestCount == 5)
        }
    }

    @Test func accessTokensExpireOnTheServersClock() async throws {
        let clock = ManualClock()
        try await MockAuthorizationServer.withRunning(
            configuration: .init(accessTokenLifetime: .seconds(60), clock: clock)
        ) { mock in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            clock.advance(by: .seconds(59))
            #expect(mock.isActive(token: tokens.accessToken))
            #expect(try await send(mock.userInfoEndpoint, method: "GET", bearer: tokens.accessToken).status == 200)
            clock.advance(by: .seconds(1))
            #expect(!mock.isActive(token: tokens.accessToken))
            #expect(try await send(mock.userInfoEndpoint, method: "GET", bearer: tokens.accessToken).status == 401)
            #expect(mock.isActive(token: try #require(tokens.refreshToken)))

            mock.accessTokenLifetime = nil
            let forever = try mock.issueTokens(for: "alice")
            #expect(forever.lifetime == nil)
            clock.advance(by: .seconds(86_400 * 365))
            #expect(mock.isActive(token: forever.accessToken))
        }
    }

    // MARK: - Authorization code and PKCE

    /// Opens an authorization URL and follows the redirect; returns the callback URL's query parameters.
    private func authorize(
        _ mock: MockAuthorizationServer, challenge: String, method: String = "S256", state: String = "xyz"
    ) async throws -> (status: Int, parameters: [String: String]) {
        // Every value fully percent-encoded: libcurl misreads a query that carries an unencoded `://`.
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        var components = URLComponents(url: mock.authorizationEndpoint, resolvingAgainstBaseURL: false)
        components?.percentEncodedQuery = [
            ("response_type", "code"), ("client_id", "sessionkit-tests"),
            ("redirect_uri", mock.callbackURL.absoluteString), ("state", state), ("code_challenge", challenge),
            ("code_challenge_method", method),
        ].map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(for: URLRequest(url: try #require(components?.url)))
        let http = try #require(response as? HTTPURLResponse)
        let items = URLComponents(url: try #require(http.url), resolvingAgainstBaseURL: false)?.queryItems ?? []
        return (http.statusCode, Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 }))
    }

    private func exchange(_ mock: MockAuthorizationServer, code: String, verifier: String) async throws -> Answer {
        try await send(
            mock.tokenEndpoint,
            form: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", mock.callbackURL.absoluteString),
                ("code_verifier", verifier), ("client_id", "sessionkit-tests"),
            ])
    }

    @Test func theCodeIsBoundToThePKCEChallengeAndWorksOnce() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let pkce = PKCE()

            try mock.approveNextAuthorization(as: "alice")
            let refused = try await authorize(mock, challenge: pkce.challenge)
            #expect(refused.parameters["state"] == "xyz" && refused.parameters["iss"] == mock.issuer)
            let wrong = try await exchange(
                mock, code: try #require(refused.parameters["code"]), verifier: PKCE().verifier)
            #expect(wrong.status == 400 && wrong.fields["error"] == "invalid_grant")
            #expect(mock.accessTokens(issuedTo: "alice").isEmpty)

            try mock.approveNextAuthorization(as: "alice")
            let code = try #require(try await authorize(mock, challenge: pkce.challenge).parameters["code"])
            let tokens = try await exchange(mock, code: code, verifier: pkce.verifier)
            #expect(tokens.status == 200)
            let access = try #require(tokens.fields["access_token"])
            #expect(mock.isActive(token: access))

            // RFC 6749 §4.1.2: a code presented twice revokes what it was exchanged for.
            let replay = try await exchange(mock, code: code, verifier: pkce.verifier)
            #expect(replay.fields["error"] == "invalid_grant")
            #expect(!mock.isActive(token: access))
        }
    }

    @Test func theAuthorizationEndpointRedirectsOnlyWithADecision() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            let challenge = PKCE().challenge
            let undecided = try await authorize(mock, challenge: challenge)
            #expect(undecided.status == 200 && undecided.parameters["code"] == nil)

            mock.denyNextAuthorization()
            let denied = try await authorize(mock, challenge: challenge)
            #expect(denied.parameters["error"] == "access_denied" && denied.parameters["code"] == nil)

            let plain = try await authorize(mock, challenge: challenge, method: "plain")
            #expect(plain.parameters["error"] == "invalid_request", "S256 is required")
            #expect(throws: SessionError.self) { try mock.approveNextAuthorization(as: "nobody") }
        }
    }

    // MARK: - Device authorization

    @Test func deviceAuthorizationRunsItsCourse() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let start = try await send(
                mock.deviceAuthorizationEndpoint, form: [("client_id", "sessionkit-tests"), ("scope", "profile")])
            #expect(start.status == 200)
            #expect(start.fields["interval"] == "5" && start.fields["expires_in"] == "600")
            #expect(start.fields["verification_uri"] == mock.url("/device/verify").absoluteString)
            let userCode = try #require(start.fields["user_code"])
            #expect(userCode.count == 9 && userCode.allSatisfy { $0 == "-" || "BCDFGHJKLMNPQRSTVWXZ".contains($0) })
            let deviceCode = try #require(start.fields["device_code"])
            let poll = {
                try await self.send(
                    mock.tokenEndpoint,
                    form: [
                        ("grant_type", MockAuthorizationServer.Grant.deviceCode.rawValue),
                        ("device_code", deviceCode), ("client_id", "sessionkit-tests"),
                    ])
            }

            #expect(try await poll().fields["error"] == "authorization_pending")
            try mock.approveDevice(userCode: userCode, as: "alice")
            let approved = try await poll()
            #expect(try #require(approved.fields["access_token"]).hasPrefix("at-alice-"))
            #expect(approved.fields["scope"] == "profile")
            #expect(try await poll().fields["error"] == "invalid_grant", "a device code is exchanged once")
            #expect(throws: SessionError.self) { try mock.denyDevice(userCode: userCode) }
            #expect(mock.deviceAuthorizationRequestCount == 1)
            #expect(mock.tokenRequestCount(grant: .deviceCode) == 3)
        }
    }

    // MARK: - Resource and revocation

    @Test func theProtectedResourceChallengesPerRFC6750() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            try mock.addUser("bob")
            let alice = try mock.issueTokens(for: "alice")
            let bob = try mock.issueTokens(for: "bob")
            mock.protectedRoute("GET", "/api/notes") { _, user in .json(#"{"notes_of":"\#(user)"}"#) }

            let me = try await send(mock.userInfoEndpoint, method: "GET", bearer: alice.accessToken)
            #expect(me.status == 200 && me.fields["user"] == "alice")
            let notes = try await send(mock.url("/api/notes"), method: "GET", bearer: bob.accessToken)
            #expect(notes.fields["notes_of"] == "bob")

            let anonymous = try await send(mock.userInfoEndpoint, method: "GET")
            #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate") == #"Bearer realm="mock""#)

            mock.invalidateAccessTokens(for: "alice")
            let rejected = try await send(mock.userInfoEndpoint, method: "GET", bearer: alice.accessToken)
            #expect(rejected.status == 401)
            #expect(rejected.header("WWW-Authenticate")?.contains(#"error="invalid_token""#) == true)
            #expect(mock.isActive(token: try #require(alice.refreshToken)), "only the access tokens")

            mock.revokeAll(for: "bob")
            let bobRefresh = try #require(bob.refreshToken)
            #expect(!mock.isActive(token: bob.accessToken) && !mock.isActive(token: bobRefresh))
            #expect(mock.isActive(token: try #require(alice.refreshToken)), "other users are untouched")
        }
    }

    @Test func revocationFollowsRFC7009() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let tokens = try mock.issueTokens(for: "alice")
            let unknown = try await send(
                mock.revocationEndpoint, form: [("token", "whatever"), ("client_id", "sessionkit-tests")])
            #expect(unknown.status == 200)
            let access = try await send(
                mock.revocationEndpoint,
                form: [
                    ("token", tokens.accessToken), ("token_type_hint", "access_token"),
                    ("client_id", "sessionkit-tests"),
                ])
            #expect(access.status == 200 && !mock.isActive(token: tokens.accessToken))
            #expect(mock.isActive(token: try #require(tokens.refreshToken)))
            let client = try await send(mock.revocationEndpoint, form: [("token", "x"), ("client_id", "other")])
            #expect(client.status == 401 && client.fields["error"] == "invalid_client")
            let missing = try await send(mock.revocationEndpoint, form: [("client_id", "sessionkit-tests")])
            #expect(missing.status == 400 && missing.fields["error"] == "invalid_request")
            #expect(mock.revocationRequestCount == 4)
        }
    }

    // MARK: - Injected behaviour

    @Test func injectedFailuresHitTheNextRequestsInOrderAndChangeNothing() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let token = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.token, with: .serviceUnavailable(retryAfter: .seconds(3)), times: 2)
            mock.failNext(.token, with: .oauthError("temporarily_unavailable", status: 400))
            mock.failNext(.revocation, with: .internalServerError)

            var statuses: [Int] = []
            for _ in 0..<3 {
                let answer = try await refreshGrant(mock, token)
                statuses.append(answer.status)
                if answer.status == 503 { #expect(answer.header("Retry-After") == "3") }
            }
            #expect(statuses == [503, 503, 400])
            #expect(mock.isActive(token: token), "a failed request is not processed")
            #expect(try await refreshGrant(mock, token).status == 200)
            #expect(try await send(mock.userInfoEndpoint, method: "GET").status == 401, "other endpoints unaffected")
            #expect(try await send(mock.revocationEndpoint, form: [("token", "x")]).status == 500)
        }
    }

    @Test func aHoldStopsOnlyTheNextRequest() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let gate = Gate()
            mock.holdNext(.token, at: gate)
            let held = Task { try await passwordGrant(mock, "alice") }
            await gate.waitForArrivals(1)
            #expect(mock.accessTokens(issuedTo: "alice").isEmpty, "held before processing")

            let passing = try await passwordGrant(mock, "alice")
            #expect(passing.status == 200)
            #expect(mock.accessTokens(issuedTo: "alice").count == 1)
            gate.open()
            #expect(try await held.value.status == 200)
            #expect(gate.arrivals == 1)

            let after = Gate()
            mock.holdNext(.token, at: after, afterProcessing: true)
            let late = Task { try await passwordGrant(mock, "alice") }
            await after.waitForArrivals(1)
            #expect(mock.accessTokens(issuedTo: "alice").count == 3, "processed, answer held")
            after.open()
            #expect(try await late.value.status == 200)
        }
    }

    @Test func processThenDropRotatesButNeverAnswers() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let token = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.failNext(.token, with: .processThenDrop)
            await #expect(throws: URLError.self) { try await refreshGrant(mock, token) }
            #expect(!mock.isActive(token: token))
            #expect(mock.accessTokens(issuedTo: "alice").count == 2)
            #expect(mock.tokenRequestCount == 1)
        }
    }

    @Test func aDelayHoldsTheAnswer() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            let token = try #require(try mock.issueTokens(for: "alice").refreshToken)
            mock.setDelay(.seconds(30), for: .token)
            // A deadline SessionKit enforces: long enough for the server to process the request first, even with
            // every suite running at once.
            let client = mock.makeClient(requestTimeout: .seconds(2))
            let error = await #expect(throws: SessionError.self) { try await client.refresh(using: token) }
            #expect(error?.code == .timedOut)
            #expect(!mock.isActive(token: token), "the delay comes after processing")
        }
    }

    @Test func usersAreValidated() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            for name in ["", "a b", "é", String(repeating: "x", count: 65)] {
                #expect(throws: SessionError.self) { try mock.addUser(name) }
            }
            try mock.addUser("alice")
            #expect(throws: SessionError.self) { try mock.addUser("alice") }
            #expect(throws: SessionError.self) { try mock.addUser("carol", password: "") }
            #expect(throws: SessionError.self) { try mock.issueTokens(for: "nobody") }
        }
        await #expect(throws: SessionError.self) {
            try await MockAuthorizationServer.start(configuration: .init(clientID: ""))
        }
    }
}
