import Foundation

/// Where an account's credentials live between launches.
///
/// Implementations are named by what backs them: ``InMemoryCredentialStore``, `FileCredentialStore`,
/// `KeychainCredentialStore` (Apple platforms), `SecretServiceCredentialStore` (Linux).
///
/// - Important: ``save(_:)`` replaces the account's whole record atomically: a reader sees the old record or
///   the new one, never a mix. SessionKit serializes the writes and the deletion of one account, so the last
///   operation on a signed-out account's record is always its deletion.
public protocol CredentialStore: Sendable {
    /// Replaces the record of `record.account` with `record`, atomically.
    ///
    /// - Parameter record: The record to store.
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`, `userCancelled`).
    func save(_ record: CredentialRecord) async throws

    /// The record stored for `account`, or `nil` when there is none.
    ///
    /// - Parameter account: The account to look up.
    /// - Returns: The record, or `nil`.
    /// - Throws: ``SessionError`` (`corruptCredentials` for an unreadable or misfiled record, `storageFailure`,
    ///   `storeUnavailable`, `userCancelled`).
    func load(for account: Account) async throws -> CredentialRecord?

    /// Deletes the record of `account`; deleting a record that does not exist succeeds.
    ///
    /// - Parameter account: The account whose record to delete.
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`).
    func delete(for account: Account) async throws

    /// Deletes every record this store holds.
    ///
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`).
    func deleteAll() async throws

    /// The accounts that have a record.
    ///
    /// - Returns: The accounts, in no particular order.
    /// - Throws: ``SessionError`` (`storageFailure`, `storeUnavailable`).
    func accounts() async throws -> [Account]
}

/// A credential store that keeps its records in a directory of its own.
///
/// When the app gives ``SessionManager`` no data directory, the manager keeps its sign-out intents (the purge
/// journal) in a folder inside this directory, so that a sign-out interrupted by a kill is finished at the next
/// launch in that configuration too. ``FileCredentialStore`` is one.
package protocol DirectoryBackedCredentialStore: CredentialStore {
    /// The directory holding the records.
    var directory: URL { get }
}
