import SessionKitOAuth

/// An authorization server client that accounts sign in through: where their sessions refresh and where sign-out
/// revokes their tokens.
///
/// A refresh token belongs to the client it was issued to: presented by another client, even of the same server,
/// it is refused (`invalid_grant`) and the account is signed out for nothing. So a manager that holds accounts from
/// several issuers, or from several clients of one issuer (an app's code-grant client and its device-grant client),
/// names each client as a provider, and each sign-in says which one it went through. The manager stores the
/// provider's ``id`` with the account's credentials, and every later refresh and revocation of that account, after
/// a restart too, goes to that provider and no other.
///
/// ```swift
/// let manager = SessionManager(configuration: .init(
///     store: store,
///     providers: [
///         Provider(id: "work", issuer: "https://login.work.example", client: workClient),
///         Provider(id: "personal", issuer: "https://id.mail.example", client: personalClient),
///     ]))
/// try await manager.signIn(through: "work") { try await signInAtWork() }
/// ```
///
/// The configuration's own ``SessionManager/Configuration/tokenEndpoint`` and ``SessionManager/Configuration/revoker``
/// are the default provider: used by sign-ins that name none, and by records stored without a provider.
public struct Provider: Sendable, Identifiable {
    /// A provider's name, stored with each account's credentials: keep it stable across releases.
    public struct ID: Hashable, Sendable, Codable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// The name.
        public let rawValue: String

        /// Creates a provider name.
        ///
        /// - Parameter rawValue: The name.
        public init(_ rawValue: String) {
            self.rawValue = rawValue
        }

        /// Creates a provider name from a literal.
        ///
        /// - Parameter value: The name.
        public init(stringLiteral value: String) {
            self.rawValue = value
        }

        /// Decodes the name from a single string.
        ///
        /// - Parameter decoder: The decoder.
        /// - Throws: `DecodingError` when the value is not a string.
        public init(from decoder: any Decoder) throws {
            self.rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        /// Encodes the name as a single string.
        ///
        /// - Parameter encoder: The encoder.
        /// - Throws: What the encoder throws.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }

        /// The name.
        public var description: String { rawValue }
    }

    /// The provider's name.
    public var id: ID
    /// The issuer whose accounts sign in through this provider, if the app says so: a sign-in through it of an
    /// account of another issuer is refused (`invalidInput`, nothing stored), and so is a stored record that pairs
    /// the two. `nil` accepts any account.
    public var issuer: String?
    /// Where sessions of its accounts refresh; `nil` means a 401 cannot be recovered.
    public var tokenEndpoint: (any TokenEndpoint)?
    /// How sign-out revokes its accounts' tokens; `nil` means it does not.
    public var revoker: (any TokenRevoker)?

    /// Creates a provider from a token endpoint and a revoker.
    ///
    /// - Parameters:
    ///   - id: Its name, stored with each account's credentials.
    ///   - issuer: The issuer of its accounts, if it is to be checked.
    ///   - tokenEndpoint: The refresh client.
    ///   - revoker: The revocation client.
    public init(
        id: ID, issuer: String? = nil, tokenEndpoint: (any TokenEndpoint)?, revoker: (any TokenRevoker)? = nil
    ) {
        self.id = id
        self.issuer = issuer
        self.tokenEndpoint = tokenEndpoint
        self.revoker = revoker
    }

    /// Creates a provider whose refreshes and revocations go through one ``OAuthClient``.
    ///
    /// - Parameters:
    ///   - id: Its name, stored with each account's credentials.
    ///   - issuer: The issuer of its accounts, if it is to be checked.
    ///   - client: The client that refreshes and revokes.
    public init(id: ID, issuer: String? = nil, client: OAuthClient) {
        self.init(id: id, issuer: issuer, tokenEndpoint: client, revoker: client)
    }

    /// Creates a provider for an OpenID Connect provider's client: its accounts are of its issuer, and every refresh
    /// validates the refreshed ID token and refuses one about someone else (OpenID Connect Core §12.2).
    ///
    /// - Parameters:
    ///   - id: Its name, stored with each account's credentials.
    ///   - openID: The OpenID provider's client.
    public init(id: ID, openID: OpenIDProvider) {
        self.init(
            id: id, issuer: openID.configuration.issuer.absoluteString, tokenEndpoint: openID, revoker: openID)
    }
}
