import SessionKitOAuth

/// Something that belongs to the signed-in user — notifications, an analytics identity, purchase entitlements,
/// a database — with the step that purges it at sign-out.
///
/// Register resources with ``SessionManager/register(_:)-(UserScopedResource)``; they are purged after the credentials and the
/// account's directory: the built-in ones first, in the seed's order (``BackgroundWorkResource``,
/// ``PurchaseEntitlementsResource``, ``UserNotificationsResource``, ``PushRegistrationResource``), then the app's own in
/// registration order. A purge that fails or is interrupted is retried at next launch
/// before anything authenticates, so a purge step must be idempotent.
public protocol UserScopedResource: Sendable {
    /// A name for reports and logs.
    var name: String { get }

    /// Removes everything this resource holds for `account`.
    ///
    /// - Parameter account: The account signed out.
    /// - Throws: Any error; the purge is retried at next launch.
    func purge(for account: Account) async throws
}

/// A ``UserScopedResource`` made from a closure (``SessionManager/registerPurge(named:_:)``).
package struct PurgeStep: UserScopedResource {
    /// A name for reports and logs.
    package let name: String
    private let body: @Sendable (Account) async throws -> Void

    /// Creates a purge step.
    ///
    /// - Parameters:
    ///   - name: A name for reports.
    ///   - body: The purge; it must be idempotent.
    package init(_ name: String, _ body: @escaping @Sendable (Account) async throws -> Void) {
        self.name = name
        self.body = body
    }

    /// Runs the step.
    ///
    /// - Parameter account: The account signed out.
    /// - Throws: What the step throws.
    package func purge(for account: Account) async throws {
        try await body(account)
    }
}
