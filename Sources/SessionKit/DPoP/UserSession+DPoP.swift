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
    ///   - tokenHash: The token's `ath`, when the caller has it already (``Credential``).
    ///   - nonce: The origin's last nonce, read from the lifetime with the credential
    ///     (``Lifetime/nonce(for:of:)``).
    /// - Throws: `SessionError(.invalidInput)` when no proof can be made for the request's URL.
    func applyCredential(
        to request: inout URLRequest, token: String, proofKey: DPoPKey?, tokenHash: String? = nil, nonce: String?
    ) throws {
        guard let proofKey else {
            // A `DPoP` field the app set itself on a bearer session is the app's, as on every other request.
            request.setFieldValues([("Authorization", "Bearer \(token)")])
            return
        }
        guard let url = request.url else { throw SessionError(.invalidInput, "the request has no URL") }
        let proof = try DPoPProof.make(
            key: proofKey, method: HTTPMethod.of(request), url: url,
            accessTokenHash: tokenHash ?? DPoPProof.tokenHash(token), nonce: nonce, now: configuration.clock.wallNow)
        request.setFieldValues([("Authorization", "DPoP \(token)"), ("DPoP", proof)])
    }
}
