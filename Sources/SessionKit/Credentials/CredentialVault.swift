import SessionKitOAuth

/// A credential store with every operation on one account serialized, in the order it was asked for.
///
/// Sessions and the sign-out purge reach the store only through a vault. Because operations on one account
/// run strictly in order, a purge enqueued after a session stopped admitting writes runs after every write
/// that session admitted: the last operation on a signed-out account's record is always its deletion.
///
/// - Important: Operations on different accounts run independently; operations on one account never overlap
///   and complete in the order they were enqueued.
package final class CredentialVault: Sendable {
    /// The store behind the vault.
    public let store: any CredentialStore
    /// One queue per account with operations pending, and how many: an account's queue is dropped when its last
    /// operation finishes, so a process that sees many accounts keeps none of them.
    private let queues = Lock<[Account: (queue: SerialQueue, pending: Int)]>([:])

    /// Creates a vault over `store`.
    ///
    /// - Parameter store: The store that keeps the records.
    public init(store: any CredentialStore) {
        self.store = store
    }

    /// Enqueues `operation` behind every operation on `account` enqueued before it.
    ///
    /// Enqueued under the vault's lock, and an account's queue is dropped under it only when nothing is pending
    /// on it: an operation enqueued later either joins the same queue, behind the others, or starts a new one
    /// after they have all finished. Either way the order holds.
    private func enqueue<T: Sendable>(
        on account: Account,
        _ operation: @escaping @Sendable () async -> T
    ) -> Task<T, Never> {
        queues.withLock { queues in
            let queue = queues[account]?.queue ?? SerialQueue()
            queues[account] = (queue, (queues[account]?.pending ?? 0) + 1)
            return queue.enqueue {
                let result = await operation()
                self.finished(on: account, queue)
                return result
            }
        }
    }

    private func finished(on account: Account, _ queue: SerialQueue) {
        queues.withLock { queues in
            guard let entry = queues[account], entry.queue === queue else { return }
            queues[account] = entry.pending > 1 ? (queue, entry.pending - 1) : nil
        }
    }

    /// A marker enqueued behind every operation pending now, on every account: each task ends once the operations
    /// ahead of it on its account have finished.
    func drain() -> [Task<Void, Never>] {
        let accounts = queues.withLock { queues in Array(queues.keys) }
        return accounts.map { account in enqueue(on: account) {} }
    }

    /// How many operations are pending now, on every account, and how many accounts have a queue (operations
    /// pending): the second is for tests that check a queue is dropped with its last operation.
    var pending: (operations: Int, accounts: Int) {
        queues.withLock { queues in (queues.values.reduce(0) { $0 + $1.pending }, queues.count) }
    }

    /// Enqueues a wait for `task`: the operations on `account` asked for after it run once it has finished, and
    /// ``drain()`` waits for it. For a refresh released by its session's end, which stores its rotation in the
    /// record itself (holding the store's lock): a sign-out's deletion asked for meanwhile comes after it.
    ///
    /// - Parameters:
    ///   - task: The work the account's later operations wait for; it must not itself wait on this queue.
    ///   - account: The account.
    func enqueueWait(for task: Task<Void, Never>, on account: Account) {
        _ = enqueue(on: account) { await task.value }
    }

    /// Enqueues a save of `record` and returns at once; await the task for the outcome.
    ///
    /// - Parameter record: The record to store.
    /// - Returns: The pending save; its value is the error, if the save failed.
    @discardableResult
    func enqueueSave(_ record: CredentialRecord) -> Task<(any Error)?, Never> {
        let store = self.store
        return enqueue(on: record.account) {
            do {
                try await store.save(record)
                return nil
            } catch {
                return error
            }
        }
    }

    /// Enqueues the deletion of `account`'s record and returns at once; await the task for the outcome.
    ///
    /// - Parameter account: The account whose record to delete.
    /// - Returns: The pending deletion; its value is the error, if the deletion failed.
    @discardableResult
    func enqueueDelete(for account: Account) -> Task<(any Error)?, Never> {
        let store = self.store
        return enqueue(on: account) {
            do {
                try await Self.holdingRefreshLock(of: store, for: account) { try await store.delete(for: account) }
                return nil
            } catch {
                return error
            }
        }
    }

    /// Runs a deletion holding the store's refresh lock, if it has one, so that no other process's refresh is
    /// between re-reading the record and storing its result: after the deletion, every refresh finds the record
    /// gone and writes nothing, and the change notice tells every other process to check its sessions of the account.
    /// A lock that cannot be had within its timeout does not stop the deletion: local sign-out always completes.
    private static func holdingRefreshLock(
        of store: any CredentialStore, for account: Account, _ deletion: () async throws -> Void
    ) async throws {
        guard let coordination = store.coordination else { return try await deletion() }
        let held = try? await coordination.lock(for: account)
        defer { held?.release() }
        try await deletion()
        // The other processes check their sessions of the account now, not at their next refresh.
        await coordination.announceChange(of: account)
    }

    /// Enqueues the deletion of `account`'s record if, when its turn comes, the record still holds
    /// `refreshToken`: the record of a session whose refresh token was rejected, which must not take with it the
    /// record a newer session of the same account has saved since.
    ///
    /// - Parameters:
    ///   - account: The account whose record to delete.
    ///   - refreshToken: The refresh token the dead session held.
    ///   - retired: The refresh token the record still holds if the store refused the session's last rotated
    ///     tokens: one the session retired, so the record is the dead session's too.
    /// - Returns: The pending deletion; its value is the error, if reading or deleting failed. A record that
    ///   cannot be read is left as it is: a load error (a locked keyring, a cancelled prompt) proves nothing about
    ///   whose record it is, and it may be a newer session's.
    @discardableResult
    func enqueueDelete(
        for account: Account, ifHolding refreshToken: String, orHolding retired: String? = nil
    ) -> Task<(any Error)?, Never> {
        let store = self.store
        return enqueue(on: account) {
            do {
                // Only a record proven to hold the dead session's token is deleted; none, or another token, is left.
                try await Self.holdingRefreshLock(of: store, for: account) {
                    guard let record = try await store.load(for: account), let held = record.refreshToken,
                        held == refreshToken || held == retired
                    else {
                        return
                    }
                    try await store.delete(for: account)
                }
                return nil
            } catch {
                return error
            }
        }
    }

    /// Enqueues the deletion of `account`'s record if, when its turn comes, there is one and `condition` holds for
    /// it: a record read under the store's refresh lock, so no other process's write is between the check and the
    /// deletion.
    ///
    /// - Parameters:
    ///   - account: The account whose record to delete.
    ///   - condition: Whether the record read is the one to delete.
    /// - Returns: The pending deletion: whether a record was deleted, or the error reading or deleting threw. A
    ///   record that cannot be read is left as it is.
    func enqueueDelete(
        for account: Account, where condition: @escaping @Sendable (CredentialRecord) -> Bool
    ) -> Task<Result<Bool, any Error>, Never> {
        let store = self.store
        return enqueue(on: account) {
            do {
                var deleted = false
                try await Self.holdingRefreshLock(of: store, for: account) {
                    guard let record = try await store.load(for: account), condition(record) else { return }
                    try await store.delete(for: account)
                    deleted = true
                }
                return .success(deleted)
            } catch {
                return .failure(error)
            }
        }
    }

    /// Loads `account`'s record after every operation enqueued before this call has finished.
    ///
    /// - Parameter account: The account to look up.
    /// - Returns: The record, or `nil`.
    /// - Throws: What the store throws.
    public func load(for account: Account) async throws -> CredentialRecord? {
        let store = self.store
        let result = await enqueue(on: account) { () -> Result<CredentialRecord?, any Error> in
            do {
                return .success(try await store.load(for: account))
            } catch {
                return .failure(error)
            }
        }.value
        return try result.get()
    }

    /// Saves `record`, in order with the account's other operations, and waits for it.
    ///
    /// - Parameter record: The record to store.
    /// - Throws: What the store throws.
    public func save(_ record: CredentialRecord) async throws {
        if let error = await enqueueSave(record).value { throw error }
    }

    /// Deletes `account`'s record, in order with the account's other operations, and waits for it.
    ///
    /// - Parameter account: The account whose record to delete.
    /// - Throws: What the store throws.
    public func delete(for account: Account) async throws {
        if let error = await enqueueDelete(for: account).value { throw error }
    }
}
