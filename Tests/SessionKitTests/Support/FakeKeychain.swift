import Foundation
import SessionKit

/// The Keychain's generic-password calls, modelled on their documented behaviour, for testing
/// ``KeychainCredentialStore``'s logic where the Security framework does not exist.
///
/// What it models (Keychain Services documentation; `SecItemAdd`, `SecItemCopyMatching`, `SecItemDelete`):
/// - An item's primary key is its service, account and access group: adding a second one is `errSecDuplicateItem`.
/// - A query without an access group matches the items of every group the app is entitled to, and an item added
///   without one goes to the app's first (default) group. A group the app is not entitled to, or the data
///   protection keychain without the `keychain-access-groups` entitlement (macOS), is `errSecMissingEntitlement`.
/// - No match is `errSecItemNotFound`; `SecItemDelete` deletes every match.
/// - Accessibility: `afterFirstUnlock` items can be used while the device is locked (after the first unlock since
///   boot); `whenUnlocked` and `whenPasscodeSet` items only while it is unlocked; otherwise
///   `errSecInteractionNotAllowed` — or, with ``State/answersNotFoundWhileLocked``, `errSecItemNotFound` for reads,
///   as some iOS versions answer before the first unlock and while locked (Firebase iOS SDK #8695, #16505);
///   adding an item that cannot be used now is `errSecInteractionNotAllowed` either way.
/// - User presence: reading the secret of an item with a `.userPresence` access control asks the user (counted in
///   ``prompts``), who approves, cancels (`errSecUserCanceled`), fails (`errSecAuthFailed`), or cannot be asked
///   because the app is in the background or the device is locked (`errSecInteractionNotAllowed`). Attributes
///   are read without asking; adding and deleting an item do not evaluate its access control. Updating a
///   protected item asks too, which is why ``KeychainCalls`` has no update and the store never updates.
final class FakeKeychain: KeychainCalls {
    /// What the user does when asked for Face ID, Touch ID or the passcode.
    enum PresenceAnswer: Sendable {
        case approve, cancel, fail, cannotAsk
    }

    struct Item: Sendable {
        var service: String
        var account: String
        var accessGroup: String
        var generic: Data?
        var secret: Data
        var protection: KeychainProtection
        var dataProtectionKeychain: Bool
    }

    enum Call: Sendable, Equatable {
        case add(account: String)
        case copyData(account: String?)
        case copyAttributes
        case delete(account: String?)
    }

    struct State: Sendable {
        var items: [Item] = []
        var entitledGroups = ["TEAMID.com.example.app"]
        var hasDataProtectionEntitlement = true
        var deviceLocked = false
        var unlockedSinceBoot = true
        /// Reads of items that cannot be used now answer `errSecItemNotFound` instead of
        /// `errSecInteractionNotAllowed`, as the iOS versions in the reports do.
        var answersNotFoundWhileLocked = false
        var presence = PresenceAnswer.approve
        var prompts = 0
        var calls: [Call] = []
        var addedItems: [Item] = []
        /// Runs before each call; it may change the state (another process) or return the status to answer.
        var before: (@Sendable (Call, inout State) -> KeychainStatus?)?
    }

    private let state = Locked(State())

    init() {}

    /// Reads or changes the modelled Keychain.
    func withState<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try state.withLock(body)
    }

    // MARK: - KeychainCalls

    func add(_ item: KeychainItem) -> KeychainStatus {
        state.withLock { state in
            if let answer = intercept(.add(account: item.query.account ?? ""), &state) { return answer }
            if let denied = Self.entitlementProblem(item.query, state) { return denied }
            guard let account = item.query.account else { return .param }
            let group = item.query.accessGroup ?? state.entitledGroups[0]
            guard Self.available(item.protection, state) else { return .interactionNotAllowed }
            let exists = state.items.contains {
                $0.service == item.query.service && $0.account == account && $0.accessGroup == group
            }
            if exists { return .duplicateItem }
            let stored = Item(
                service: item.query.service, account: account, accessGroup: group, generic: item.generic,
                secret: item.secret, protection: item.protection,
                dataProtectionKeychain: item.query.usesDataProtectionKeychain)
            state.items.append(stored)
            state.addedItems.append(stored)
            return .success
        }
    }

    func copyData(matching query: KeychainQuery) -> (status: KeychainStatus, data: Data?) {
        state.withLock { state in
            if let answer = intercept(.copyData(account: query.account), &state) { return (answer, nil) }
            if let denied = Self.entitlementProblem(query, state) { return (denied, nil) }
            guard let item = state.items.first(where: { Self.matches($0, query, state) }) else {
                return (.itemNotFound, nil)
            }
            guard Self.available(item.protection, state) else {
                return (state.answersNotFoundWhileLocked ? .itemNotFound : .interactionNotAllowed, nil)
            }
            if case .userPresence = item.protection {
                state.prompts += 1
                switch state.presence {
                case .approve: break
                case .cancel: return (.userCanceled, nil)
                case .fail: return (.authFailed, nil)
                case .cannotAsk: return (.interactionNotAllowed, nil)
                }
            }
            return (.success, item.secret)
        }
    }

    func copyAttributes(matching query: KeychainQuery) -> (status: KeychainStatus, items: [KeychainAttributes]) {
        state.withLock { state in
            if let answer = intercept(.copyAttributes, &state) { return (answer, []) }
            if let denied = Self.entitlementProblem(query, state) { return (denied, []) }
            let matches = state.items.filter { Self.matches($0, query, state) }
            if matches.isEmpty { return (.itemNotFound, []) }
            guard matches.allSatisfy({ Self.available($0.protection, state) }) else {
                return (state.answersNotFoundWhileLocked ? .itemNotFound : .interactionNotAllowed, [])
            }
            return (.success, matches.map { KeychainAttributes(account: $0.account, generic: $0.generic) })
        }
    }

    func delete(matching query: KeychainQuery) -> KeychainStatus {
        state.withLock { state in
            if let answer = intercept(.delete(account: query.account), &state) { return answer }
            if let denied = Self.entitlementProblem(query, state) { return denied }
            let before = state.items.count
            let model = state
            state.items.removeAll { Self.matches($0, query, model) }
            return state.items.count == before ? .itemNotFound : .success
        }
    }

    func message(for status: KeychainStatus) -> String? {
        "modelled \(status)"
    }

    // MARK: - The model

    private func intercept(_ call: Call, _ state: inout State) -> KeychainStatus? {
        state.calls.append(call)
        guard let before = state.before else { return nil }
        return before(call, &state)
    }

    private static func entitlementProblem(_ query: KeychainQuery, _ state: State) -> KeychainStatus? {
        if query.usesDataProtectionKeychain && !state.hasDataProtectionEntitlement { return .missingEntitlement }
        if let group = query.accessGroup, !state.entitledGroups.contains(group) { return .missingEntitlement }
        return nil
    }

    private static func matches(_ item: Item, _ query: KeychainQuery, _ state: State) -> Bool {
        item.service == query.service && query.account.map { $0 == item.account } != false
            && (query.accessGroup.map { $0 == item.accessGroup } ?? state.entitledGroups.contains(item.accessGroup))
            && item.dataProtectionKeychain == query.usesDataProtectionKeychain
    }

    private static func available(_ protection: KeychainProtection, _ state: State) -> Bool {
        let accessibility: KeychainCredentialStore.Accessibility
        switch protection {
        case .accessible(let value), .userPresence(let value): accessibility = value
        }
        switch accessibility {
        case .afterFirstUnlockThisDeviceOnly: return state.unlockedSinceBoot
        case .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: return !state.deviceLocked
        }
    }
}
