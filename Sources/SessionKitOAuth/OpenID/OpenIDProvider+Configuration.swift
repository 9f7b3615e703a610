import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension OpenIDProvider {
    /// Where the provider is and how this client uses it.
    public struct Configuration: Sendable {
        /// The issuer identifier: `https` (plain `http` only to a loopback host), without query or fragment.
        public var issuer: URL
        /// The client identifier.
        public var clientID: String
        /// How the client authenticates at the token endpoint; ``ClientAuthentication/none`` for a public client.
        public var clientAuthentication: ClientAuthentication
        /// The rules ID tokens are validated by.
        public var validation: IDTokenValidation
        /// The device authorization endpoint, for a provider whose discovery document does not name one; `nil`
        /// takes the document's `device_authorization_endpoint`.
        public var deviceAuthorizationEndpoint: URL?
        /// The revocation endpoint (RFC 7009), for a provider whose metadata names none or the wrong one: it wins
        /// over both. `nil` takes the discovery document's `revocation_endpoint`, else the one the provider's RFC 8414
        /// authorization server metadata names; with neither, ``OpenIDProvider/revoke(_:hint:)`` throws
        /// ``SessionError/Code/noRevocationEndpoint`` (sign-out reports ``SignOutReport/StepOutcome/noEndpoint``).
        public var revocationEndpoint: URL?
        /// Whether sign-ins ask for DPoP-bound tokens (RFC 9449, ``OAuthClient/Configuration/usesDPoP``): `nil`
        /// (the default) when the provider's metadata lists ES256 in `dpop_signing_alg_values_supported`.
        ///
        /// An authorization request of a sign-in with DPoP binds the code to its key with `dpop_jkt` (RFC 9449 §10)
        /// only when the metadata lists ES256, whatever this says
        /// (``OAuthClient/Configuration/bindsAuthorizationCodeToDPoPKey``).
        public var usesDPoP: Bool?
        /// RFC 8707 resource indicators for the client's requests (``OAuthClient/Configuration/resources``).
        public var resources: [URL]
        /// The `audience` parameter (``OAuthClient/Configuration/audience``).
        public var audience: String?
        /// How long a discovery document is used before it is fetched again; one hour by default.
        public var metadataLifetime: Duration
        /// How long a key set is used before it is fetched again; one hour by default.
        public var keySetLifetime: Duration
        /// The least time between two fetches of the key set made because a token named an unknown `kid`.
        public var minimumKeyRefetchInterval: Duration
        /// The wall-clock deadline of each HTTP exchange with the provider.
        public var requestTimeout: Duration
        /// The clock of the caches, of token expiry and of device polling.
        public var clock: any SessionClock
        /// How old a logout token's `iat` may be on the provider's clock, beyond the leeway, for
        /// ``OpenIDProvider/validate(logoutToken:)``: five minutes by default. A provider sends its logout token when
        /// the user's session ends there; an older one is a replay or a delivery too late to trust.
        public var logoutTokenMaximumAge: Duration = .seconds(300)

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - issuer: The issuer identifier.
        ///   - clientID: The client identifier.
        ///   - clientAuthentication: How the client authenticates; none by default.
        ///   - validation: ID token rules; RS256 and a one-minute leeway by default.
        ///   - deviceAuthorizationEndpoint: The device authorization endpoint, where discovery names none.
        ///   - revocationEndpoint: The revocation endpoint, which wins over the provider's metadata; `nil` takes it
        ///     from the metadata.
        ///   - usesDPoP: Whether to ask for DPoP-bound tokens; `nil` follows the provider's metadata.
        ///   - resources: Resource indicators; none by default.
        ///   - audience: The `audience` parameter; none by default.
        ///   - metadataLifetime: How long discovery is cached; one hour by default.
        ///   - keySetLifetime: How long the key set is cached; one hour by default.
        ///   - minimumKeyRefetchInterval: The least time between refetches for an unknown `kid`; one minute by
        ///     default.
        ///   - requestTimeout: The deadline of each exchange; 30 seconds by default.
        ///   - clock: The clock; `nil` reads the system's clocks.
        public init(
            issuer: URL,
            clientID: String,
            clientAuthentication: ClientAuthentication = .none,
            validation: IDTokenValidation = IDTokenValidation(),
            deviceAuthorizationEndpoint: URL? = nil,
            revocationEndpoint: URL? = nil,
            usesDPoP: Bool? = nil,
            resources: [URL] = [],
            audience: String? = nil,
            metadataLifetime: Duration = .seconds(3600),
            keySetLifetime: Duration = .seconds(3600),
            minimumKeyRefetchInterval: Duration = .seconds(60),
            requestTimeout: Duration = .seconds(30),
            clock: (any SessionClock)? = nil
        ) {
            self.issuer = issuer
            self.clientID = clientID
            self.clientAuthentication = clientAuthentication
            self.validation = validation
            self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
            self.revocationEndpoint = revocationEndpoint
            self.usesDPoP = usesDPoP
            self.resources = resources
            self.audience = audience
            self.metadataLifetime = metadataLifetime
            self.keySetLifetime = keySetLifetime
            self.minimumKeyRefetchInterval = minimumKeyRefetchInterval
            self.requestTimeout = requestTimeout
            self.clock = clock ?? SystemClock()
        }
    }
}
