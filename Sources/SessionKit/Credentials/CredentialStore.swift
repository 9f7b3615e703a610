import Foundation
import SessionKitOAuth

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

    /// The lock that makes a refresh of one account single-flight across the processes sharing this store, or `nil`
    /// when only one process uses it (the protocol's default; `FileCredentialStore` has one unless told otherwise).
    ///
    /// With a lock, a session holds it around "re-read the stored record, refresh if it still needs it, store", and
    /// uses the tokens another process stored meanwhile instead of refreshing; a record that is gone means the
    /// account was signed out elsewhere, and the session ends. A process that deletes a record announces it beside
    /// the lock (`<lock file>-changes`), and every ``SessionManager`` on the store checks its sessions then. Sharing
    /// the access token between processes means storing it: with a lock, refreshed records hold the access token and
    /// its expiry too (the ID token only with ``UserSession/Configuration/storesIDToken``).
    var refreshLock: CrossProcessLock? { get }

    /// How the processes sharing this store keep a refresh single-flight and learn of each other's deletions, or
    /// `nil` when only one process uses it. By default, ``refreshLock``; a store whose records live on a server
    /// (`PostgresCredentialStore`) coordinates through that server instead.
    ///
    /// Everything ``refreshLock`` describes holds for every coordination: SessionKit uses only this property.
    var coordination: (any StoreCoordination)? { get }
}

extension CredentialStore {
    /// No lock: the store is used by one process.
    public var refreshLock: CrossProcessLock? { nil }

    /// The ``refreshLock``, if any.
    public var coordination: (any StoreCoordination)? { refreshLock }
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
