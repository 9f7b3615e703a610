import Foundation
import SessionKitOAuth

extension SessionManager {
    /// A change to the shared store was announced (``CrossProcessLock/announceChange()``): checks every live session
    /// against it. Notices that arrive during a check run one more check after it, not one each.
    ///
    /// - Parameter own: Whether the notice reads as this process's own, for the event only (read only when a sink
    ///   keeps debug events): this process's own
    ///   notices are checked too (another process's may have been overwritten by it).
    func storeChanged(own: @autoclosure () -> Bool) {
        let start = send(.storeChanged).flag
        diagnose(.debug, .crossProcessNotice, account: nil, ["from": own() ? "this_process" : "another_process"])
        guard start else { return }
        Task { [weak self] in
            guard let self else { return }
            repeat {
                await self.endSessionsSignedOutElsewhere()
            } while self.send(.checked).flag
        }
    }

    /// Ends, as signed out elsewhere, every live session whose account no longer has a record in the store.
    ///
    /// Each record is read behind the account's pending operations here (a record this process is still writing is
    /// found). Only a read that succeeds and finds nothing counts: a store that cannot be read now (locked, a
    /// cancelled prompt) proves nothing, and the session goes on. A session that ends here is refused every request
    /// from that instant, and its requests in flight are cancelled. A session whose record this process's refresher
    /// is deleting because the server rejected its grant is left to that rejection (the notice was this process's
    /// own). Each pass ends with a debug event saying how many sessions it checked and ended.
    func endSessionsSignedOutElsewhere() async {
        let live = snapshot.sessions
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
