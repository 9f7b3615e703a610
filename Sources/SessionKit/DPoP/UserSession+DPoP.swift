import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Sets the credential on `request`: `Authorization: Bearer <token>`, or for tokens bound to a DPoP key
    /// `Authorization: DPoP <token>` and a fresh proof for this request's method and URL, with `ath` and the
    /// origin's last nonce (RFC 9449 §7). A bound token is never sent as a bearer token.
    ///
    /// - Parameters:
    ///   - request: The request, as it is about to be sent.
    ///   - token: The access token.
    ///   - proofKey: The session's DPoP key, when the token is bound to it.
    ///   - tokenHash: The token's `ath`, when the caller has it already (``Lifetime/Credential``).
    /// - Throws: `SessionError(.invalidInput)` when no proof can be made for the request's URL.
    func applyCredential(
        to request: inout URLRequest, token: String, proofKey: DPoPKey?, tokenHash: String? = nil
    ) throws {
        guard let proofKey else {
            // A `DPoP` field the app set itself on a bearer session is the app's, as on every other request.
            request.setFieldValues([("Authorization", "Bearer \(token)")])
            return
        }
        guard let url = request.url else { throw SessionError(.invalidInput, "the request has no URL") }
        // Most servers never send a nonce: then the URL's origin need not be worked out for each request.
        let nonce =
            dpopNonces.withLock(\.isEmpty) ? nil : Origin(url).flatMap { origin in dpopNonces.withLock { $0[origin] } }
        let proof = try DPoPProof.make(
            key: proofKey, method: HTTPMethod.of(request), url: url,
            accessTokenHash: tokenHash ?? DPoPProof.tokenHash(token), nonce: nonce, now: configuration.clock.wallNow)
        request.setFieldValues([("Authorization", "DPoP \(token)"), ("DPoP", proof)])
    }

    /// Keeps a response's `DPoP-Nonce` for its origin (RFC 9449 §9), and says whether the response refused the
    /// proof for its nonce (`401` with `WWW-Authenticate: DPoP error="use_dpop_nonce"`) and gave a new one.
    func noteDPoPNonce(of response: HTTPURLResponse, for url: URL?) -> Bool {
        guard let nonce = response.value(forHTTPHeaderField: "DPoP-Nonce"), !nonce.isEmpty,
            let origin = url.flatMap(Origin.init)
        else { return false }
        dpopNonces.withLock { $0[origin] = nonce }
        return response.statusCode == 401
            && DPoPProof.asksForNonce(response.value(forHTTPHeaderField: "WWW-Authenticate"))
    }
}
