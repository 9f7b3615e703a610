import Foundation
import SessionKit

extension MockAuthorizationState {
    /// What the server remembers of DPoP (RFC 9449): the `jti`s it accepted, every proof it checked, its nonce.
    struct DPoPState {
        /// The nonce proofs must carry, when nonces are on (RFC 9449 §8, §9).
        var nonce: String?
        /// Every `jti` of a proof that passed the stateless checks: none is accepted twice (§11.1).
        var seenJTIs: Set<String> = []
        var proofs: [MockAuthorizationServer.DPoPProofRecord] = []
        /// Indices into `proofs`, per key thumbprint.
        var proofsByKey: [String: [Int]] = [:]
        var replays = 0
        var unprovenBoundTokens = 0
    }

    /// A proof the server accepted, for the request it came with: where its record is, and its key.
    struct AcceptedProof: Equatable {
        let index: Int
        let jkt: String
    }

    /// What a resource decides about a request.
    enum ResourceDecision: Equatable {
        case granted(user: String)
        /// A 401 with a challenge of `scheme` and, unless `nil`, `error`; `nonce` is sent as `DPoP-Nonce`.
        case refused(scheme: String, error: String?, nonce: String? = nil)
    }

    static func makeNonce() -> String { "nonce-\(randomPart())" }

    /// The DPoP key thumbprint `token` is bound to: an access token's own, or a refresh token's grant's.
    func binding(of token: String) -> String? {
        if let entry = accessIndex[token] { return entry.jkt }
        return refreshIndex[token].flatMap { families[$0]?.jkt }
    }

    /// Records `proof`, after the checks that need the state: a `jti` not seen before, then the current nonce.
    ///
    /// - Returns: The record's index, and why the proof is refused (`nil` when it is accepted so far).
    mutating func admit(
        _ proof: MockDPoPProof, at endpoint: MockAuthorizationServer.Endpoint, arrivedAt: ContinuousClock.Instant
    ) -> (index: Int, refusal: MockAuthorizationServer.DPoPRefusal?) {
        var refusal = proof.refusal
        if refusal == nil, let jti = proof.jti, !dpop.seenJTIs.insert(jti).inserted {
            dpop.replays += 1
            refusal = .replayedJTI
        }
        if refusal == nil, let nonce = dpop.nonce, proof.nonce != nonce { refusal = .wrongNonce }
        let index = dpop.proofs.count
        dpop.proofs.append(
            .init(
                endpoint: endpoint, jti: proof.jti, htm: proof.htm, htu: proof.htu, issuedAt: proof.issuedAt,
                keyThumbprint: proof.jkt, refusal: refusal, arrivedAt: arrivedAt))
        if let jkt = proof.jkt { dpop.proofsByKey[jkt, default: []].append(index) }
        return (index, refusal)
    }

    /// Answers a token request that carried a DPoP proof (RFC 9449 §5, §8): a refused proof is `invalid_dpop_proof`
    /// (or `use_dpop_nonce` with the nonce); an accepted one binds what the grant issues to its key.
    mutating func token(
        _ form: [String: String], proof: MockDPoPProof, arrivedAt: ContinuousClock.Instant,
        now: ContinuousClock.Instant, wallNow: Date
    ) -> Reply {
        let (index, refusal) = admit(proof, at: .token, arrivedAt: arrivedAt)
        switch refusal {
        case nil:
            guard let jkt = proof.jkt else { return .error("invalid_dpop_proof", "the proof has no key") }
            return token(form, proof: AcceptedProof(index: index, jkt: jkt), now: now, wallNow: wallNow)
        case .wrongNonce?:
            var reply = Reply.error("use_dpop_nonce", "the DPoP proof must carry the server's nonce")
            reply.headers["DPoP-Nonce"] = dpop.nonce
            return reply
        case let refusal?:
            return .error("invalid_dpop_proof", "the DPoP proof was refused: \(refusal.rawValue)")
        }
    }

    /// Decides about a request to a resource with DPoP on (RFC 9449 §7): an unbound access token as `Bearer`, or a
    /// bound one as `DPoP` with an accepted proof whose `ath` is the token's hash and whose key is the token's.
    ///
    /// - Parameters:
    ///   - scheme: The `Authorization` scheme, lowercased, if the request had one.
    ///   - token: The token it carried.
    ///   - proof: The request's DPoP proof, checked, if it carried one.
    ///   - arrivedAt: When the request arrived.
    ///   - now: The server's monotonic time, for token expiry.
    /// - Returns: The user, or why the request is refused.
    mutating func resourceAccess(
        scheme: String?, token: String?, proof: MockDPoPProof?, arrivedAt: ContinuousClock.Instant,
        now: ContinuousClock.Instant
    ) -> ResourceDecision {
        guard let scheme, let token else { return .refused(scheme: "Bearer", error: nil) }
        if scheme == "bearer" {
            // RFC 9449 §7.2: a bound token is never accepted as a bearer token.
            if accessIndex[token]?.jkt != nil {
                dpop.unprovenBoundTokens += 1
                return .refused(scheme: "DPoP", error: "invalid_token")
            }
            return accessTokenUser(token, now: now).map { .granted(user: $0) }
                ?? .refused(scheme: "Bearer", error: "invalid_token")
        }
        guard let proof else {
            if accessIndex[token]?.jkt != nil { dpop.unprovenBoundTokens += 1 }
            return .refused(scheme: "DPoP", error: "invalid_dpop_proof")
        }
        let (index, refusal) = admit(proof, at: .resource, arrivedAt: arrivedAt)
        switch refusal {
        case nil: break
        case .wrongNonce?: return .refused(scheme: "DPoP", error: "use_dpop_nonce", nonce: dpop.nonce)
        case _?: return .refused(scheme: "DPoP", error: "invalid_dpop_proof")
        }
        guard proof.ath == MockDPoPProof.accessTokenHash(token) else {
            dpop.proofs[index].refusal = .wrongAccessTokenHash
            return .refused(scheme: "DPoP", error: "invalid_dpop_proof")
        }
        // An unbound token under the DPoP scheme is refused as well: nothing binds it to the proof's key.
        guard let user = accessTokenUser(token, now: now), let bound = accessIndex[token]?.jkt else {
            return .refused(scheme: "DPoP", error: "invalid_token")
        }
        guard proof.jkt == bound else {
            dpop.proofs[index].refusal = .anotherKey
            return .refused(scheme: "DPoP", error: "invalid_dpop_proof")
        }
        return .granted(user: user)
    }
}
