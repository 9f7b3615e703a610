import Foundation
import SessionKit
import Testing

@testable import SessionKitTesting

/// The DPoP transitions of the mock's pure state, as plain function calls on proofs that already passed (or failed)
/// the stateless checks: a `jti` accepted once, the nonce, what a proof binds, and what a bound token needs.
@Suite(.timeLimit(.minutes(1))) struct MockAuthorizationStateDPoPTests {
    static let now = ContinuousClock.now
    static let wallNow = Date(timeIntervalSince1970: 1_800_000_000)

    static func state(nonces: Bool = false) -> MockAuthorizationState {
        var state = MockAuthorizationState(settings: .init(clientID: "app", dpop: true, requiresDPoPNonce: nonces))
        state.users = ["alice": "pw"]
        return state
    }

    static func proof(jkt: String = "key-1", jti: String = UUID().uuidString, nonce: String? = nil, ath: String? = nil)
        -> MockDPoPProof
    {
        MockDPoPProof(
            jti: jti, htm: "POST", htu: "http://mock/token", issuedAt: wallNow, nonce: nonce, ath: ath, jkt: jkt)
    }

    static func password(_ state: inout MockAuthorizationState, proof: MockDPoPProof) -> MockAuthorizationState.Reply {
        state.token(
            ["grant_type": "password", "client_id": "app", "username": "alice", "password": "pw"], proof: proof,
            arrivedAt: now, now: now, wallNow: wallNow)
    }

    static func refresh(_ state: inout MockAuthorizationState, _ token: String, proof: MockDPoPProof?)
        -> MockAuthorizationState.Reply
    {
        let form = ["grant_type": "refresh_token", "client_id": "app", "refresh_token": token]
        guard let proof else { return state.token(form, now: now, wallNow: wallNow) }
        return state.token(form, proof: proof, arrivedAt: now, now: now, wallNow: wallNow)
    }

    @Test func anAcceptedProofBindsWhatTheGrantIssues() throws {
        var state = Self.state()
        let reply = Self.password(&state, proof: Self.proof())
        let issued = try #require(reply.issued)
        #expect(issued.jkt == "key-1")
        #expect(reply.json?.contains(#""token_type":"DPoP""#) == true)
        #expect(state.binding(of: issued.accessToken) == "key-1")
        #expect(state.binding(of: try #require(issued.refreshToken)) == "key-1")
        #expect(state.dpop.proofs.map(\.refusal) == [nil])
        #expect(state.dpop.proofsByKey["key-1"] == [0])
    }

    @Test func aJTIIsAcceptedOnceWhateverTheKey() {
        var state = Self.state()
        _ = Self.password(&state, proof: Self.proof(jti: "j-1"))
        let again = Self.password(&state, proof: Self.proof(jkt: "key-2", jti: "j-1"))
        #expect(again.status == 400 && again.json?.contains("invalid_dpop_proof") == true)
        #expect(state.dpop.replays == 1)
        #expect(state.dpop.proofs.map(\.refusal) == [nil, .replayedJTI])
    }

    @Test func aProofThatFailedAStatelessCheckIsRecordedAndItsJTINotRemembered() {
        var state = Self.state()
        var wrong = Self.proof(jti: "j-1")
        wrong.refusal = .wrongTarget
        #expect(Self.password(&state, proof: wrong).json?.contains("invalid_dpop_proof") == true)
        #expect(Self.password(&state, proof: Self.proof(jti: "j-1")).status == 200)
        #expect(state.dpop.proofs.map(\.refusal) == [.wrongTarget, nil])
        #expect(state.dpop.replays == 0)
    }

    @Test func withNoncesAProofWithoutTheCurrentOneIsAskedForIt() throws {
        var state = Self.state(nonces: true)
        let nonce = try #require(state.dpop.nonce)
        let refused = Self.password(&state, proof: Self.proof())
        #expect(refused.status == 400 && refused.json?.contains(#""error":"use_dpop_nonce""#) == true)
        #expect(refused.headers["DPoP-Nonce"] == nonce)
        #expect(Self.password(&state, proof: Self.proof(nonce: nonce)).status == 200)
        #expect(state.dpop.proofs.map(\.refusal) == [.wrongNonce, nil])
    }

    @Test func aBoundRefreshTokenNeedsAProofOfItsKey() throws {
        var state = Self.state()
        let token = try #require(Self.password(&state, proof: Self.proof()).issued?.refreshToken)
        let unproven = Self.refresh(&state, token, proof: nil)
        #expect(unproven.json?.contains(#""error":"invalid_dpop_proof""#) == true)
        #expect(state.dpop.unprovenBoundTokens == 1)
        let another = Self.refresh(&state, token, proof: Self.proof(jkt: "key-2"))
        #expect(another.json?.contains(#""error":"invalid_grant""#) == true)
        #expect(state.dpop.proofs.last?.refusal == .anotherKey)
        // Neither ended the grant: no reuse was detected, and the right key still refreshes.
        #expect(state.reuseDetections == 0)
        let refreshed = try #require(Self.refresh(&state, token, proof: Self.proof()).issued)
        #expect(refreshed.jkt == "key-1")
    }

    @Test func aResourceAcceptsABoundTokenOnlyWithAProofOfItsKeyAndItsHash() throws {
        var state = Self.state()
        let token = try #require(Self.password(&state, proof: Self.proof()).issued?.accessToken)
        let ath = MockDPoPProof.accessTokenHash(token)
        func access(_ scheme: String?, _ proof: MockDPoPProof?) -> MockAuthorizationState.ResourceDecision {
            state.resourceAccess(scheme: scheme, token: token, proof: proof, arrivedAt: Self.now, now: Self.now)
        }
        #expect(access("bearer", nil) == .refused(scheme: "DPoP", error: "invalid_token"))
        #expect(access("dpop", nil) == .refused(scheme: "DPoP", error: "invalid_dpop_proof"))
        #expect(state.dpop.unprovenBoundTokens == 2)
        #expect(access("dpop", Self.proof(ath: "other")) == .refused(scheme: "DPoP", error: "invalid_dpop_proof"))
        #expect(
            access("dpop", Self.proof(jkt: "key-2", ath: ath)) == .refused(scheme: "DPoP", error: "invalid_dpop_proof"))
        #expect(access("dpop", Self.proof(ath: ath)) == .granted(user: "alice"))
        #expect(state.dpop.proofs.suffix(3).map(\.refusal) == [.wrongAccessTokenHash, .anotherKey, nil])
        #expect(access(nil, nil) == .refused(scheme: "Bearer", error: nil))
    }
}
