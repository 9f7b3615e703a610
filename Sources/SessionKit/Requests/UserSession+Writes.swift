import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Sends a write (POST, PUT, PATCH, DELETE) with a policy for what sign-out does if it is still in flight.
    ///
    /// - `.wait(d)`: sign-out waits up to `d` for it, then cancels it.
    /// - `.handOff`: it runs on a URLSession of its own that sign-out lets finish; its outcome is kept by the
    ///   manager for the same account's next session (``SessionManager/takeWriteReconciliations(for:)``). It is
    ///   never replayed.
    /// - `.discard`: sign-out cancels it; the manager tells the account's next session to fetch the server's
    ///   state instead of replaying it.
    ///
    /// - Parameters:
    ///   - request: The write; it carries this session's token.
    ///   - policy: What sign-out does with it.
    /// - Returns: The body and the response.
    /// - Throws: What ``data(for:)`` throws.
    /// - Important: The policy applies only to a write still in flight when sign-out reaches it; a write is never
    ///   replayed automatically under another session, whatever its policy.
    public func write(_ request: URLRequest, policy: WritePolicy) async throws -> (Data, HTTPURLResponse) {
        let done = Broadcast<Void>()
        guard let id = lifetime(.beginWrite(PendingWrite(policy: policy, done: done))).id else {
            throw SessionError.ended
        }
        defer {
            lifetime(.endWrite(id))
            done.resolve(.success(()))
        }
        let summary = "\(request.httpMethod ?? "GET") \(request.url?.path ?? "")"
        switch policy {
        case .wait, .discard:
            do {
                return try await data(for: request)
            } catch let error as SessionError where error.code == .sessionEnded && policy == .discard {
                ledger?.record(.discarded(summary: summary), for: account)
                throw error
            }
        case .handOff:
            do {
                let result = try await sendHandedOff(request)
                if !isActive {
                    ledger?.record(.completed(summary: summary, status: result.1.statusCode), for: account)
                }
                return result
            } catch {
                if !isActive {
                    let code = (error as? SessionError)?.code ?? .networkUnavailable
                    ledger?.record(.failed(summary: summary, code: code), for: account)
                }
                throw error
            }
        }
    }

    /// The writes in flight now, with their policies and completion signals (for sign-out).
    var pendingWrites: [PendingWrite] {
        guard case .writes(let writes) = lifetime(.pendingWrites) else { return [] }
        return writes
    }
}
