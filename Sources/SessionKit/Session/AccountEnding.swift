/// Why the provider, not the user or the app, ended an account (``SessionManager/endAccount(_:because:)``).
///
/// The endings are static values, like ``IDTokenCheck``, so new sources can be added without breaking callers that
/// switch on them; an app that learns of an ending some other way names its own with ``init(_:)``.
public struct AccountEnding: Hashable, Sendable, CustomStringConvertible {
    /// The ending's name, as reports, states and diagnostics events tell it.
    public let name: String

    /// An ending the app learned of itself, named by `name` (a short identifier such as `"admin_disabled"`).
    public init(_ name: String) { self.name = name }

    /// The user stopped using Sign in with Apple with this app (Settings, Apple ID, Sign in with Apple), or Apple
    /// revoked the credential: `ASAuthorizationAppleIDProvider.credentialRevokedNotification`, or a credential state
    /// of `.revoked`.
    public static let appleIDRevoked = AccountEnding("apple_id_revoked")
    /// Apple knows no credential for the user identifier the account was signed in with (`.notFound`): the app was
    /// removed from the Apple ID, or the account belongs to another Apple ID than the device's.
    public static let appleIDNotFound = AccountEnding("apple_id_not_found")
    /// The provider signed the user, or one of their sessions there, out and told this client with an OpenID
    /// Connect Back-Channel Logout token (``SessionManager/receiveBackChannelLogout(_:from:)``).
    public static let backChannelLogout = AccountEnding("back_channel_logout")

    /// The ending's name.
    public var description: String { name }
}
