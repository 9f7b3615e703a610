import Foundation
import SessionKitOAuth

/// Records the intent to purge an account before the purge starts, so a purge that a crash or a kill
/// interrupted is finished at next launch, before anything authenticates.
///
/// With a directory, intents are files (`<storage key>.json`, written atomically and synced); without one,
/// they live in memory and do not survive the process.
final class PurgeJournal: Sendable {
    private let directory: URL?
    private let memory = Lock<Set<Account>>([])

    init(directory: URL?) {
        self.directory = directory
    }

    private func file(for account: Account) -> URL? {
        directory?.appendingPathComponent("\(account.storageKey).json")
    }

    /// Durably records that `account` is to be purged.
    func record(_ account: Account) throws {
        memory.withLock { _ = $0.insert(account) }
        guard let directory, let file = file(for: account) else { return }
        do {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try JSONEncoder().encode(account).write(to: file, options: .atomic)
            let handle = try FileHandle(forUpdating: file)
            try handle.synchronize()
            try handle.close()
        } catch {
            throw SessionError(.storageFailure, "could not record the purge intent: \(error.localizedDescription)")
        }
    }

    /// Forgets the intent once the purge completed.
    func complete(_ account: Account) {
        memory.withLock { _ = $0.remove(account) }
        if let file = file(for: account) { try? FileManager.default.removeItem(at: file) }
    }

    /// Whether `account`'s purge was asked for and not completed.
    func isPending(_ account: Account) -> Bool {
        if memory.withLock({ $0.contains(account) }) { return true }
        guard let file = file(for: account) else { return false }
        return FileManager.default.fileExists(atPath: file.path)
    }

    /// The accounts whose purge was asked for and not completed.
    func pending() -> [Account] {
        var accounts = memory.withLock { $0 }
        if let directory,
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path)
        {
            for name in names {
                let url = directory.appendingPathComponent(name)
                guard name.hasSuffix(".json") else {
                    // The temporary file of an intent whose atomic write a crash interrupted: it names an account
                    // whose sign-out never became durable, and must not outlive it. The directory is the journal's.
                    try? FileManager.default.removeItem(at: url)
                    continue
                }
                if let data = try? Data(contentsOf: url),
                    let account = try? JSONDecoder().decode(Account.self, from: data)
                {
                    accounts.insert(account)
                } else {
                    // An intent that cannot be read names no account we could purge; drop it.
                    try? FileManager.default.removeItem(at: url)
                }
            }
        }
        return Array(accounts)
    }
}
