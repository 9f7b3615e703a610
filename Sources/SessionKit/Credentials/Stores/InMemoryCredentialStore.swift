import SessionKitOAuth

/// A credential store that keeps records in this process's memory only: for tests and for apps that must
/// not persist credentials at all.
///
/// An actor: each operation runs alone on the records, so none needs a lock of its own.
public actor InMemoryCredentialStore: CredentialStore {
    private var records: [Account: CredentialRecord] = [:]
    /// The lock that coordinates the refreshes of the session managers sharing this store, if any.
    public nonisolated let refreshLock: CrossProcessLock?

    /// Creates an empty store.
    ///
    /// - Parameter refreshLock: A lock for several ``SessionManager``s of one process sharing this store, so that
    ///   they refresh an account once between them; `nil` (the default) for one manager.
    public init(refreshLock: CrossProcessLock? = nil) {
        self.refreshLock = refreshLock
    }

    /// Replaces the record of `record.account`.
    ///
    /// - Parameter record: The record to store.
    public func save(_ record: CredentialRecord) async {
        records[record.account] = record
    }

    /// The record stored for `account`.
    ///
    /// - Parameter account: The account to look up.
    /// - Returns: The record, or `nil`.
    public func load(for account: Account) async -> CredentialRecord? {
        records[account]
    }

    /// Deletes the record of `account`.
    ///
    /// - Parameter account: The account whose record to delete.
    public func delete(for account: Account) async {
        records[account] = nil
    }

    /// Deletes every record.
    public func deleteAll() async {
        records.removeAll()
    }

    /// The accounts that have a record.
    ///
    /// - Returns: The accounts.
    public func accounts() async -> [Account] {
        Array(records.keys)
    }
}
