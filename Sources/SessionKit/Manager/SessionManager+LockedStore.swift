import Foundation
import SessionKitOAuth

// A store that cannot be read now (`storeUnavailable`: a device locked before its first unlock, a locked keyring,
// a directory this process may not read) is not an empty one, and a write it refused is not a write that never
// mattered. Restore reports it and deletes nothing; these retries take it from there, so the app need not remember
// to call `restore()` again, and rotated tokens kept in memory reach the store as soon as it opens.

extension SessionManager {
    /// Sleeps before try `attempt` (0-based) of a locked store: ``Configuration/storeRetryInterval``, doubling,
    /// at most 16 times it. `false` when cancelled. Static, so a waiting retry keeps no manager alive.
    static func waitBeforeStoreRetry(_ attempt: Int, interval: Duration, clock: any SessionClock) async -> Bool {
        let delay = interval * (1 << min(attempt, 4))
        do {
            try await clock.sleep(until: clock.now.advanced(by: delay))
            return true
        } catch {
            return false
        }
    }

    /// Writes `session`'s tokens again until the store takes them, after it refused a write of rotated tokens as
    /// unavailable. The session keeps the tokens in memory and presents only them meanwhile; the write carries
    /// whatever it holds when the store opens (a newer rotation included). Stops when the session ends.
    func retryStoring(_ session: UserSession) {
        let account = session.account
        guard send(.storeRetry(.writes(account), starting: true)).flag else { return }
        let (interval, clock) = (configuration.storeRetryInterval, configuration.sessionConfiguration.clock)
        Task { [weak self, weak session] in
            var attempt = 0
            defer { self?.send(.storeRetry(.writes(account), starting: false)) }
            while await Self.waitBeforeStoreRetry(attempt, interval: interval, clock: clock) {
                attempt += 1
                guard let session, session.isActive else { return }
                guard let error = await session.storeKeptTokens() else { return }
                guard (error as? SessionError)?.code == .storeUnavailable else {
                    session.report(.storageFailed(error))
                    return
                }
                self?.diagnose(
                    .notice, .storeRetry, account: account, ["attempt": "\(attempt)", "code": "storeUnavailable"])
            }
        }
    }

    /// Tries restore again, once the store can be read, after one that found it unreadable; also loads accounts
    /// whose records alone were unreadable while others restored, as live sessions that are not current.
    ///
    /// - Parameter lockedAccounts: Accounts restored without their records (empty when nothing restored).
    func retryRestore(lockedAccounts: Set<Account>) {
        guard send(.storeRetry(.restore, starting: true)).flag else { return }
        let (interval, clock) = (configuration.storeRetryInterval, configuration.sessionConfiguration.clock)
        Task { [weak self] in
            var waiting = lockedAccounts
            var attempt = 0
            var handedOver = false
            defer { if !handedOver { self?.send(.storeRetry(.restore, starting: false)) } }
            while await Self.waitBeforeStoreRetry(attempt, interval: interval, clock: clock) {
                attempt += 1
                guard let self else { return }
                if case .failed(let error) = self.state, error.code == .storeUnavailable {
                    // Read the list first: a store still locked leaves the state as it is, with no restore
                    // flickering through `restoring`.
                    guard (try? await self.vault.store.accounts()) != nil else {
                        self.diagnose(
                            .notice, .storeRetry, account: nil, ["attempt": "\(attempt)", "code": "\(error.code)"])
                        continue
                    }
                    // The restore schedules its own retry if the store locks again meanwhile.
                    handedOver = true
                    self.send(.storeRetry(.restore, starting: false))
                    await self.restore()
                    return
                }
                guard !waiting.isEmpty else { return }
                waiting = await self.restoreLocked(waiting)
                if waiting.isEmpty { return }
            }
        }
    }

    /// Loads the records of `accounts` that have no live session yet and installs them (not current, unless
    /// nothing is); returns those still unreadable.
    private func restoreLocked(_ accounts: Set<Account>) async -> Set<Account> {
        var still: Set<Account> = []
        for account in accounts where !snapshot.sessions.contains(where: { $0.account == account }) {
            let record: CredentialRecord?
            do {
                record = try await vault.load(for: account)
            } catch let error as SessionError where error.code == .storeUnavailable {
                still.insert(account)
                continue
            } catch {
                continue
            }
            guard let record, let session = try? restoredSession(of: account, from: record) else { continue }
            let makeCurrent = snapshot.current == nil
            install(session, makeCurrent: makeCurrent, event: makeCurrent ? .switched(account) : nil)
        }
        return still
    }
}

extension SessionManager {
    /// The store may be readable now (Apple platforms: the protected data became available, the device was
    /// unlocked): tries at once what waits for it, instead of at the next retry. A restore that found the store
    /// locked runs again; rotated tokens a locked store refused are written.
    func protectedDataBecameAvailable() {
        Task { [weak self] in
            guard let self else { return }
            if case .failed(let error) = self.state, error.code == .storeUnavailable {
                await self.restore()
            }
            for session in self.snapshot.sessions where session.hasUnstoredRotation {
                _ = await session.storeKeptTokens()
            }
        }
    }
}

#if canImport(UIKit)
    import UIKit

    extension SessionManager {
        /// Calls ``protectedDataBecameAvailable()`` when the device unlocks, for as long as the manager lives.
        func observeProtectedData() -> any NSObjectProtocol {
            NotificationCenter.default.addObserver(
                forName: UIApplication.protectedDataDidBecomeAvailableNotification, object: nil, queue: nil
            ) { [weak self] _ in self?.protectedDataBecameAvailable() }
        }
    }
#endif
