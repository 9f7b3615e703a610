import Foundation
import SessionKit

extension MockAuthorizationServer {
    /// Why a ``MockAuthorizationServer`` refused a DPoP proof (RFC 9449 §4.3, §7.1), in the order it checks.
    public enum DPoPRefusal: String, Sendable, Hashable, CaseIterable {
        /// More than one `DPoP` header, not a compact JWS, or `jti`, `htm`, `htu` or `iat` missing.
        case malformed
        /// `typ` is not `dpop+jwt`.
        case wrongType
        /// `alg` is not `ES256`, the only algorithm the mock accepts.
        case unsupportedAlgorithm
        /// The header's `jwk` is missing, not a public key, or carries a private member such as `d`.
        case invalidKey
        /// The signature does not verify with the header's key.
        case invalidSignature
        /// `htm` is not the request's method.
        case wrongMethod
        /// `htu` is not the request's URL without query and fragment.
        case wrongTarget
        /// `iat` is more than 60 seconds from the server's wall clock (``Configuration/clock``), either way.
        case staleIssuedAt
        /// `jti` was seen before, in any proof this server received.
        case replayedJTI
        /// Nonces are on (``Configuration/requiresDPoPNonce``) and the proof carries none, or not the current one:
        /// answered with `use_dpop_nonce` and a `DPoP-Nonce` header (RFC 9449 §8, §9).
        case wrongNonce
        /// At a resource: `ath` is not the hash of the access token the request carried.
        case wrongAccessTokenHash
        /// Signed by another key than the one the presented token, or authorization code, is bound to. The token
        /// endpoint answers `invalid_grant` for a bound refresh token and `invalid_dpop_proof` for a code whose
        /// authorization request named another key in `dpop_jkt` (RFC 9449 §10); a resource answers
        /// `invalid_dpop_proof`.
        case anotherKey
    }

    /// A DPoP proof that reached the server, as ``MockAuthorizationServer/dpopProofs`` records it.
    public struct DPoPProofRecord: Sendable, Hashable {
        /// The endpoint the proof came to: ``Endpoint/token``, or ``Endpoint/resource`` for the protected routes and
        /// ``MockAuthorizationServer/checkAccess(_:)``.
        public var endpoint: Endpoint
        /// The proof's `jti` claim, if it had one.
        public var jti: String?
        /// The proof's `htm` claim: the method it was made for.
        public var htm: String?
        /// The proof's `htu` claim: the URL it was made for.
        public var htu: String?
        /// The proof's `iat` claim: when the client says it made it, on the client's wall clock.
        public var issuedAt: Date?
        /// The RFC 7638 thumbprint of the proof's key, once the key could be read.
        public var keyThumbprint: String?
        /// Why the proof was refused, or `nil` when it was accepted.
        public var refusal: DPoPRefusal?
        /// When the request carrying it had arrived (``LocalServer/Request/arrivedAt``).
        public var arrivedAt: ContinuousClock.Instant

        /// Whether the server accepted the proof.
        public var isAccepted: Bool { refusal == nil }

        /// Creates a record.
        ///
        /// - Parameters:
        ///   - endpoint: The endpoint it came to.
        ///   - jti: Its `jti`.
        ///   - htm: Its `htm`.
        ///   - htu: Its `htu`.
        ///   - issuedAt: Its `iat`.
        ///   - keyThumbprint: Its key's thumbprint.
        ///   - refusal: Why it was refused, if it was.
        ///   - arrivedAt: When it arrived.
        public init(
            endpoint: Endpoint, jti: String?, htm: String?, htu: String?, issuedAt: Date?, keyThumbprint: String?,
            refusal: DPoPRefusal?, arrivedAt: ContinuousClock.Instant
        ) {
            self.endpoint = endpoint
            self.jti = jti
            self.htm = htm
            self.htu = htu
            self.issuedAt = issuedAt
            self.keyThumbprint = keyThumbprint
            self.refusal = refusal
            self.arrivedAt = arrivedAt
        }
    }

    /// What the resource server decides about a request's access token (and DPoP proof), from
    /// ``MockAuthorizationServer/checkAccess(_:)``.
    public enum ResourceAccess: Sendable {
        /// The request carries an active token of `user`, with a valid proof when the token is bound.
        case granted(user: String)
        /// The request is refused; the response is the 401 to send, with its `WWW-Authenticate` challenge (RFC 6750
        /// §3, RFC 9449 §7.1) and, for a proof without the current nonce, a `DPoP-Nonce` header.
        case refused(LocalServer.Response)
    }

    /// Every DPoP proof that reached the token endpoint or a resource, in the order the server checked them,
    /// accepted or refused. Empty unless ``Configuration/dpop`` is on.
    public var dpopProofs: [DPoPProofRecord] { core.state.withLock { $0.dpop.proofs } }

    /// The proofs of ``dpopProofs`` whose key has the thumbprint `keyThumbprint` (``/SessionKit/DPoPKey/thumbprint``).
    ///
    /// - Parameter keyThumbprint: The key's RFC 7638 thumbprint.
    /// - Returns: The key's proofs, in the order the server checked them.
    public func dpopProofs(keyThumbprint: String) -> [DPoPProofRecord] {
        core.state.withLock { state in (state.dpop.proofsByKey[keyThumbprint] ?? []).map { state.dpop.proofs[$0] } }
    }

    /// The `dpop_jkt` of every authorization request the authorization endpoint took (one of a known client, with a
    /// redirect URI), in arrival order: the key thumbprint the request bound its code to (RFC 9449 §10), or `nil`
    /// for a request without one. Recorded whether ``Configuration/dpop`` is on or not; only with it on is the code
    /// bound.
    public var authorizationKeyThumbprints: [String?] { core.state.withLock { $0.authorizationKeyThumbprints } }

    /// How many proofs carried a `jti` the server had seen before (each refused as ``DPoPRefusal/replayedJTI``). A
    /// client that makes a fresh proof for every request never causes one.
    public var jtiReplayCount: Int { core.state.withLock { $0.dpop.replays } }

    /// How many requests presented a DPoP-bound token without proving possession of its key: the access token as a
    /// `Bearer` token at a resource, or the refresh token to the token endpoint without a `DPoP` header. A client
    /// that keeps its tokens bound never causes one.
    public var unprovenBoundTokenCount: Int { core.state.withLock { $0.dpop.unprovenBoundTokens } }

    /// The nonce proofs must carry now, or `nil` when ``Configuration/requiresDPoPNonce`` is off.
    public var dpopNonce: String? { core.state.withLock { $0.dpop.nonce } }

    /// Replaces the nonce proofs must carry: proofs with the old one are answered `use_dpop_nonce` and the new one.
    /// Does nothing when ``Configuration/requiresDPoPNonce`` is off.
    public func rotateDPoPNonce() {
        core.state.withLock { state in
            if state.dpop.nonce != nil { state.dpop.nonce = MockAuthorizationState.makeNonce() }
        }
    }

    /// The thumbprint of the DPoP key `token` is bound to, for an access or refresh token this server issued.
    ///
    /// - Parameter token: An access or refresh token.
    /// - Returns: The key's RFC 7638 thumbprint, or `nil` for a bearer token or a token this server never issued.
    public func keyThumbprint(boundTo token: String) -> String? {
        core.state.withLock { $0.binding(of: token) }
    }

    /// Decides about `request` as the protected routes do: an active access token as `Bearer` when it is not bound,
    /// or with ``Configuration/dpop`` on as `DPoP` with a valid proof of the key it is bound to (RFC 9449 §7.1:
    /// `htm`, `htu`, `iat`, a `jti` not seen before, `ath`, the nonce when nonces are on).
    ///
    /// Use it in a test's own route to answer as the mock's resources do:
    ///
    /// ```swift
    /// mock.server.route("GET", "/api/orders") { request in
    ///     switch mock.checkAccess(request) {
    ///     case .granted(let user): .json(#"{"orders":[],"user":"\#(user)"}"#)
    ///     case .refused(let response): response
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter request: A request to one of the test's own routes.
    /// - Returns: The decision; a refusal carries the 401 to send.
    /// - Important: A proof is checked, and its `jti` remembered, on every call: checking one request twice sees its
    ///   proof replayed the second time.
    public func checkAccess(_ request: LocalServer.Request) -> ResourceAccess {
        core.checkAccess(request)
    }
}
