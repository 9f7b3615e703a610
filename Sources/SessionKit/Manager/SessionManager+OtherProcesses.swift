import Foundation
import SessionKitOAuth

extension SessionManager {
    /// A change to the shared store was announced (``StoreCoordination/announceChange(of:)``): checks the live
    /// sessions it names against the store. Notices that arrive during a check run one more check after it, of every
    /// account they named, not one check each.
    ///
    /// - Parameter change: The notice: which sessions to check, and whether it reads as this process's own (for the
    ///   event only: this process's own notices are checked too, since another process's may have been overwritten
    ///   by it).
    func storeChanged(_ change: StoreChange) {
        let start = send(.storeChanged(change.scope)).checkScope
        diagnose(
            .debug, .crossProcessNotice, account: nil,
            ["from": change.fromThisProcess ? "this_process" : "another_process"])
        guard let start else { return }
        Task { [weak self] in
            guard let self else { return }
            var scope: StoreChange.Scope? = start
            while let next = scope {
                await self.endSessionsSignedOutElsewhere(next)
                scope = self.send(.checked).checkScope
            }
        }
    }

    /// Ends, as signed out elsewhere, every live session in `scope` whose account no longer has a record in the
    /// store.
    ///
    /// Each record is read behind the account's pending operations here (a record this process is still writing is
    /// found). Only a read that succeeds and finds nothing counts: a store that cannot be read now (locked, a
    /// cancelled prompt) proves nothing, and the session goes on. A session that ends here is refused every request
    /// from that instant, and its requests in flight are cancelled. A session whose record this process's refresher
    /// is deleting because the server rejected its grant is left to that rejection (the notice was this process's
    /// own). Each pass ends with a debug event saying how many sessions it checked and ended.
    ///
    /// - Parameter scope: The sessions to check.
    func endSessionsSignedOutElsewhere(_ scope: StoreChange.Scope = .everyAccount) async {
        let live = snapshot.sessions.filter { scope.includes($0.account) }
        var checked = 0
        var ended = 0
        for session in live where session.isActive && !session.isDeletingRejectedGrant {
            checked += 1
            let record: CredentialRecord?
            do {
                record = try await vault.load(for: session.account)
            } catch {
                continue
            }
            if record == nil, !session.isDeletingRejectedGrant {
                ended += 1
                session.endSignedOutElsewhere()
            }
        }
        diagnose(.debug, .crossProcessReconciled, account: nil, ["checked": "\(checked)", "ended": "\(ended)"])
    }
}
