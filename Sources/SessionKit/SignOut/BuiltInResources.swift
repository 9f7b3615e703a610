import Foundation
import SessionKitOAuth

// The seed's clearing list as resources an app registers in one line each. They are purged after the credentials
// and the account's directory, in the seed's order whatever order they were registered in (background work, purchase
// entitlements, notifications, the push registration; then the app's own, in registration order): work that could
// still act as the user stops first, and what the next user could see goes before the server forgets the device.
// Each one touches only what it can prove is the ending account's: identifiers tagged with the account, entitlements
// of the account's `appAccountToken`. The analytics identity is not among them: it is reset before the first
// suspension of the sign-out (``SessionManager/registerIdentityReset(named:_:)``), and the navigation follows the
// state change published in the same step.

extension Account {
    /// A tag that names the account in identifiers the app gives the platform (notification requests, background
    /// URLSession configurations): 22 base64url characters of the SHA-256 of the account's issuer and subject, so an
    /// identifier names the account without spelling its subject.
    public var resourceTag: String {
        Base64URL.encode(PlatformCrypto.digest(.sha256, of: Array(storageKey.utf8)).prefix(16))
    }
}

/// Where notifications are listed and removed: `UNUserNotificationCenter` on Apple platforms
/// (`SystemUserNotificationCenter`), a model in tests. Linux has no notification center: a server that keeps
/// per-user notifications gives its own.
public protocol UserNotificationCenter: Sendable {
    /// The identifiers of the pending notification requests.
    func pendingIdentifiers() async -> [String]
    /// The identifiers of the delivered notifications still shown.
    func deliveredIdentifiers() async -> [String]
    /// Removes pending requests.
    func removePending(_ identifiers: [String]) async
    /// Removes delivered notifications.
    func removeDelivered(_ identifiers: [String]) async
}

/// The user's pending and delivered notifications: those whose identifiers the app tagged with the account
/// (``identifier(_:for:)``) are removed when it ends, and only those.
public struct UserNotificationsResource: UserScopedResource, OrderedResource {
    /// `notifications`.
    public var name: String { "notifications" }
    let rank = 2
    private let center: any UserNotificationCenter

    /// Creates the resource.
    ///
    /// - Parameter center: The notification center.
    public init(center: any UserNotificationCenter) { self.center = center }

    /// The identifier to schedule a notification of `account` under: `sessionkit.<tag>.<id>`.
    ///
    /// - Parameters:
    ///   - id: The app's own identifier.
    ///   - account: The account the notification belongs to.
    /// - Returns: The tagged identifier.
    public static func identifier(_ id: String, for account: Account) -> String {
        "sessionkit.\(account.resourceTag).\(id)"
    }

    /// Removes `account`'s pending and delivered notifications.
    public func purge(for account: Account) async throws {
        let prefix = Self.identifier("", for: account)
        let pending = await center.pendingIdentifiers().filter { $0.hasPrefix(prefix) }
        if !pending.isEmpty { await center.removePending(pending) }
        let delivered = await center.deliveredIdentifiers().filter { $0.hasPrefix(prefix) }
        if !delivered.isEmpty { await center.removeDelivered(delivered) }
    }
}

/// The device's push registration with the app's server for the account: the server is told to stop sending the
/// account's pushes to this device, within a bound of its own, as a revocation is.
public struct PushRegistrationResource: UserScopedResource, OrderedResource {
    /// `push registration`.
    public var name: String { "push registration" }
    let rank = 3
    private let timeout: Duration
    private let clock: any SessionClock
    private let unregister: @Sendable (Account) async throws -> Void

    /// Creates the resource.
    ///
    /// - Parameters:
    ///   - timeout: How long the server is waited for; 5 seconds by default. Past it the step is `failed (timedOut)`
    ///     and runs again at the next launch.
    ///   - clock: The clock of the bound; `nil` reads the system's.
    ///   - unregister: Tells the app's server to forget this device's push token for the account.
    public init(
        timeout: Duration = .seconds(5), clock: (any SessionClock)? = nil,
        unregister: @escaping @Sendable (Account) async throws -> Void
    ) {
        self.timeout = timeout
        self.clock = clock ?? SystemClock()
        self.unregister = unregister
    }

    /// Runs the unregistration within the bound.
    public func purge(for account: Account) async throws {
        let outcome = Broadcast<Void>()
        let work = Task { [unregister] in
            do {
                try await unregister(account)
                outcome.resolve(.success(()))
            } catch {
                outcome.resolve(.failure(error))
            }
        }
        do {
            try await outcome.value(
                deadline: clock.now.advanced(by: timeout), clock: clock,
                timeoutError: SessionError(.timedOut, "the push registration was not removed within its bound"))
        } catch {
            work.cancel()
            throw error
        }
    }
}

/// Where background work is cancelled: `BGTaskScheduler` and background `URLSession`s on Apple platforms
/// (`SystemBackgroundWork`), a model in tests. Linux has neither.
public protocol BackgroundWorkScheduler: Sendable {
    /// Cancels the pending task requests with these identifiers.
    func cancelTaskRequests(_ identifiers: [String]) async
    /// Cancels every transfer of the background `URLSession` with this configuration identifier, and invalidates it.
    func cancelTransfers(sessionIdentifier: String) async
}

/// Background work that acts as the user: the task requests the app schedules while an account is current (their
/// identifiers are fixed in the app's Info.plist, so they are cancelled when the current account ends) and the
/// account's background `URLSession` transfers (configured with ``sessionIdentifier(_:for:)``).
public struct BackgroundWorkResource: UserScopedResource, OrderedResource {
    /// `background work`.
    public var name: String { "background work" }
    let rank = 0
    private let scheduler: any BackgroundWorkScheduler
    private let taskIdentifiers: [String]
    private let sessionBase: String?

    /// Creates the resource.
    ///
    /// - Parameters:
    ///   - scheduler: Where work is cancelled.
    ///   - taskIdentifiers: The `BGTaskScheduler` identifiers of work done for the signed-in user.
    ///   - sessionBase: The base of the account's background `URLSession` identifiers, if the app has them.
    public init(scheduler: any BackgroundWorkScheduler, taskIdentifiers: [String], sessionBase: String? = nil) {
        self.scheduler = scheduler
        self.taskIdentifiers = taskIdentifiers
        self.sessionBase = sessionBase
    }

    /// The identifier of `account`'s background `URLSession`: `<base>.<tag>`.
    public static func sessionIdentifier(_ base: String, for account: Account) -> String {
        "\(base).\(account.resourceTag)"
    }

    /// Cancels the task requests and the account's transfers.
    public func purge(for account: Account) async throws {
        if !taskIdentifiers.isEmpty { await scheduler.cancelTaskRequests(taskIdentifiers) }
        if let sessionBase {
            await scheduler.cancelTransfers(sessionIdentifier: Self.sessionIdentifier(sessionBase, for: account))
        }
    }
}

/// Where the app caches what a user bought: entitlements kept per StoreKit 2 `appAccountToken`.
public protocol EntitlementCache: Sendable {
    /// Forgets every entitlement cached for `appAccountToken`.
    func removeEntitlements(appAccountToken: UUID) async throws
}

/// Purchase entitlements cached for the account. Purchases made with ``appAccountToken(for:)`` carry the account in
/// their transactions, so entitlements are cached, shown and purged per account; the App Store's current entitlements
/// belong to the device's Apple ID, which another user of the app may share.
public struct PurchaseEntitlementsResource: UserScopedResource, OrderedResource {
    /// `purchase entitlements`.
    public var name: String { "purchase entitlements" }
    let rank = 1
    private let cache: any EntitlementCache

    /// Creates the resource.
    ///
    /// - Parameter cache: The app's entitlement cache.
    public init(cache: any EntitlementCache) { self.cache = cache }

    /// The `appAccountToken` to buy with for `account`: a UUID (version 8, RFC 9562) from the SHA-256 of the
    /// account's issuer and subject, the same on every device, naming the account without spelling it.
    public static func appAccountToken(for account: Account) -> UUID {
        var bytes = Array(PlatformCrypto.digest(.sha256, of: Array(("appAccountToken\0" + account.storageKey).utf8)))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// Forgets the account's cached entitlements.
    public func purge(for account: Account) async throws {
        try await cache.removeEntitlements(appAccountToken: Self.appAccountToken(for: account))
    }
}

/// A built-in resource's place in the purge: lower first; the app's own resources come after every built-in one.
protocol OrderedResource {
    var rank: Int { get }
}

extension Array where Element == any UserScopedResource {
    /// The resources in purge order: built-in ones by rank, then the app's in registration order.
    var inPurgeOrder: [any UserScopedResource] {
        enumerated().sorted { lhs, rhs in
            let left = (lhs.element as? any OrderedResource)?.rank ?? Int.max
            let right = (rhs.element as? any OrderedResource)?.rank ?? Int.max
            return left != right ? left < right : lhs.offset < rhs.offset
        }.map(\.element)
    }
}
