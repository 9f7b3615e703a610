import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Feeds the lifetime one event, in one critical section, and returns its answer for the caller to act on
    /// once the lock is released.
    @inline(__always)
    @discardableResult
    func lifetime(_ event: Lifetime.Event) -> Lifetime.Action {
        lifetime(event) { $0 }
    }

    /// Feeds the lifetime one event and acts on its answer before the lock is released: the one entry point of
    /// the session's lock.
    ///
    /// Only three kinds of effect may be performed inside, each because it must be in the same step as the decision
    /// that admitted it, and none waits for anything that takes this lock: enqueueing (a credential write or a
    /// deletion, so that the vault's order is the lifetime's: the last operation on an ended account's record is its
    /// deletion), creating a task on a URLSession the session keeps (so that `end()`, which takes this lock before
    /// it invalidates that URLSession, finds every task created on it), and creating a download's file (so that once
    /// `end()` has returned, and a sign-out purges the account's directory after it, no file of the account
    /// appears). Nothing is built here: a URLSession is made outside and offered back
    /// (``Lifetime/offerTransfers(_:)``).
    @inline(__always)
    func lifetime<Result>(
        _ event: Lifetime.Event, inside perform: (Lifetime.Action) throws -> Result
    ) rethrows -> Result {
        try lifetimeLock.withLock { lifetime in try perform(lifetime.handle(event)) }
    }
}

extension UserSession.Lifetime {
    /// What a URLSession the session makes on first use is, when asked for (``handoffSupply(nonceFor:)``,
    /// ``transferSupply(nonceFor:)``).
    enum Supply<Made> {
        /// Use this one, with the credential and the nonce to send (`nil` without a token).
        case use(Made, UserSession.Credential?, nonce: String?)
        /// None is made yet: make one outside the lock and offer it.
        case make
        /// The session has ended: make none.
        case ended
    }

    /// What became of a URLSession offered to the lifetime.
    enum Offer<Made> {
        /// It is the session's now.
        case kept
        /// Another was kept first (or the session ended, `nil`): invalidate the one offered, and use this one.
        case spare(Made?)
    }

    /// What happens to the lifetime: each case is one critical section of ``UserSession/lifetime(_:)``.
    enum Event {
        case isActive, tokens, requestCount, endHandlerCount, pendingWrites, selectedAt, eventHandler
        case storableTokens, rotation, sessions, seal, end
        case setEventHandler((@Sendable (SessionEvent) -> Void)?)
        /// The credential to send if the session is active, whether it is expiring at the instant (if given) and
        /// the nonce for the URL.
        case credential(at: ContinuousClock.Instant?, nonceFor: URL?)
        /// The tokens held if the session is active, and whether they are expiring at the instant.
        case held(at: ContinuousClock.Instant)
        case register(InFlightRequest)
        case forget(Int)
        case complete(Int?)
        case beginWrite(UserSession.PendingWrite)
        case endWrite(Int)
        case addEndHandler(@Sendable () -> Void)
        case removeEndHandler(Int)
        case handoff(nonceFor: URL?)
        case offerHandoff(URLSession)
        case transfers(nonceFor: URL?)
        case offerTransfers(TransferSession)
        case downloads(temporary: URL)
        case useDownloadsDirectory(URL?)
        case commitRefreshed(TokenSet, refreshedBy: TokenRefresher?)
        case adopt(TokenSet, refreshedBy: TokenRefresher?)
        case select(Date)
        case restoreSelection(Date?)
        case noteNonce(String, for: URL?)
        case rotationRefused(leaving: String)
        case stored(refreshToken: String?)
        case beginDeletingRejectedGrant
    }

    /// The lifetime's answer to an event.
    enum Action {
        case none
        case flag(Bool)
        case id(Int?)
        case count(Int)
        case tokens(TokenSet?)
        case credential(UserSession.Credential?, expiring: Bool, nonce: String?)
        case writes([UserSession.PendingWrite])
        case date(Date?)
        case eventHandler((@Sendable (SessionEvent) -> Void)?)
        case handoff(Supply<URLSession>)
        case transfers(Supply<TransferSession>)
        case offeredHandoff(Offer<URLSession>)
        case offeredTransfers(Offer<TransferSession>)
        /// The URLSessions made on first use, and whether the session is active (if not, `end()` took them).
        case sessions(active: Bool, handoff: URLSession?, transfers: TransferSession?)
        case directory(URL)
        /// Tokens now held, whether they may be stored, and the selection to store with them; `nil` tokens when
        /// the session had ended.
        case commit(TokenSet?, storable: Bool, selectedAt: Date?)
        /// The tokens to store (`nil` when none may be) and the selection to store with them.
        case storable(TokenSet?, selectedAt: Date?)
        case rotation(unstored: Bool, leftInStore: String?, deletingRejectedGrant: Bool)
        case ended(Ended?)
        /// Whether this seal was the first, or `nil` when the session had ended.
        case sealed(Bool?)
        /// The tokens held if the session is active, and whether they are expiring.
        case held(TokenSet?, expiring: Bool)

        var flag: Bool {
            if case .flag(let flag) = self { return flag }
            return false
        }
        var id: Int? {
            if case .id(let id) = self { return id }
            return nil
        }
        var tokens: TokenSet? {
            if case .tokens(let tokens) = self { return tokens }
            return nil
        }
        var date: Date? {
            if case .date(let date) = self { return date }
            return nil
        }
    }

    /// Performs `event`'s transition and returns what the caller must do.
    @inline(__always)
    mutating func handle(_ event: Event) -> Action {
        switch event {
        case .credential(let now, let url):
            guard isActive, let credential else { return .credential(nil, expiring: false, nonce: nil) }
            return .credential(
                credential, expiring: now.map(isExpiring(at:)) ?? false, nonce: nonce(for: url, of: credential))
        case .register(let request): return .id(register(request))
        case .complete(let id): return .flag(complete(id))
        case .forget(let id):
            forget(id)
            return .none
        case .isActive: return .flag(isActive)
        case .tokens: return .tokens(tokens)
        case .held(let now):
            guard isActive, let tokens else { return .held(nil, expiring: false) }
            return .held(tokens, expiring: isExpiring(at: now))
        case .requestCount: return .count(requestCount)
        case .endHandlerCount: return .count(endHandlerCount)
        case .pendingWrites: return .writes(pendingWrites)
        case .selectedAt: return .date(selectedAt)
        case .eventHandler: return .eventHandler(activeEventHandler)
        case .setEventHandler(let handler):
            setEventHandler(handler)
            return .none
        case .storableTokens: return .storable(storableTokens, selectedAt: selectedAt)
        case .rotation:
            return .rotation(
                unstored: unstoredRotation, leftInStore: refreshTokenLeftInStore,
                deletingRejectedGrant: deletingRejectedGrant)
        case .sessions: return .sessions(active: isActive, handoff: handoffSession, transfers: transfers)
        case .seal: return .sealed(sealCredentials())
        case .end: return .ended(end())
        case .beginWrite(let write): return .id(beginWrite(write))
        case .endWrite(let id):
            endWrite(id)
            return .none
        case .addEndHandler(let handler): return .id(addEndHandler(handler))
        case .removeEndHandler(let key):
            removeEndHandler(key)
            return .none
        case .handoff(let url): return .handoff(handoffSupply(nonceFor: url))
        case .offerHandoff(let made): return .offeredHandoff(offerHandoff(made))
        case .transfers(let url): return .transfers(transferSupply(nonceFor: url))
        case .offerTransfers(let made): return .offeredTransfers(offerTransfers(made))
        case .downloads(let temporary): return .directory(downloads { temporary })
        case .useDownloadsDirectory(let directory):
            useDownloadsDirectory(directory)
            return .none
        case .commitRefreshed(let tokens, let refresher):
            let committed = commitRefreshed(tokens, refreshedBy: refresher)
            return .commit(committed?.tokens, storable: committed?.storable ?? false, selectedAt: selectedAt)
        case .adopt(let tokens, let refresher):
            return .commit(
                adopt(tokens, refreshedBy: refresher) ? tokens : nil, storable: false, selectedAt: selectedAt)
        case .select(let date): return .tokens(select(at: date))
        case .restoreSelection(let date):
            restoreSelection(date)
            return .none
        case .noteNonce(let nonce, let url):
            noteNonce(nonce, for: url)
            return .none
        case .rotationRefused(let presented):
            rotationRefused(leaving: presented)
            return .none
        case .stored(let refreshToken):
            stored(refreshToken: refreshToken)
            return .none
        case .beginDeletingRejectedGrant:
            beginDeletingRejectedGrant()
            return .none
        }
    }
}

extension UserSession {
    /// An access token and the `Authorization` header value that sends it: worked out once when the session holds
    /// its tokens (``Lifetime/hold(_:refreshedBy:)``), read by every request.
    struct Credential {
        let token: String
        let authorization: String
        /// The DPoP key every request with the token carries a proof of, if the token is bound.
        let proofKey: DPoPKey?
        /// The proofs' `ath` for this token (RFC 9449 §4.2), when it is bound: the same for every proof.
        let proofTokenHash: String?

        init(tokens: TokenSet) {
            token = tokens.accessToken
            proofKey = tokens.proofKey
            proofTokenHash = tokens.proofKey == nil ? nil : DPoPProof.tokenHash(tokens.accessToken)
            authorization = (tokens.proofKey == nil ? "Bearer " : "DPoP ") + tokens.accessToken
        }
    }
}
