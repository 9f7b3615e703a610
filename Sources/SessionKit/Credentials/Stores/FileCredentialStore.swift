import Foundation
import SessionKitOAuth

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A credential store that keeps one JSON file per account in a private directory: for servers, CI jobs and
/// command-line tools, where no keychain or Secret Service is available.
///
/// - Warning: Records are **not encrypted at rest**. They are protected by file permissions only: the
///   directory is `0700` and every file `0600`, so other users cannot read them, but the superuser, anyone
///   with the account's privileges, backups and disk images can. Prefer ``InMemoryCredentialStore`` when
///   nothing must outlive the process, and the Keychain or the Secret Service where they exist.
///
/// Layout: the record of an account is the file named by its ``Account/storageKey``. A save writes a
/// temporary file `.<key>.tmp-<unique>` in the same directory, flushes it to disk, renames it over the
/// record and flushes the directory, so a crash at any point leaves the old record or the new one, whole.
/// A record that cannot be trusted (truncated, garbage, another format version, or filed under another
/// account's name) is renamed to `<key>.corrupt-<UTC timestamp>` (mode `0600`), and the read that found it
/// throws ``SessionError/Code/corruptCredentials``; the next read finds no record.
///
/// The directory is created with mode `0700` (missing parents too). If it exists, it must be a directory
/// owned by the current user; wider permissions are tightened to `0700` rather than refused, because a
/// directory made by `mkdir` under a common umask is `0755` and refusing it would only teach people to work
/// around the check. A directory owned by someone else is refused.
///
/// - Important: Operations on one store run one at a time, in the order they were called, on a queue of
///   their own (never on the cooperative thread pool). Two stores, or two processes, on the same directory
///   are not serialized with each other; each save is still atomic, and the last rename wins. By default the
///   store assumes other processes may open the directory too (a second run of a tool, a server's workers):
///   refreshes of an account are single-flight between them, through the lock file `.refresh.lock` in the
///   directory (see ``CrossProcessLock``), and a sign-out in one ends that account's sessions in the others
///   through the change notice `.refresh.lock-changes` beside it. An app that is sure it is the only process
///   passes `coordinatingProcesses: false`.
public final class FileCredentialStore: DirectoryBackedCredentialStore {
    /// The directory holding the records.
    public let directory: URL
    /// The lock file `.refresh.lock` in ``directory`` when the store was opened with `coordinatingProcesses`,
    /// else `nil`.
    public let refreshLock: CrossProcessLock?
    /// The name of the lock file in the directory.
    package static let lockFileName = ".refresh.lock"

    /// The longest storage key that still leaves room in a 255-byte file name for the temporary and
    /// moved-aside suffixes.
    private static let maximumKeyLength = 200
    private static let temporaryMarker = ".tmp-"
    private static let corruptMarker = ".corrupt-"

    private let path: String
    private let queue = BlockingWorkQueue(label: "SessionKit.FileCredentialStore")

    /// Opens the store in `directory`, creating the directory with mode `0700` if it does not exist.
    ///
    /// - Parameters:
    ///   - directory: A directory only this user can read, such as `~/.local/state/<app>/credentials`; it is
    ///     created, and an existing one with wider permissions is tightened to `0700`.
    ///   - coordinatingProcesses: Whether other processes may use the directory too (an app and its
    ///     extensions, several copies of a tool, a server's workers); `true` unless the app says otherwise. Each
    ///     account's refresh is then single-flight across them, through the lock file `.refresh.lock` in the
    ///     directory; refreshed records hold the access token too, so the others can use it (never the ID token
    ///     unless ``UserSession/Configuration/storesIDToken`` asks); and a deletion of a record (a sign-out, a
    ///     rejected grant) ends that account's sessions in the other processes within milliseconds. Every process must pass the same value. `false` stores no access token and watches
    ///     nothing: right only when one process at a time opens the directory.
    ///   - lockTimeout: The bound on a wait for the lock (``CrossProcessLock/timeout``).
    /// - Throws: ``SessionError`` `storageFailure` when the directory cannot be created, is not a directory,
    ///   belongs to another user, cannot be made private, or is not writable.
    public init(directory: URL, coordinatingProcesses: Bool = true, lockTimeout: Duration = .seconds(30)) throws {
        self.directory = directory.standardizedFileURL
        self.path = self.directory.path
        self.refreshLock =
            coordinatingProcesses
            ? CrossProcessLock(file: self.directory.appendingPathComponent(Self.lockFileName), timeout: lockTimeout)
            : nil
        try Self.prepareDirectory(path)
    }

    /// Replaces the record of `record.account` with `record`, atomically and durably.
    ///
    /// - Parameter record: The record to store; it must be of the version this build writes.
    /// - Throws: ``SessionError`` `storageFailure` when the directory cannot be written (the previous record,
    ///   if any, is then intact), `invalidInput` for a record of another version or an account whose storage key
    ///   is too long for a file name.
    /// - Important: A reader, or a process that crashes mid-save, sees the old record or the new one, never a
    ///   mix. If only the final flush of the directory fails, the new record is in place but its durability
    ///   across a power loss is unknown, and the error says so.
    public func save(_ record: CredentialRecord) async throws {
        let key = try Self.fileName(for: record.account)
        try await queue.run { [path] in
            // Encoded here, so the one buffer holding the tokens is the one wiped.
            var bytes = try CredentialRecordCoding.encode(record)
            defer { SecureWipe.wipe(&bytes) }
            try Self.writeAtomically(bytes, key: key, in: path)
        }
    }

    /// The record stored for `account`, or `nil` when there is none.
    ///
    /// - Parameter account: The account to look up.
    /// - Returns: The record, or `nil`.
    /// - Throws: ``SessionError`` `corruptCredentials` when the file cannot be trusted (it has been moved aside,
    ///   so the next call returns `nil`), `storageFailure` when it cannot be read.
    public func load(for account: Account) async throws -> CredentialRecord? {
        let key = try Self.fileName(for: account)
        return try await queue.run { [path] () throws -> CredentialRecord? in
            do {
                return try Self.read(key: key, account: account, in: path)
            } catch let error as SessionError where error.code == .corruptCredentials {
                let aside = try Self.moveAside(key: key, in: path)
                throw SessionError(.corruptCredentials, "\(error.message); moved aside to \(aside)")
            }
        }
    }

    /// Deletes the record of `account` and anything else of it in the directory (leftover temporary files,
    /// records moved aside), then flushes the directory.
    ///
    /// - Parameter account: The account whose record to delete; deleting a missing record succeeds.
    /// - Throws: ``SessionError`` `storageFailure` when a file cannot be removed.
    public func delete(for account: Account) async throws {
        let key = try Self.fileName(for: account)
        try await queue.run { [path] in
            try Self.remove(in: path) { name in
                name == key || name.hasPrefix(".\(key)\(Self.temporaryMarker)")
                    || name.hasPrefix("\(key)\(Self.corruptMarker)")
            }
        }
    }

    /// Deletes every record, temporary file and moved-aside record in the directory; files the store did not
    /// write are left alone.
    ///
    /// - Throws: ``SessionError`` `storageFailure` when a file cannot be removed.
    public func deleteAll() async throws {
        try await queue.run { [path] in
            try Self.remove(in: path) { Self.owner(ofEntry: $0) != nil }
        }
    }

    /// The accounts that have a valid record; temporary files, moved-aside records and records that fail
    /// their checks are not listed (``load(for:)`` reports and moves aside the latter).
    ///
    /// - Returns: The accounts, in no particular order.
    /// - Throws: ``SessionError`` `storeUnavailable` when this process may not read the directory or a record now
    ///   (permissions), `storageFailure` when they cannot be read otherwise.
    public func accounts() async throws -> [Account] {
        try await queue.run { [path] in
            var accounts: [Account] = []
            for name in try Self.entries(in: path) {
                guard let account = Account(storageKey: name) else { continue }
                do {
                    if let record = try Self.read(key: name, account: account, in: path) {
                        accounts.append(record.account)
                    }
                } catch let error as SessionError where error.code == .corruptCredentials {
                    continue
                }
            }
            return accounts
        }
    }

    // MARK: - Files

    private static func fileName(for account: Account) throws(SessionError) -> String {
        let key = account.storageKey
        guard key.utf8.count <= maximumKeyLength else {
            throw SessionError(
                .invalidInput,
                "the account's issuer and subject are too long to name a file "
                    + "(storage key of \(key.utf8.count) characters, at most \(maximumKeyLength))"
            )
        }
        return key
    }

    /// The storage key an entry of the directory belongs to, or `nil` for a file the store did not write.
    private static func owner(ofEntry name: String) -> String? {
        if Account(storageKey: name) != nil { return name }
        if name.hasPrefix("."), let marker = name.range(of: temporaryMarker) {
            let key = String(name[name.index(after: name.startIndex)..<marker.lowerBound])
            return Account(storageKey: key) != nil ? key : nil
        }
        if let marker = name.range(of: corruptMarker) {
            let key = String(name[..<marker.lowerBound])
            return Account(storageKey: key) != nil ? key : nil
        }
        return nil
    }

    private static func prepareDirectory(_ path: String) throws(SessionError) {
        func failure(_ problem: String) -> SessionError {
            SessionError(.storageFailure, "the credential directory \(path) \(problem)")
        }
        var status = stat()
        if stat(path, &status) != 0 {
            if errno == ENOTDIR {
                throw failure("cannot be created: a part of its path is a file, not a directory")
            }
            guard errno == ENOENT else {
                throw failure("cannot be examined: \(POSIXFile.Failure(errorNumber: errno).reason)")
            }
            // Create missing parents too, each private: they may hold nothing else yet.
            var prefix = ""
            for component in path.split(separator: "/", omittingEmptySubsequences: true) {
                prefix += "/\(component)"
                if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                    throw failure("cannot be created (\(prefix)): \(POSIXFile.Failure(errorNumber: errno).reason)")
                }
            }
            guard stat(path, &status) == 0 else {
                throw failure("cannot be examined: \(POSIXFile.Failure(errorNumber: errno).reason)")
            }
        }
        guard status.st_mode & S_IFMT == S_IFDIR else { throw failure("exists and is not a directory") }
        guard status.st_uid == geteuid() else {
            throw failure("belongs to another user (uid \(status.st_uid)); refusing to keep credentials there")
        }
        if status.st_mode & 0o7777 != 0o700 && chmod(path, 0o700) != 0 {
            throw failure(
                "has mode \(String(status.st_mode & 0o7777, radix: 8)) and cannot be made private (0700): "
                    + POSIXFile.Failure(errorNumber: errno).reason
            )
        }
        guard access(path, W_OK | X_OK) == 0 else {
            throw failure("is not writable: \(POSIXFile.Failure(errorNumber: errno).reason)")
        }
    }

    private static func entries(in path: String) throws(SessionError) -> [String] {
        do {
            return try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            // Not readable by this process now (its permissions, or a sandbox, changed): not an empty store.
            if access(path, R_OK | X_OK) != 0 && (errno == EACCES || errno == EPERM) {
                throw SessionError(.storeUnavailable, "the credential directory \(path) cannot be read now")
            }
            throw SessionError(.storageFailure, "cannot list the credential directory \(path)")
        }
    }

    private static func writeAtomically(_ bytes: Data, key: String, in path: String) throws(SessionError) {
        func failure(_ step: String, _ error: POSIXFile.Failure) -> SessionError {
            SessionError(
                .storageFailure, "cannot save the credential record \(key) in \(path): \(step): \(error.reason)")
        }
        var temporary = ""
        var descriptor: Int32 = -1
        // A unique name, so an interrupted save of another process never collides with this one.
        while descriptor < 0 {
            let unique = "\(getpid())-\(String(UInt64.random(in: .min ... .max), radix: 16))"
            temporary = "\(path)/.\(key)\(temporaryMarker)\(unique)"
            do {
                descriptor = try POSIXFile.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600)
            } catch  where error.errorNumber == EEXIST {
                continue
            } catch {
                throw failure("cannot create a temporary file (is the directory writable?)", error)
            }
        }
        var renamed = false
        defer {
            if descriptor >= 0 { _ = close(descriptor) }
            if !renamed { _ = unlink(temporary) }
        }
        // The umask may have narrowed the mode further; set it exactly.
        guard fchmod(descriptor, 0o600) == 0 else {
            throw failure("cannot set the temporary file's mode", POSIXFile.Failure(errorNumber: errno))
        }
        let written: Result<Void, POSIXFile.Failure> = bytes.withUnsafeBytes { buffer in
            Result { () throws(POSIXFile.Failure) in
                try POSIXFile.writeAll(descriptor, buffer)
                try POSIXFile.synchronize(descriptor)
            }
        }
        if case .failure(let error) = written { throw failure("cannot write the temporary file", error) }
        let closed = close(descriptor)
        descriptor = -1
        guard closed == 0 else {
            throw failure("cannot close the temporary file", POSIXFile.Failure(errorNumber: errno))
        }
        guard rename(temporary, "\(path)/\(key)") == 0 else {
            throw failure("cannot move the temporary file into place", POSIXFile.Failure(errorNumber: errno))
        }
        renamed = true
        do {
            try POSIXFile.synchronizeDirectory(path)
        } catch {
            throw failure("the new record is in place but the directory could not be flushed", error)
        }
    }

    private static func read(key: String, account: Account, in path: String) throws(SessionError) -> CredentialRecord? {
        let file = "\(path)/\(key)"
        let descriptor: Int32
        do {
            descriptor = try POSIXFile.open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch  where error.errorNumber == ENOENT {
            return nil
        } catch  where error.errorNumber == ELOOP {
            throw SessionError(.corruptCredentials, "the credential record \(key) is a symbolic link")
        } catch  where error.errorNumber == EACCES || error.errorNumber == EPERM {
            // A record this process may not read now is not a missing one: nothing is concluded from it.
            throw SessionError(.storeUnavailable, "the credential record \(key) in \(path) cannot be read now")
        } catch {
            throw SessionError(.storageFailure, "cannot open the credential record \(key) in \(path): \(error.reason)")
        }
        defer { _ = close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw SessionError(.storageFailure, "cannot examine the credential record \(key) in \(path)")
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw SessionError(.corruptCredentials, "the credential record \(key) is not a regular file")
        }
        // A record readable by others was exposed already; at least stop it from staying so.
        if status.st_mode & 0o077 != 0 { _ = fchmod(descriptor, 0o600) }
        let contents: Data?
        do {
            contents = try POSIXFile.readAll(
                descriptor,
                limit: CredentialRecordCoding.maximumEncodedSize,
                expectedSize: Int(status.st_size)
            )
        } catch {
            throw SessionError(.storageFailure, "cannot read the credential record \(key) in \(path): \(error.reason)")
        }
        guard var bytes = contents else {
            throw SessionError(.corruptCredentials, "the credential record \(key) is larger than a record can be")
        }
        defer { SecureWipe.wipe(&bytes) }
        return try CredentialRecordCoding.decode(bytes, for: account, source: key)
    }

    /// Renames an untrustworthy record out of the way and returns its new name.
    private static func moveAside(key: String, in path: String) throws(SessionError) -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02dZ",
            Int(parts.tm_year) + 1900,
            Int(parts.tm_mon) + 1,
            Int(parts.tm_mday),
            Int(parts.tm_hour),
            Int(parts.tm_min),
            Int(parts.tm_sec)
        )
        var name = "\(key)\(corruptMarker)\(stamp)"
        var attempt = 1
        while access("\(path)/\(name)", F_OK) == 0 {
            attempt += 1
            name = "\(key)\(corruptMarker)\(stamp)-\(attempt)"
        }
        guard rename("\(path)/\(key)", "\(path)/\(name)") == 0 else {
            throw SessionError(
                .storageFailure,
                "the credential record \(key) in \(path) is corrupt and cannot be moved aside: "
                    + POSIXFile.Failure(errorNumber: errno).reason
            )
        }
        // It may still hold a live refresh token: keep it as private as a record.
        _ = chmod("\(path)/\(name)", 0o600)
        try? POSIXFile.synchronizeDirectory(path)
        return name
    }

    private static func remove(in path: String, where matches: (String) -> Bool) throws(SessionError) {
        var failures: [String] = []
        for name in try entries(in: path) where matches(name) {
            do {
                try POSIXFile.unlinkIfPresent("\(path)/\(name)")
            } catch {
                failures.append("\(name): \(error.reason)")
            }
        }
        do {
            try POSIXFile.synchronizeDirectory(path)
        } catch {
            failures.append("flushing the directory: \(error.reason)")
        }
        guard failures.isEmpty else {
            throw SessionError(
                .storageFailure,
                "cannot delete from the credential directory \(path): \(failures.joined(separator: "; "))"
            )
        }
    }
}
