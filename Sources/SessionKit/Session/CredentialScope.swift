import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Where a session's credentials may go: the origins that receive its token, plain HTTP, the header fields the
    /// app marks as credentials, and what a redirect from `https` to `http` does.
    ///
    /// Three rules hold whatever the scope says:
    /// - A redirect to another origin (scheme, host or port differ, RFC 6454) is followed without `Authorization`,
    ///   `Proxy-Authorization`, `Cookie`, `DPoP` or any of ``credentialHeaderFields``; the next origin gets only the
    ///   cookies the session's cookie store holds for it. Once a redirect chain has left the request's origin, no
    ///   later hop carries the token, not even one back to that origin: its address came from a third party.
    /// - A same-origin redirect carries the session's token, attached afresh by SessionKit at that hop (after a
    ///   refresh in between, the new one).
    /// - A redirect from `https` to `http` is refused with ``SessionError/Code/insecureTransport``, unless
    ///   ``followsInsecureRedirects`` is set, and then followed without credentials.
    ///
    /// A request to an origin the scope does not serve is **refused** with ``SessionError/Code/originNotServed``,
    /// not sent bare: a session's requests are its user's, and a URL the app did not mean to send the token to (an
    /// image on a CDN, a link inside a JSON answer) is a bug to see at once, not a silent 401. Fetch such URLs with
    /// a `URLSession` of your own.
    ///
    /// By default (``origins`` `nil`) every `https` origin and the loopback interface receive the token, so that an
    /// app adopting SessionKit keeps working unchanged; name your API's origins to close the rest:
    ///
    /// ```swift
    /// var configuration = UserSession.Configuration()
    /// configuration.credentialScope = .only([Origin("https://api.example.com")!, Origin("https://upload.example.com")!])
    /// ```
    public struct CredentialScope: Sendable, Hashable {
        /// The origins that receive the token; `nil` for every `https` origin and every loopback one (`http` too).
        public var origins: Set<Origin>?
        /// `http` origins beyond the loopback interface that receive the token over plain HTTP (a test
        /// environment's, say); they are served even when ``origins`` does not list them. Plain HTTP to any other
        /// host is refused with ``SessionError/Code/insecureTransport``: anyone on the path could read the token.
        public var plainHTTPOrigins: Set<Origin>
        /// Header fields of the app's own that carry credentials (an `X-API-Key`, say): removed, like
        /// `Authorization` and `Cookie`, when a redirect leaves the request's origin. Compared case-insensitively.
        public var credentialHeaderFields: Set<String>
        /// Whether a redirect from `https` to `http` is followed, without any credential, instead of refused.
        public var followsInsecureRedirects: Bool

        /// Creates a scope.
        ///
        /// - Parameters:
        ///   - origins: The origins that receive the token; `nil` for every `https` and loopback origin.
        ///   - plainHTTPOrigins: `http` origins beyond loopback that may receive it.
        ///   - credentialHeaderFields: The app's own credential header fields.
        ///   - followsInsecureRedirects: Whether an `https` to `http` redirect is followed bare.
        public init(
            origins: Set<Origin>? = nil,
            plainHTTPOrigins: Set<Origin> = [],
            credentialHeaderFields: Set<String> = [],
            followsInsecureRedirects: Bool = false
        ) {
            self.origins = origins
            self.plainHTTPOrigins = plainHTTPOrigins
            self.credentialHeaderFields = credentialHeaderFields
            self.followsInsecureRedirects = followsInsecureRedirects
        }

        /// A scope whose token goes to `origins` only.
        public static func only(_ origins: Set<Origin>) -> CredentialScope {
            CredentialScope(origins: origins)
        }

        /// Why `url` may not receive the session's token, or `nil` when it may.
        ///
        /// The rule, in order: `url` must have an origin (`http`, `https`, `ws` or `wss`, with a host); plain HTTP
        /// only to loopback or to ``plainHTTPOrigins``; and, when ``origins`` is set, one of them (or of
        /// ``plainHTTPOrigins``).
        package func refusal(of url: URL?) -> SessionError? {
            guard let url, let origin = Origin(url) else {
                return SessionError(
                    .invalidInput, "a session sends requests to http(s) and ws(s) URLs with a host only")
            }
            let namedPlain = !origin.isSecure && plainHTTPOrigins.contains(origin)
            if !origin.isSecure, !origin.isLoopback, !namedPlain {
                return SessionError(
                    .insecureTransport,
                    "the session's token is sent over https only, and \(origin) is plain HTTP (loopback hosts "
                        + "excepted; name the origin in CredentialScope.plainHTTPOrigins to allow it)")
            }
            if let origins, !origins.contains(origin), !namedPlain {
                return SessionError(
                    .originNotServed,
                    "\(origin) is not among the origins this session sends its token to "
                        + "(UserSession.Configuration.credentialScope)")
            }
            return nil
        }

        /// The header fields removed from a request when a redirect leaves its origin, lowercased.
        package var strippedFields: Set<String> {
            Self.credentialFields.union(credentialHeaderFields.map { $0.lowercased() })
        }

        /// The fields SessionKit always treats as credentials: the token, a proxy's credentials, the cookies the
        /// app set by hand (the cookie store adds the next origin's own), and a DPoP proof.
        package static let credentialFields: Set<String> = ["authorization", "proxy-authorization", "cookie", "dpop"]
    }
}
