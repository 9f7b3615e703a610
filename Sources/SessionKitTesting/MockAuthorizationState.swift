import Foundation
import SessionKit

/// What a ``MockAuthorizationServer`` knows: users, grants, tokens, codes and counters. Pure: every decision is a
/// synchronous function of the state, the request's parameters and the time, so the server calls it under one
/// lock.
struct MockAuthorizationState {
    /// One grant's tokens: the refresh tokens a rotation chain issued and the access tokens issued with them.
    struct Family {
        let user: String
        let scope: String?
        /// When the user signed in to start the grant: the ID tokens' `auth_time`, refreshes included.
        let authTime: Date
        /// The thumbprint of the DPoP key the grant's refresh tokens (and access tokens) are bound to, if any.
        let jkt: String?
        var currentRefreshToken: String?
        var refreshTokens: [String] = []
        var accessTokens: [String] = []
        var isRevoked = false
    }

    struct AccessToken {
        let familyID: Int
        let user: String
        let expiresAt: ContinuousClock.Instant?
        /// The thumbprint of the DPoP key the token is bound to, if any.
        let jkt: String?
        var isRevoked = false
    }

    struct AuthorizationCode {
        let user: String
        let clientID: String
        let redirectURI: String
        let challenge: String
        let scope: String?
        /// The authorization request's `nonce`, for the ID token the code is exchanged for.
        let nonce: String?
        /// The authorization request's `dpop_jkt` (RFC 9449 §10): with DPoP on, the code is exchanged only with a
        /// proof of the key it names.
        let dpopJKT: String?
        let authTime: Date
        let expiresAt: ContinuousClock.Instant
        var familyID: Int?
    }

    struct DeviceGrant {
        enum Decision {
            case pending
            case approved(String)
            case denied, consumed
        }
        let userCode: String
        let scope: String?
        var expiresAt: ContinuousClock.Instant
        var decision = Decision.pending
    }

    /// What an ID token will say, decided under the lock; the core signs it afterwards, outside.
    struct IDTokenDraft: Equatable {
        var user: String
        var nonce: String?
        var authTime: Date
        var accessToken: String
        var tampering: MockAuthorizationServer.IDTokenTampering?
    }

    /// An answer to send: a status and a JSON body (or none).
    struct Reply: Equatable {
        var status: Int
        var json: String?
        var headers: [String: String] = [:]
        /// The tokens of a token response, whose ID token (if any) is still to be signed.
        var issued: Issued?

        /// A token response; `idToken` is the signed ID token of `issued`'s draft, once the core has signed it.
        static func tokens(_ issued: Issued, idToken: String? = nil) -> Reply {
            let type = issued.jkt == nil ? "Bearer" : "DPoP"
            var json = #"{"access_token":"\#(issued.accessToken)","token_type":"\#(type)""#
            if let lifetime = issued.lifetime { json += #","expires_in":\#(lifetime.components.seconds)"# }
            if let refreshToken = issued.refreshToken { json += #","refresh_token":"\#(refreshToken)""# }
            if let scope = issued.scope { json += #","scope":\#(JSONValue.quoted(scope))"# }
            if let idToken { json += #","id_token":"\#(idToken)""# }
            return Reply(status: 200, json: json + "}", issued: issued)
        }

        static func error(_ code: String, _ description: String, status: Int = 400) -> Reply {
            Reply(
                status: status,
                json: #"{"error":"\#(code)","error_description":\#(JSONValue.quoted(description))}"#)
        }
    }

    var settings: MockAuthorizationServer.Configuration
    var users: [String: String] = [:]
    var families: [Int: Family] = [:]
    var nextFamilyID = 1
    var refreshIndex: [String: Int] = [:]
    var accessIndex: [String: AccessToken] = [:]
    var codes: [String: AuthorizationCode] = [:]
    var usedCodes: [String: AuthorizationCode] = [:]
    var devices: [String: DeviceGrant] = [:]
    var authorizationDecisions: [String?] = []
    /// The `dpop_jkt` of every authorization request taken (a known client, a redirect URI), in arrival order.
    var authorizationKeyThumbprints: [String?] = []
    /// What the next ID tokens get wrong, first first.
    var idTokenTamperings: [MockAuthorizationServer.IDTokenTampering] = []
    /// The ID tokens this server issued untampered, and whose they are: the `id_token_hint`s it accepts.
    var idTokenUsers: [String: String] = [:]
    var endSessions: [MockAuthorizationServer.EndSession] = []
    /// The proofs, nonce and counters of DPoP.
    var dpop = DPoPState()
    var endSessionRequests = 0

    var tokenRequests: [String: Int] = [:]
    var tokenRequestTotal = 0
    var revocationRequests = 0
    var deviceAuthorizationRequests = 0
    var reuseDetections = 0
    /// While rotation is on: how many times each refresh token reached the refresh grant, whatever the answer.
    var refreshPresentations: [String: Int] = [:]
    /// Per user: how many of their refresh tokens reached the refresh grant more than once.
    var repeatedRefreshTokens: [String: Int] = [:]

    init(settings: MockAuthorizationServer.Configuration) {
        self.settings = settings
        if settings.dpop, settings.requiresDPoPNonce { dpop.nonce = Self.makeNonce() }
    }

    // MARK: - Tokens

    static func randomPart() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        return String(high, radix: 16).leftPadded(to: 16) + String(low, radix: 16).leftPadded(to: 16)
    }

    /// Tokens just issued.
    struct Issued: Equatable {
        var accessToken: String
        var refreshToken: String?
        var lifetime: Duration?
        var scope: String?
        /// The thumbprint of the DPoP key the access token is bound to (`token_type` `DPoP`), if any.
        var jkt: String? = nil
        /// The ID token to sign, when the server is an OpenID provider and the scope has `openid`.
        var idToken: IDTokenDraft?
    }

    /// Starts a grant for `user`, who signed in at `authTime`: a new family with its first access token (and
    /// refresh token), bound to the DPoP key `jkt` names if any, and an ID token carrying `nonce` when the scope asks
    /// for one.
    mutating func startFamily(
        user: String, scope: String?, now: ContinuousClock.Instant, authTime: Date, nonce: String? = nil,
        jkt: String? = nil
    ) -> Issued {
        let familyID = nextFamilyID
        nextFamilyID += 1
        families[familyID] = Family(user: user, scope: scope, authTime: authTime, jkt: jkt)
        return issue(
            familyID: familyID, newRefreshToken: settings.issuesRefreshTokens, now: now, nonce: nonce, jkt: jkt)
    }

    /// Issues an access token in an existing family, bound to the DPoP key `jkt` names if any, a new current refresh
    /// token when asked, and an ID token when the server is an OpenID provider and the family's scope has `openid`
    /// (OpenID Connect Core §3.1.3.3, §12.2).
    mutating func issue(
        familyID: Int, newRefreshToken: Bool, now: ContinuousClock.Instant, nonce: String? = nil, jkt: String? = nil
    ) -> Issued {
        var family =
            families[familyID] ?? Family(user: "nobody", scope: nil, authTime: .distantPast, jkt: nil, isRevoked: true)
        let accessToken = "at-\(family.user)-\(Self.randomPart())"
        accessIndex[accessToken] = AccessToken(
            familyID: familyID, user: family.user, expiresAt: settings.accessTokenLifetime.map { now.advanced(by: $0) },
            jkt: jkt)
        family.accessTokens.append(accessToken)
        var refreshToken: String?
        if newRefreshToken {
            let token = "rt-\(family.user)-\(Self.randomPart())"
            refreshIndex[token] = familyID
            family.refreshTokens.append(token)
            family.currentRefreshToken = token
            refreshToken = token
        }
        families[familyID] = family
        var idToken: IDTokenDraft?
        if settings.openID, family.scope?.split(separator: " ").contains("openid") == true {
            idToken = IDTokenDraft(
                user: family.user, nonce: nonce, authTime: family.authTime, accessToken: accessToken,
                tampering: idTokenTamperings.isEmpty ? nil : idTokenTamperings.removeFirst())
        }
        return Issued(
            accessToken: accessToken, refreshToken: refreshToken, lifetime: settings.accessTokenLifetime,
            scope: family.scope, jkt: jkt, idToken: idToken)
    }

    mutating func revokeFamily(_ familyID: Int) {
        guard var family = families[familyID] else { return }
        family.isRevoked = true
        family.currentRefreshToken = nil
        for token in family.accessTokens { accessIndex[token]?.isRevoked = true }
        families[familyID] = family
    }

    func accessTokenUser(_ token: String, now: ContinuousClock.Instant) -> String? {
        guard let entry = accessIndex[token], !entry.isRevoked else { return nil }
        if let expiresAt = entry.expiresAt, now >= expiresAt { return nil }
        return entry.user
    }

    func isActive(_ token: String, now: ContinuousClock.Instant) -> Bool {
        if accessTokenUser(token, now: now) != nil { return true }
        guard let familyID = refreshIndex[token], let family = families[familyID] else { return false }
        return !family.isRevoked && family.currentRefreshToken == token
    }

    // MARK: - Token endpoint

    mutating func countTokenRequest(grantType: String?) {
        tokenRequestTotal += 1
        if let grantType { tokenRequests[grantType, default: 0] += 1 }
    }

    /// Answers a token request (RFC 6749 §4.1.3, §4.3.2, §6; RFC 8628 §3.4), whose DPoP proof, if it carried one,
    /// was accepted (RFC 9449 §5): the tokens it issues are bound to the proof's key.
    mutating func token(
        _ form: [String: String], proof: AcceptedProof? = nil, now: ContinuousClock.Instant, wallNow: Date
    ) -> Reply {
        guard form["client_id"] == settings.clientID else {
            return .error("invalid_client", "unknown client", status: 401)
        }
        switch form["grant_type"] {
        case "refresh_token"?: return refresh(form, proof: proof, now: now)
        case "authorization_code"?: return exchange(form, proof: proof, now: now)
        case "password"?:
            guard let username = form["username"], let password = form["password"], users[username] == password else {
                return .error("invalid_grant", "wrong username or password")
            }
            return .tokens(
                startFamily(user: username, scope: form["scope"], now: now, authTime: wallNow, jkt: proof?.jkt))
        case MockAuthorizationServer.Grant.deviceCode.rawValue?:
            return pollDevice(form, jkt: proof?.jkt, now: now, wallNow: wallNow)
        case nil: return .error("invalid_request", "grant_type is missing")
        case _?: return .error("unsupported_grant_type", "this server does not support that grant")
        }
    }

    private mutating func refresh(
        _ form: [String: String], proof: AcceptedProof?, now: ContinuousClock.Instant
    ) -> Reply {
        guard let token = form["refresh_token"] else { return .error("invalid_request", "refresh_token is missing") }
        // With rotation a refresh token is good for one use. Counted before any decision: a token presented again
        // is counted also when its grant was already revoked for another reason (reuse detection does not count
        // that one), since a provider would have revoked the grant for this.
        if settings.rotatesRefreshTokens {
            refreshPresentations[token, default: 0] += 1
            if refreshPresentations[token] == 2, let familyID = refreshIndex[token],
                let user = families[familyID]?.user
            {
                repeatedRefreshTokens[user, default: 0] += 1
            }
        }
        guard let familyID = refreshIndex[token], let family = families[familyID], !family.isRevoked else {
            return .error("invalid_grant", "the refresh token is unknown or revoked")
        }
        // RFC 9449 §5: a bound refresh token is good only with a proof of its key; checked before reuse detection,
        // so that whoever holds a copy without the key cannot end the grant.
        if let bound = family.jkt {
            guard let proof else {
                dpop.unprovenBoundTokens += 1
                return .error("invalid_dpop_proof", "the refresh token is bound to a DPoP key; send a proof of it")
            }
            guard proof.jkt == bound else {
                dpop.proofs[proof.index].refusal = .anotherKey
                return .error("invalid_grant", "the refresh token is bound to another DPoP key")
            }
        }
        guard family.currentRefreshToken == token else {
            // RFC 9700 §4.14.2: a rotated refresh token presented again means two parties hold the grant; end it.
            reuseDetections += 1
            revokeFamily(familyID)
            return .error("invalid_grant", "the refresh token was already used; the grant is revoked")
        }
        if let requested = form["scope"] {
            let granted = Set((family.scope ?? "").split(separator: " "))
            guard Set(requested.split(separator: " ")).isSubset(of: granted) else {
                return .error("invalid_scope", "the requested scope exceeds the grant")
            }
        }
        // An unbound grant's access token is bound to the proof's key when the refresh carries one (RFC 9449 §5).
        return .tokens(
            issue(
                familyID: familyID, newRefreshToken: settings.rotatesRefreshTokens, now: now,
                jkt: family.jkt ?? proof?.jkt))
    }

    private mutating func exchange(
        _ form: [String: String], proof: AcceptedProof?, now: ContinuousClock.Instant
    ) -> Reply {
        guard let code = form["code"] else { return .error("invalid_request", "code is missing") }
        if let used = usedCodes[code] {
            // RFC 6749 §4.1.2: a code used twice revokes what it was exchanged for.
            reuseDetections += 1
            if let familyID = used.familyID { revokeFamily(familyID) }
            return .error("invalid_grant", "the authorization code was already used")
        }
        guard let grant = codes.removeValue(forKey: code) else {
            return .error("invalid_grant", "the authorization code is unknown")
        }
        usedCodes[code] = grant
        guard now < grant.expiresAt else { return .error("invalid_grant", "the authorization code expired") }
        guard form["client_id"] == grant.clientID, form["redirect_uri"] == grant.redirectURI else {
            return .error("invalid_grant", "the code was issued to another client or redirect URI")
        }
        // RFC 7636 §4.6: S256 of the verifier must equal the challenge the authorization request carried.
        guard let verifier = form["code_verifier"], let pkce = try? PKCE(verifier: verifier),
            pkce.challenge == grant.challenge
        else { return .error("invalid_grant", "the PKCE code verifier does not match the challenge") }
        // RFC 9449 §10: a code the authorization request bound to a key (dpop_jkt) is exchanged only with a proof of
        // that key; a server without DPoP ignores the parameter, as any it does not know (RFC 6749 §3.1).
        if settings.dpop, let bound = grant.dpopJKT {
            guard let proof else {
                return .error("invalid_dpop_proof", "the authorization code is bound to a DPoP key; send a proof of it")
            }
            guard proof.jkt == bound else {
                dpop.proofs[proof.index].refusal = .anotherKey
                return .error("invalid_dpop_proof", "the authorization code is bound to another DPoP key (dpop_jkt)")
            }
        }
        let familyID = nextFamilyID
        let issued = startFamily(
            user: grant.user, scope: grant.scope, now: now, authTime: grant.authTime, nonce: grant.nonce,
            jkt: proof?.jkt)
        usedCodes[code]?.familyID = familyID
        return .tokens(issued)
    }

    private mutating func pollDevice(
        _ form: [String: String], jkt: String?, now: ContinuousClock.Instant, wallNow: Date
    ) -> Reply {
        guard let deviceCode = form["device_code"], let grant = devices[deviceCode] else {
            return .error("invalid_grant", "the device code is unknown")
        }
        if now >= grant.expiresAt, case .pending = grant.decision {
            return .error("expired_token", "the device code expired")
        }
        switch grant.decision {
        case .pending: return .error("authorization_pending", "the user has not answered yet")
        case .denied: return .error("access_denied", "the user denied the request")
        case .consumed: return .error("invalid_grant", "the device code was already exchanged")
        case .approved(let user):
            devices[deviceCode]?.decision = .consumed
            // The user signed in on another device a moment ago; the poll that sees it stands in for that time.
            return .tokens(startFamily(user: user, scope: grant.scope, now: now, authTime: wallNow, jkt: jkt))
        }
    }

    // MARK: - Device authorization endpoint

    /// Answers a device authorization request (RFC 8628 §3.2).
    mutating func startDevice(_ form: [String: String], now: ContinuousClock.Instant, verificationURI: URL) -> Reply {
        guard form["client_id"] == settings.clientID else {
            return .error("invalid_client", "unknown client", status: 401)
        }
        let deviceCode = "dc-\(Self.randomPart())"
        var userCode: String
        repeat {
            userCode = Self.makeUserCode()
        } while devices.values.contains { $0.userCode == userCode }
        devices[deviceCode] = DeviceGrant(
            userCode: userCode, scope: form["scope"], expiresAt: now.advanced(by: settings.deviceCodeLifetime))
        let uri = verificationURI.absoluteString
        return Reply(
            status: 200,
            json: #"{"device_code":"\#(deviceCode)","user_code":"\#(userCode)","verification_uri":"\#(uri)","#
                + #""verification_uri_complete":"\#(uri)?user_code=\#(userCode)","#
                + #""expires_in":\#(settings.deviceCodeLifetime.components.seconds),"#
                + #""interval":\#(settings.devicePollingInterval.components.seconds)}"#)
    }

    static func makeUserCode() -> String {
        // RFC 8628 §6.1: letters people do not confuse, no vowels so no words.
        let alphabet = Array("BCDFGHJKLMNPQRSTVWXZ")
        var generator = SystemRandomNumberGenerator()
        let letters = (0..<8).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] }
        return String(letters[0..<4]) + "-" + String(letters[4..<8])
    }

    mutating func decideDevice(userCode: String, _ decision: DeviceGrant.Decision) -> Bool {
        guard let entry = devices.first(where: { $0.value.userCode == userCode }),
            case .pending = entry.value.decision
        else { return false }
        devices[entry.key]?.decision = decision
        return true
    }

    // MARK: - Authorization endpoint

    /// Where the browser goes after an authorization request (RFC 6749 §4.1.2): a redirect with a code or an
    /// error, a 400 for a request that must not be redirected, or `nil` when no decision was queued.
    mutating func authorize(_ query: [String: String], now: ContinuousClock.Instant, wallNow: Date, issuer: String) -> (
        status: Int, location: String?, text: String
    )? {
        guard query["client_id"] == settings.clientID else { return (400, nil, "unknown client") }
        guard let redirectURI = query["redirect_uri"], URL(string: redirectURI)?.scheme != nil else {
            return (400, nil, "invalid redirect_uri")
        }
        authorizationKeyThumbprints.append(query["dpop_jkt"])
        func redirect(_ parameters: [(String, String)]) -> (Int, String?, String) {
            var all = parameters
            if let state = query["state"] { all.append(("state", state)) }
            all.append(("iss", issuer))
            let encoded = all.map { "\($0.0)=\(Self.formEncode($0.1))" }.joined(separator: "&")
            return (302, redirectURI + (redirectURI.contains("?") ? "&" : "?") + encoded, "redirecting")
        }
        guard query["response_type"] == "code" else { return redirect([("error", "unsupported_response_type")]) }
        guard let challenge = query["code_challenge"], query["code_challenge_method"] == "S256" else {
            return redirect([("error", "invalid_request"), ("error_description", "PKCE with S256 is required")])
        }
        guard !authorizationDecisions.isEmpty else { return nil }
        guard let user = authorizationDecisions.removeFirst() else { return redirect([("error", "access_denied")]) }
        let code = "ac-\(Self.randomPart())"
        codes[code] = AuthorizationCode(
            user: user, clientID: settings.clientID, redirectURI: redirectURI, challenge: challenge,
            scope: query["scope"], nonce: query["nonce"], dpopJKT: query["dpop_jkt"], authTime: wallNow,
            expiresAt: now.advanced(by: settings.authorizationCodeLifetime))
        return redirect([("code", code)])
    }

    // MARK: - End-session endpoint

    /// Answers an end-session request (OpenID Connect RP-Initiated Logout 1.0 §2, §3): with an ID token this server
    /// issued as `id_token_hint` and its `client_id`, every grant of the token's user is revoked and the browser
    /// goes to `post_logout_redirect_uri` with `state` (or a page says so, without one); anything else is a 400.
    mutating func endSession(_ query: [String: String]) -> (status: Int, location: String?, text: String) {
        // A hint is accepted expired too (RP-Initiated Logout §2): what matters is that this server issued it.
        guard let hint = query["id_token_hint"], let user = idTokenUsers[hint] else {
            return (400, nil, "id_token_hint is missing or was not issued by this server")
        }
        guard query["client_id"] == settings.clientID else {
            return (400, nil, "client_id is missing or not the ID token's audience")
        }
        let redirectURI = query["post_logout_redirect_uri"]
        if let redirectURI, URL(string: redirectURI)?.scheme == nil {
            return (400, nil, "invalid post_logout_redirect_uri")
        }
        for (id, family) in families where family.user == user { revokeFamily(id) }
        endSessions.append(.init(user: user, postLogoutRedirectURI: redirectURI, state: query["state"]))
        guard let redirectURI else { return (200, nil, "Signed out.") }
        guard let state = query["state"] else { return (302, redirectURI, "redirecting") }
        let separator = redirectURI.contains("?") ? "&" : "?"
        return (302, redirectURI + separator + "state=" + Self.formEncode(state), "redirecting")
    }

    // MARK: - Revocation endpoint

    /// Answers a revocation request (RFC 7009 §2.1, §2.2).
    mutating func revoke(_ form: [String: String]) -> Reply {
        guard form["client_id"] == settings.clientID else {
            return .error("invalid_client", "unknown client", status: 401)
        }
        guard let token = form["token"] else { return .error("invalid_request", "token is missing") }
        if let familyID = refreshIndex[token] {
            revokeFamily(familyID)
        } else if accessIndex[token] != nil {
            guard settings.revokesAccessTokens else {
                return .error("unsupported_token_type", "this server does not revoke access tokens")
            }
            accessIndex[token]?.isRevoked = true
        }
        // An unknown token is answered 200 as well: the client cannot do anything about it (RFC 7009 §2.2).
        return Reply(status: 200, json: nil)
    }

    // MARK: - Encoding

    static func formEncode(_ text: String) -> String {
        let unreserved = CharacterSet(
            charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    /// Decodes `application/x-www-form-urlencoded` text; `nil` when it is not validly encoded or repeats a name
    /// (RFC 6749 §3.2: parameters must not be included more than once).
    static func decodeForm(_ text: String) -> [String: String]? {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decodeComponent(parts[0]), !name.isEmpty,
                let value = decodeComponent(parts.count > 1 ? parts[1] : "")
            else { return nil }
            guard result.updateValue(value, forKey: name) == nil else { return nil }
        }
        return result
    }

    private static func decodeComponent(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        count >= length ? self : String(repeating: "0", count: length - count) + self
    }
}
