import Foundation
import SessionKit

extension MockAuthorizationServer {
    /// A way for an ID token to be wrong, so a test can check that its app refuses it; queued with
    /// ``MockAuthorizationServer/tamperNextIDToken(_:times:)``.
    ///
    /// Each case breaks one check of OpenID Connect Core §3.1.3.7 (or §12.2) and leaves the token otherwise valid,
    /// signed by the server's key unless the case is about the key.
    public enum IDTokenTampering: Sendable, Hashable, CaseIterable {
        /// `sub` names someone else (`not-<user>`). A sign-in takes it for that other user; a refresh of the user's
        /// session is refused as about another account.
        case anotherSubject
        /// `nonce` is not the one the authorization request sent. Only a code exchange checks a nonce.
        case anotherNonce
        /// `iss` is another issuer: the server's issuer with `/other` appended.
        case anotherIssuer
        /// `aud` is another client (`not-<client ID>`).
        case anotherAudience
        /// `exp` passed five minutes ago (and `iat` five minutes before that), beyond a validator's usual leeway.
        case expired
        /// Signed by a key the key set does not publish, under the published key's `kid`: only the signature fails.
        case signedByAnotherKey
    }

    /// A request to the end-session endpoint that signed a user out.
    public struct EndSession: Sendable, Hashable {
        /// Whose grants were revoked: the subject of the `id_token_hint`.
        public var user: String
        /// The `post_logout_redirect_uri` the request carried, if any.
        public var postLogoutRedirectURI: String?
        /// The `state` the request carried, if any.
        public var state: String?

        /// Creates a record of an end-session request.
        ///
        /// - Parameters:
        ///   - user: Whose grants were revoked.
        ///   - postLogoutRedirectURI: The `post_logout_redirect_uri`, if any.
        ///   - state: The `state`, if any.
        public init(user: String, postLogoutRedirectURI: String?, state: String?) {
            self.user = user
            self.postLogoutRedirectURI = postLogoutRedirectURI
            self.state = state
        }
    }

    /// `GET /.well-known/openid-configuration`: the discovery document under ``issuer`` (OpenID Connect Discovery
    /// 1.0 §4), served when ``Configuration/openID`` is on.
    public var openIDConfigurationURL: URL { server.url("/.well-known/openid-configuration") }
    /// `GET /.well-known/oauth-authorization-server`: the RFC 8414 authorization server metadata under ``issuer``
    /// (the issuer has no path, so RFC 8414 §3.1 puts it here), served when ``Configuration/openID`` is on. Whether
    /// it and the discovery document name the revocation endpoint is ``Configuration/revocationEndpointListing``'s.
    public var authorizationServerMetadataURL: URL { server.url("/.well-known/oauth-authorization-server") }
    /// `GET /jwks`: the key set the ID tokens are signed with.
    public var keySetURL: URL { server.url("/jwks") }
    /// `GET /userinfo`: the OpenID Connect UserInfo endpoint, `{"sub":"alice","name":"alice"}` for an active access
    /// token.
    public var openIDUserInfoEndpoint: URL { server.url("/userinfo") }
    /// `GET /logout`: the end-session endpoint (OpenID Connect RP-Initiated Logout 1.0).
    public var endSessionEndpoint: URL { server.url("/logout") }

    /// The `kid` of the key ID tokens are signed with (its RFC 7638 thumbprint), or `nil` when
    /// ``Configuration/openID`` is off.
    public var idTokenKeyID: String? { core.openID?.keyID }

    /// Makes the next `times` ID tokens the server issues wrong in the way `tampering` says, after any tamperings
    /// already queued. Every ID token counts, whatever grant issues it; a token response without one (a scope
    /// without `openid`) leaves the queue as it is.
    ///
    /// A tampered token is not an `id_token_hint` the end-session endpoint accepts.
    ///
    /// - Parameters:
    ///   - tampering: What the tokens get wrong.
    ///   - times: How many tokens in a row.
    public func tamperNextIDToken(_ tampering: IDTokenTampering, times: Int = 1) {
        guard times > 0 else { return }
        core.state.withLock { $0.idTokenTamperings += Array(repeating: tampering, count: times) }
    }

    /// Every request to the end-session endpoint that signed a user out, oldest first.
    public var endSessions: [EndSession] { core.state.withLock { $0.endSessions } }

    /// How many requests reached the end-session endpoint, whatever their fate.
    public var endSessionRequestCount: Int { core.state.withLock { $0.endSessionRequests } }
}
