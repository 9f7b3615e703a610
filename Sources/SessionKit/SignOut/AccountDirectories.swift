import Foundation
import SessionKitOAuth

/// Where a manager keeps each account's files, and the one outbox of each account.
///
/// Every path below the data directory is built here and nowhere else: an account's directory
/// (`accounts/<storage key>`, its `downloads` folder among its files), the outbox kept for an account's next sign-in (`kept-outbox/<storage key>.json`) and
/// the purge journal (`purge-pending`).
final class AccountDirectories: Sendable {
    /// The app-chosen root, or `nil` when everything stays in memory.
    let root: URL?
    private let outboxes = Lock<[Account: Outbox]>([:])

    init(root: URL?) {
        self.root = root
    }

    /// The folder of `account`'s files, without creating it.
    func location(of account: Account) -> URL? {
        root?.appendingPathComponent("accounts").appendingPathComponent(account.storageKey)
    }

    /// The folder `account`'s sessions download into, inside its own folder so that the purge removes it too.
    func downloads(of account: Account) -> URL? {
        location(of: account)?.appendingPathComponent("downloads")
    }

    /// The outbox set aside at `account`'s last sign-out.
    func keptOutbox(of account: Account) -> URL? {
        root?.appendingPathComponent("kept-outbox").appendingPathComponent("\(account.storageKey).json")
    }

    /// The folder of the purge journal, if the data directory holds it.
    var journal: URL? { root?.appendingPathComponent("purge-pending") }

    /// `account`'s folder, created on first use (mode 0700).
    func directory(for account: Account) -> URL? {
        guard let url = location(of: account) else { return nil }
        try? FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        return url
    }

    /// The one outbox of `account` until its purge: every caller shares it, so no two instances lose each other's
    /// writes.
    func outbox(for account: Account) -> Outbox {
        outbox(for: account, reloading: false)
    }

    /// `account`'s outbox: the one it has, or, when there is none or `reloading` (its file was just replaced), a new
    /// one loaded from its file, in one step so that every caller gets the same instance.
    private func outbox(for account: Account, reloading: Bool) -> Outbox {
        outboxes.withLock { outboxes in
            if !reloading, let outbox = outboxes[account] { return outbox }
            let outbox = Outbox(
                account: account,
                file: location(of: account)?.appendingPathComponent("outbox.json")
            )
            outboxes[account] = outbox
            return outbox
        }
    }

    /// Moves the outbox set aside at `account`'s last sign-out back into its folder, unless it has one already.
    func restoreKeptOutbox(for account: Account) -> Outbox {
        var moved = false
        if let kept = keptOutbox(of: account), let directory = directory(for: account) {
            let target = directory.appendingPathComponent("outbox.json")
            let fileManager = FileManager.default
            if fileManager.fileExists(atPath: kept.path), !fileManager.fileExists(atPath: target.path) {
                // Not read by the outbox the account already has, if any: it is replaced by one that loads the file.
                try? fileManager.moveItem(at: kept, to: target)
                moved = true
            }
        }
        return outbox(for: account, reloading: moved)
    }

    /// Closes `account`'s outbox, then removes its folder, setting its outbox aside first when asked to.
    ///
    /// - Returns: Whether the folder is gone.
    func purge(_ account: Account, outbox disposition: SignOutOptions.OutboxDisposition) -> Bool {
        // Closed before the files go: a write enqueued from now on is refused instead of recreating the folder.
        outboxes.withLock { $0.removeValue(forKey: account) }?.close()
        guard let directory = location(of: account), let kept = keptOutbox(of: account) else { return true }
        let fileManager = FileManager.default
        let outboxFile = directory.appendingPathComponent("outbox.json")
        switch disposition {
        case .keepForAccount where fileManager.fileExists(atPath: outboxFile.path):
            try? fileManager.createDirectory(
                at: kept.deletingLastPathComponent(),
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try? fileManager.removeItem(at: kept)
            try? fileManager.moveItem(at: outboxFile, to: kept)
        case .keepForAccount:
            break
        case .delete:
            try? fileManager.removeItem(at: kept)
        }
        do {
            if fileManager.fileExists(atPath: directory.path) { try fileManager.removeItem(at: directory) }
            return true
        } catch {
            return false
        }
    }
}
