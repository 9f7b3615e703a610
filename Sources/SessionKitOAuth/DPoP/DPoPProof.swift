import Foundation

/// Makes DPoP proofs (RFC 9449 §4.2): a JWT of type `dpop+jwt`, signed ES256 with the session's key, whose header
/// carries the public key and whose claims bind it to one request.
package enum DPoPProof {
    /// A proof for a request of `method` to `url`.
    ///
    /// - Parameters:
    ///   - key: The session's key.
    ///   - method: The HTTP method, as sent (`htm`).
    ///   - url: The request's URL; `htu` is it without query and fragment (§4.2).
    ///   - accessToken: The access token the request carries, for `ath` (§4.2, resource requests); `nil` for a
    ///     token request.
    ///   - nonce: The server's last `DPoP-Nonce` for the URL's origin, if any (§8, §9).
    ///   - now: The wall-clock time of `iat`.
    /// - Returns: The compact JWS.
    /// - Throws: `SessionError(.invalidInput)` for a URL without scheme or host, or a signing failure.
    package static func make(
        key: DPoPKey, method: String, url: URL, accessToken: String?, nonce: String?, now: Date
    ) throws -> String {
        try make(
            key: key, method: method, url: url, accessTokenHash: accessToken.map(tokenHash), nonce: nonce, now: now)
    }

    /// The same with `ath` worked out already (``tokenHash(_:)``): a session does it once per access token rather
    /// than once per request.
    package static func make(
        key: DPoPKey, method: String, url: URL, accessTokenHash: String?, nonce: String?, now: Date
    ) throws -> String {
        guard let htu = targetURI(of: url) else {
            throw SessionError(.invalidInput, "a DPoP proof needs an absolute http(s) URL")
        }
        do {
            let claims = serializedClaims(
                accessTokenHash: accessTokenHash, method: method, targetURI: htu,
                issuedAt: now.timeIntervalSince1970.rounded(.down), identifier: try key.signingKey.identifier(),
                nonce: nonce)
            return try CompactJWS.signed(encodedHeader: key.proofHeader, serializedClaims: claims, with: key.signingKey)
        } catch {
            throw SessionError(.invalidInput, "the DPoP proof could not be signed: \(error)")
        }
    }

    /// `ath` (RFC 9449 §4.2): base64url of the SHA-256 of the access token's ASCII.
    package static func tokenHash(_ accessToken: String) -> String {
        Base64URL.encode(PlatformCrypto.sha256(Array(accessToken.utf8)))
    }

    /// A proof's claims as compact JSON, written straight into bytes: the members in name order, each string
    /// quoted as ``JSONValue`` quotes it, so the text is the one `JSONValue.object(claims).serialized` gives (a test
    /// compares them) without building and sorting a dictionary on every request.
    package static func serializedClaims(
        accessTokenHash: String?, method: String, targetURI: String, issuedAt: Double, identifier: [UInt8],
        nonce: String?
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(200 + targetURI.utf8.count + (nonce?.utf8.count ?? 0))
        bytes.append(UInt8(ascii: "{"))
        if let accessTokenHash {
            bytes += #""ath":"#.utf8
            JSONValue.appendQuoted(accessTokenHash, to: &bytes)
            bytes.append(UInt8(ascii: ","))
        }
        bytes += #""htm":"#.utf8
        JSONValue.appendQuoted(method, to: &bytes)
        bytes += #","htu":"#.utf8
        JSONValue.appendQuoted(targetURI, to: &bytes)
        bytes += #","iat":"#.utf8
        bytes += JSONValue.number(issuedAt).serialized.utf8
        bytes += #","jti":""#.utf8
        Base64URL.encode(identifier, appendingTo: &bytes)
        bytes.append(UInt8(ascii: "\""))
        if let nonce {
            bytes += #","nonce":"#.utf8
            JSONValue.appendQuoted(nonce, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// `url` without query and fragment, the form `htu` takes (RFC 9449 §4.2, §4.3 item 9).
    package static func targetURI(of url: URL) -> String? {
        plainTargetURI(url.absoluteString) ?? targetURIByComponents(of: url)
    }

    /// The target URI of the common URL, cut out of its text: a lower-case `http`, `https`, `ws` or `wss` scheme,
    /// then `//` and an authority without user information or upper case; `nil` for any other URL, which
    /// ``targetURIByComponents(of:)`` takes. A proof goes with every request, and `URLComponents` on Linux costs
    /// more than the proof's signature; both give the same answer where this one answers (a test compares them).
    package static func plainTargetURI(_ text: String) -> String? {
        let utf8 = text.utf8
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let scheme: String
        switch Substring(text.utf8[..<colon]) {
        case "http", "ws": scheme = "http"
        case "https", "wss": scheme = "https"
        default: return nil
        }
        let afterColon = utf8.index(after: colon)
        guard utf8[afterColon...].starts(with: "//".utf8) else { return nil }
        let authorityStart = utf8.index(afterColon, offsetBy: 2)
        let authorityEnd =
            utf8[authorityStart...].firstIndex {
                $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
            } ?? utf8.endIndex
        let authority = utf8[authorityStart..<authorityEnd]
        guard !authority.isEmpty,
            !authority.contains(where: {
                $0 == UInt8(ascii: "@") || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
            })
        else { return nil }
        let pathEnd =
            utf8[authorityEnd...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? utf8.endIndex
        let path = utf8[authorityEnd..<pathEnd]
        return scheme + "://" + String(Substring(authority)) + (path.isEmpty ? "/" : String(Substring(path)))
    }

    /// The same for any URL, through `URLComponents`.
    package static func targetURIByComponents(of url: URL) -> String? {
        // A WebSocket's handshake is an HTTP GET of the same resource (RFC 6455 §3): its proof names that URL.
        let schemes = ["http": "http", "https": "https", "ws": "http", "wss": "https"]
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme.flatMap({ schemes[$0.lowercased()] }), components.host != nil
        else { return nil }
        components.query = nil
        components.fragment = nil
        components.scheme = scheme
        // RFC 3986 §6.2.2.1: the host is case-insensitive; its normal form is lower case. Foundation on Linux keeps
        // the case the URL was written in, so a server comparing `htu` exactly would refuse the proof.
        if let host = components.host, host != host.lowercased() { components.host = host.lowercased() }
        if components.path.isEmpty { components.path = "/" }
        return components.url?.absoluteString
    }

    /// Whether a `WWW-Authenticate` value is a DPoP challenge with `error="use_dpop_nonce"` (RFC 9449 §9).
    package static func asksForNonce(_ challenge: String?) -> Bool {
        guard let challenge else { return false }
        return AuthenticationChallengeParser.challenges(in: challenge).contains { parsed in
            parsed.scheme.lowercased() == "dpop" && parsed.parameters["error"] == "use_dpop_nonce"
        }
    }
}
