import Foundation
import SessionKitOAuth

/// What a write in flight at sign-out does: a policy chosen per kind of write.
public enum WritePolicy: Sendable, Hashable {
    /// Sign-out waits up to this long for the write before cancelling it: for small writes the user just made.
    case wait(Duration)
    /// The write completes in the background after sign-out; its outcome is reported to the same account's
    /// next session, never to another account.
    case handOff
    /// Sign-out cancels the write; the same account's next session is told to fetch the server's state
    /// instead of replaying it.
    case discard
}

/// What became of a write that was in flight at sign-out, kept for the same account's next session
/// (``SessionManager/takeWriteReconciliations(for:)``).
///
/// Each case names the write by its ``summary``: the method and URL path, no query, no body, no headers, nothing
/// personal or secret.
public enum WriteReconciliation: Sendable, Hashable, CustomStringConvertible {
    /// A handed-off write completed after sign-out with this HTTP status.
    case completed(summary: String, status: Int)
    /// A handed-off write failed after sign-out; whether it applied is unknown.
    case failed(summary: String, code: SessionError.Code)
    /// The write was cancelled at sign-out: fetch the server's state rather than replaying it.
    case discarded(summary: String)

    /// The method and URL path of the write, such as `POST /comments`.
    public var summary: String {
        switch self {
        case .completed(let summary, _), .failed(let summary, _), .discarded(let summary): summary
        }
    }

    /// The summary and how the write ended, such as `POST /comments: completed (201)`.
    public var description: String {
        switch self {
        case .completed(let summary, let status): "\(summary): completed (\(status))"
        case .failed(let summary, let code): "\(summary): failed (\(code))"
        case .discarded(let summary): "\(summary): discarded"
        }
    }
}

/// Keeps, per account, what became of writes in flight at sign-out, until that account signs in again.
///
/// Entries of one account are handed only to a session of that same account (`take(for:)`), so nothing of
/// one user's writes is ever reconciled, or replayed, as another. Apps read it through
/// ``SessionManager/takeWriteReconciliations(for:)``.
package final class WriteLedger: Sendable {
    private let entries = Lock<[Account: [WriteReconciliation]]>([:])

    /// Creates an empty ledger.
    package init() {}

    func record(_ entry: WriteReconciliation, for account: Account) {
        entries.withLock { $0[account, default: []].append(entry) }
    }

    /// Removes and returns the entries of `account`.
    ///
    /// - Parameter account: The account signing in again.
    /// - Returns: What became of its writes, oldest first.
    package func take(for account: Account) -> [WriteReconciliation] {
        entries.withLock { $0.removeValue(forKey: account) ?? [] }
    }

    /// The entries of `account`, left in place.
    ///
    /// - Parameter account: The account.
    /// - Returns: Its entries, oldest first.
    package func entries(for account: Account) -> [WriteReconciliation] {
        entries.withLock { $0[account] ?? [] }
    }
}
