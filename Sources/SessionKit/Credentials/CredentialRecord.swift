import Foundation
import SessionKitOAuth

/// What a ``CredentialStore`` keeps for one account: the least a restore after a restart needs.
///
/// By default that is the refresh token, the scope and the token type; the access token and the ID token are kept
/// in memory only. ``UserSession/Configuration/storesAccessToken`` (requests offline right after launch) and a
/// store shared between processes add the access token with its wall-clock expiry;
/// ``UserSession/Configuration/storesIDToken`` adds the ID token; DPoP-bound tokens add their key. The table in
/// <doc:GettingStarted#What-is-stored> is the whole list. Passwords are never stored.
///
/// - Important: The description redacts every token.
public struct CredentialRecord: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The format version this build writes; a record of another version is refused as corrupt.
    package static let currentVersion = 1

    /// The record's format version.
    public var version: Int
    /// The account the record belongs to; a store refuses a record filed under another account's name.
    public var account: Account
    /// The refresh token, if the server issued one.
    public var refreshToken: String?
    /// The access token, only when the app opted in to storing it or the store is shared between processes.
    public var accessToken: String?
    /// When the stored access token expires, on the wall clock (the only clock that survives a restart).
    public var accessTokenExpiresAt: Date?
    /// The ID token, only when the app opted in to storing it.
    public var idToken: String?
    /// The granted scope, if known.
    public var scope: String?
    /// The token type.
    public var tokenType: String
    /// The DPoP key the tokens are bound to, if they are: kept beside the refresh token it makes usable, and
    /// deleted with it.
    public var proofKey: DPoPKey?
    /// When the record was written, on the wall clock.
    public var savedAt: Date
    /// When the account last became the app's current one, so that restore brings back the account that was current
    /// when the app closed; `nil` in records saved before it was kept.
    public var selectedAt: Date?
    /// The provider the account signed in through, whose client refreshes and revokes its tokens (a refresh token
    /// is only good at the client it was issued to); `nil` for the manager's default provider, and in records saved
    /// before it was kept.
    public var provider: Provider.ID?
    /// The `sid` of the ID token the account signed in with (its session at the provider), so that a back-channel
    /// logout naming it finds the account in any process (``SessionManager/receiveBackChannelLogout(_:from:)``);
    /// `nil` when the ID token had none, or there was none. An identifier, not a credential: kept whether or not the
    /// ID token is.
    public var providerSessionID: String?

    /// Creates a record.
    ///
    /// - Parameters:
    ///   - account: The account it belongs to.
    ///   - refreshToken: The refresh token.
    ///   - accessToken: The access token, if it is to be stored.
    ///   - accessTokenExpiresAt: Its wall-clock expiry.
    ///   - idToken: The ID token, if it is to be stored.
    ///   - scope: The granted scope.
    ///   - tokenType: The token type.
    ///   - proofKey: The DPoP key the tokens are bound to, if any.
    ///   - savedAt: When it was written.
    ///   - selectedAt: When the account last became the current one.
    ///   - provider: The provider the account signed in through; `nil` for the default one.
    ///   - providerSessionID: The `sid` of the account's ID token, if it had one.
    public init(
        account: Account,
        refreshToken: String?,
        accessToken: String? = nil,
        accessTokenExpiresAt: Date? = nil,
        idToken: String? = nil,
        scope: String? = nil,
        tokenType: String = "Bearer",
        proofKey: DPoPKey? = nil,
        savedAt: Date = Date(),
        selectedAt: Date? = nil,
        provider: Provider.ID? = nil,
        providerSessionID: String? = nil
    ) {
        self.version = Self.currentVersion
        self.account = account
        self.refreshToken = refreshToken
        self.accessToken = accessToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
        self.idToken = idToken
        self.scope = scope
        self.tokenType = tokenType
        self.proofKey = proofKey
        self.savedAt = savedAt
        self.selectedAt = selectedAt
        self.provider = provider
        self.providerSessionID = providerSessionID
    }

    /// The account and which tokens are present, with every token redacted.
    public var description: String {
        "CredentialRecord(account: \(account), refresh: \(Redaction.redact(refreshToken)), "
            + "access: \(Redaction.redact(accessToken)), version: \(version))"
    }
}

extension CredentialRecord: CustomReflectable {
    /// What `dump()`, `Mirror` and debuggers show: every field, with the tokens redacted as in ``description``.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "version": version,
                "account": account,
                "refreshToken": Redaction.redact(refreshToken),
                "accessToken": Redaction.redact(accessToken),
                "accessTokenExpiresAt": accessTokenExpiresAt as Any,
                "idToken": Redaction.redact(idToken),
                "scope": scope as Any,
                "tokenType": tokenType,
                "proofKey": proofKey as Any,
                "savedAt": savedAt,
                "selectedAt": selectedAt as Any,
                "provider": provider as Any,
                "providerSessionID": providerSessionID as Any,
            ],
            displayStyle: .struct
        )
    }
}

extension CredentialRecord {
    /// The tokens this record holds, as of `clock`'s now: the access token only while it has time left (else
    /// empty, with no lifetime), so a session made from them refreshes before its first request.
    func tokens(clock: any SessionClock) -> TokenSet {
        var lifetime: Duration = .zero
        var usableAccessToken = ""
        if let accessToken, let accessTokenExpiresAt {
            let remaining = accessTokenExpiresAt.timeIntervalSince(clock.wallNow)
            if remaining > 0 {
                usableAccessToken = accessToken
                lifetime = .milliseconds(Int64(remaining * 1000))
            }
        }
        return TokenSet(
            accessToken: usableAccessToken,
            refreshToken: refreshToken,
            idToken: idToken,
            scope: scope,
            tokenType: tokenType,
            proofKey: proofKey,
            lifetime: lifetime,
            receivedAt: clock.now,
            receivedAtWall: clock.wallNow
        )
    }
}
