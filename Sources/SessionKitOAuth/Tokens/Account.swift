import Foundation

/// Who a session acts for: a subject at an issuer, as OpenID Connect names a user.
///
/// Two accounts are the same account when their issuer and subject are equal; the display name is for people
/// and plays no part in identity. The same account signed in twice gives two different ``UserSession`` objects.
public struct Account: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The authority that vouches for the subject, such as `https://auth.example.com`.
    public let issuer: String
    /// The stable identifier of the user at the issuer (the `sub` claim).
    public let subject: String
    /// A name to show people; not part of identity.
    public var displayName: String

    /// Creates an account.
    ///
    /// - Parameters:
    ///   - issuer: The issuing authority.
    ///   - subject: The user's stable identifier at the issuer.
    ///   - displayName: A name to show; defaults to the subject.
    public init(issuer: String, subject: String, displayName: String? = nil) {
        self.issuer = issuer
        self.subject = subject
        self.displayName = displayName ?? subject
    }

    /// A stable key naming this account in storage: safe as a file name, unique per issuer and subject, and
    /// reversible.
    ///
    /// It is the base64url encoding (RFC 4648 §5, no padding) of `issuer`, a NUL byte and `subject`, so two
    /// different accounts never share a key. It is an encoding, not a digest: anyone who can list the data
    /// directory, the credential store's folder or the keyring can decode it back to the issuer and the subject
    /// (often a user ID, sometimes an e-mail address). Protect those places as you protect what is in them;
    /// SessionKit creates its folders with mode 0700 and its files with mode 0600.
    public var storageKey: String {
        Base64URL.encode(Array(issuer.utf8) + [0] + Array(subject.utf8))
    }

    /// The display name and issuer.
    public var description: String { "\(displayName) at \(issuer)" }

    /// Two accounts are equal when issuer and subject are equal.
    ///
    /// - Parameters:
    ///   - lhs: An account.
    ///   - rhs: Another account.
    /// - Returns: Whether they name the same user.
    public static func == (lhs: Account, rhs: Account) -> Bool {
        lhs.issuer == rhs.issuer && lhs.subject == rhs.subject
    }

    /// Hashes issuer and subject.
    ///
    /// - Parameter hasher: The hasher.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(issuer)
        hasher.combine(subject)
    }
}

extension Account {
    /// The issuer of provisional sessions: a URN no provider uses, so that no record, directory or container of a
    /// real account is ever keyed by it.
    package static let provisionalIssuer = "urn:sessionkit:provisional"

    /// An account that belongs to nobody, for a session that holds new tokens before the app knows whose they are
    /// (``SessionManager/signIn(through:makeCurrent:authenticate:identify:)``): unique to each call.
    package static func provisional() -> Account {
        Account(issuer: provisionalIssuer, subject: UUID().uuidString, displayName: "provisional")
    }
}
