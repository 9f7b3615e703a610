import Foundation

#if canImport(UserNotifications)
    import UserNotifications

    /// `UNUserNotificationCenter.current()` as a ``UserNotificationCenter``.
    public struct SystemUserNotificationCenter: UserNotificationCenter {
        /// Creates the center.
        public init() {}

        /// The identifiers of the pending notification requests.
        public func pendingIdentifiers() async -> [String] {
            await UNUserNotificationCenter.current().pendingNotificationRequests().map(\.identifier)
        }

        /// The identifiers of the delivered notifications still shown.
        public func deliveredIdentifiers() async -> [String] {
            await UNUserNotificationCenter.current().deliveredNotifications().map(\.request.identifier)
        }

        /// Removes pending requests.
        public func removePending(_ identifiers: [String]) async {
            UNUserNotificationCenter.current().removePendingNotificationRequests(withIdentifiers: identifiers)
        }

        /// Removes delivered notifications.
        public func removeDelivered(_ identifiers: [String]) async {
            UNUserNotificationCenter.current().removeDeliveredNotifications(withIdentifiers: identifiers)
        }
    }
#endif

#if canImport(BackgroundTasks) && !os(macOS)
    import BackgroundTasks

    /// `BGTaskScheduler.shared` and background `URLSession`s as a ``BackgroundWorkScheduler``.
    public struct SystemBackgroundWork: BackgroundWorkScheduler {
        /// Creates the scheduler.
        public init() {}

        /// Cancels the pending task requests with these identifiers.
        public func cancelTaskRequests(_ identifiers: [String]) async {
            for identifier in identifiers { BGTaskScheduler.shared.cancel(taskRequestWithIdentifier: identifier) }
        }

        /// Cancels every transfer of the background `URLSession` of this identifier, and invalidates it.
        public func cancelTransfers(sessionIdentifier: String) async {
            // A background session of an identifier is reattached by creating one with it; its tasks are then
            // cancelled and it is invalidated, so no transfer of the account finishes for the next user.
            let session = URLSession(configuration: .background(withIdentifier: sessionIdentifier))
            for task in await session.allTasks { task.cancel() }
            session.invalidateAndCancel()
        }
    }
#endif

#if canImport(StoreKit)
    import StoreKit

    extension PurchaseEntitlementsResource {
        /// The App Store's current entitlements that belong to `account`: verified transactions bought with its
        /// ``appAccountToken(for:)``. The device's Apple ID may be shared by the app's users; the entitlements of
        /// the other accounts, and of purchases made without an account, are not the account's.
        ///
        /// - Parameter account: The account.
        /// - Returns: The account's transactions.
        public static func currentEntitlements(for account: Account) async -> [Transaction] {
            let token = appAccountToken(for: account)
            var owned: [Transaction] = []
            for await result in Transaction.currentEntitlements {
                guard case .verified(let transaction) = result, transaction.appAccountToken == token else { continue }
                owned.append(transaction)
            }
            return owned
        }
    }
#endif
