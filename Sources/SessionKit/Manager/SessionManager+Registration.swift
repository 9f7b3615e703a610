import Foundation
import SessionKitOAuth

// What the app registers with the manager, and what it keeps for each account: containers that follow the current
// session, purge steps for sign-out, each account's directory, outbox and write reconciliations.
extension SessionManager {
    /// Registers a container whose contents follow the current session: emptied at once when it changes.
    ///
    /// - Parameter container: The container; held weakly.
    public func register<Value: Sendable>(_ container: SessionScoped<Value>) {
        send(.registerContainer(WeakBindable(container)))
        rebindContainers()
    }

    /// Registers something that belongs to the user and must be purged at sign-out, in registration order.
    ///
    /// - Parameter resource: The resource and its purge step.
    public func register(_ resource: any UserScopedResource) {
        send(.registerResource(resource))
    }

    /// Registers a purge step made from a closure: something of the user's that must go at sign-out, in
    /// registration order.
    ///
    /// ```swift
    /// manager.registerPurge(named: "search history") { account in
    ///     try await searchHistory.deleteAll(for: account)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: A name for ``SignOutReport/resourcePurges`` and logs.
    ///   - purge: Removes what the app keeps for the account; it may run again after a failure or a crash, so
    ///     it must be idempotent.
    public func registerPurge(
        named name: String, _ purge: @escaping @Sendable (Account) async throws -> Void
    ) {
        register(PurgeStep(name, purge))
    }

    /// Registers the reset of the current user's identity outside SessionKit (an analytics SDK's `reset()`), run
    /// when the current account signs out or ends: inside the step that detaches it, before the state change is
    /// told and before another account can become current, so the next user is never identified as this one. It
    /// is listed first among the report's ``SignOutReport/resourcePurges``, by `name`.
    ///
    /// ```swift
    /// manager.registerIdentityReset(named: "analytics identity") { _ in Analytics.reset() }
    /// ```
    ///
    /// - Important: `reset` runs under the manager's lock: it must be quick, must not wait, and must not call the
    ///   manager.
    ///
    /// - Parameters:
    ///   - name: A name for reports.
    ///   - reset: The reset, given the account that leaves.
    public func registerIdentityReset(named name: String, _ reset: @escaping @Sendable (Account) -> Void) {
        send(.registerIdentityReset(IdentityReset(name: name, reset: reset)))
    }

    /// The directory that holds `account`'s files, created on first use (mode 0700); purged at sign-out.
    ///
    /// - Parameter account: The account.
    /// - Returns: The directory, or `nil` when the manager has no data directory.
    public func directory(for account: Account) -> URL? {
        directories.directory(for: account)
    }

    /// Removes and returns what became of `account`'s writes that were in flight when it signed out.
    ///
    /// Call it when the account signs in again, before replaying anything: an entry says whether a handed-off
    /// write completed (and with which status), failed, or was discarded (fetch the server's state rather than
    /// replaying it). Entries of one account are only ever returned for that account.
    ///
    /// - Parameter account: The account signing in again.
    /// - Returns: Its entries, oldest first; they are gone from the manager afterwards.
    public func takeWriteReconciliations(for account: Account) -> [WriteReconciliation] {
        ledger.take(for: account)
    }

    /// What became of `account`'s writes that were in flight when it signed out, left in place.
    ///
    /// - Parameter account: The account.
    /// - Returns: Its entries, oldest first.
    package func writeReconciliations(for account: Account) -> [WriteReconciliation] {
        ledger.entries(for: account)
    }

    /// The outbox of `account`'s queued writes, stored in its directory.
    ///
    /// Every call returns the same instance until the account's sign-out purges it: the purge closes it (a write
    /// enqueued later is refused with `sessionEnded`, and nothing is written to disk), and the next call after that
    /// returns a new, empty outbox.
    ///
    /// - Parameter account: The account.
    /// - Returns: The outbox; replayable only by a session of `account`.
    public func outbox(for account: Account) -> Outbox {
        directories.outbox(for: account)
    }

    /// Gives `account` back the outbox it set aside at its last sign-out, if any.
    ///
    /// - Parameter account: The account signing in again.
    /// - Returns: Its outbox, with any writes kept for it restored.
    public func restoreKeptOutbox(for account: Account) -> Outbox {
        directories.restoreKeptOutbox(for: account)
    }
}
