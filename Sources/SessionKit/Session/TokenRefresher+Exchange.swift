import SessionKitOAuth

extension TokenRefresher {
    /// What a refresh obtained: the access token, and whether it came from another process's refresh.
    struct Obtained {
        let accessToken: String
        /// Whether another process had refreshed already and this one adopted the tokens it stored, sending
        /// nothing.
        let adopted: Bool
    }

    /// Refreshes: with the store's cross-process lock when it has one, else at once. A success is committed to the
    /// session when this returns.
    ///
    /// Every decision is ``RefreshStateMachine/Exchange``'s: this loop performs the action it answers and tells it
    /// what came of it. Holding the lock, the stored record is read again and the exchange decides: end the
    /// session (the record is gone), adopt another process's tokens, or present a refresh token, the newest there
    /// is. The lock is released once the result is stored, and a rejected grant's record deleted.
    ///
    /// - Parameters:
    ///   - id: The flight.
    ///   - refreshToken: The refresh token the flight was started with.
    ///   - session: The session refreshed.
    ///   - cause: Why, for the diagnostics.
    ///   - sent: Set when a token request was sent or another process's tokens adopted: a flight that failed before
    ///     either leaves the loop guard's count (``RefreshStateMachine/flightSettled(_:outcome:reachedProvider:)``).
    /// - Returns: The access token obtained, or the error.
    func run(
        _ id: Machine.FlightID, presenting refreshToken: String, for session: UserSession, cause: String,
        sent: inout Bool
    ) async -> Result<Obtained, SessionError> {
        var exchange = Machine.Exchange(presenting: refreshToken, retryPolicy: policy.retryPolicy)
        let store = session.vault?.store
        let lock = store?.coordination
        var held: HeldStoreLock?
        defer { held?.release() }
        var action = exchange.start(sharedLock: lock != nil)
        // Whether the tokens are bound to a key, read once with the first send: a sign-out that ends the session
        // between the check before a send and the read of the key takes the key with it, and a bound refresh token
        // is never sent without its proof (the server would refuse it, and it would be a request after the end).
        var bound: Bool?
        while true {
            switch action {
            case .acquireLock:
                guard let lock else { return .failure(.endedDuringRefresh) }
                let waitStarted = clock.now
                do {
                    held = try await lock.lock(for: session.account)
                    session.diagnose(
                        .debug, .lockWaited, ["milliseconds": (clock.now - waitStarted).diagnosticMilliseconds])
                } catch let error as SessionError {
                    return .failure(error)
                } catch {
                    return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
                }
                action = exchange.lockAcquired(
                    sessionActive: !Task.isCancelled && session.isActive,
                    unstoredRotation: session.hasUnstoredRotation)
            case .storeRotation:
                // The store refused this session's rotated tokens (locked): the record holds the refresh token they
                // retired, which must never be presented or adopted. Store them first; while that is refused, no
                // refresh.
                guard let store, let tokens = session.tokens else { return .failure(.endedDuringRefresh) }
                do {
                    try await store.save(session.record(for: tokens, selectedAt: session.selectedAt))
                    session.storedPendingRotation()
                } catch {
                    return .failure(
                        error as? SessionError
                            ?? SessionError(
                                .storageFailure, "the rotated tokens could not be stored (\(type(of: error)))"))
                }
                action = exchange.rotationStored()
            case .readRecord:
                // Read from the store itself, not behind this process's queue for the account: a sign-out's deletion
                // queued there waits for this lock.
                guard let store else { return .failure(.endedDuringRefresh) }
                let record: CredentialRecord?
                do {
                    record = try await store.load(for: session.account)
                } catch {
                    return .failure(
                        error as? SessionError
                            ?? SessionError(.storageFailure, "the stored record could not be read (\(type(of: error)))")
                    )
                }
                action = exchange.recordRead(
                    record.map { $0.tokens(clock: clock) }, holding: session.tokens?.accessToken, at: clock.now)
            case .endSignedOutElsewhere:
                session.endSignedOutElsewhere()
                return .failure(SessionError(.sessionEnded, "the account was signed out in another process"))
            case .adopt(let tokens):
                sent = true
                guard case .committed(let accessToken, _) = session.adoptStored(tokens) else {
                    return .failure(SessionError(.sessionEnded, "the session ended before the refresh completed"))
                }
                session.report(.refreshed)
                return .success(Obtained(accessToken: accessToken, adopted: true))
            case .send(let presented):
                // `refresh.started` is told here, where this process asks the provider: a refresh that adopts another
                // process's tokens sends nothing.
                sent = true
                if bound == nil {
                    session.diagnose(.info, .refreshStarted, ["cause": cause])
                    bound = session.tokens?.proofKey != nil
                }
                // Asked of the machine under the lock its ending takes: an ending either comes first and nothing is
                // sent, or finds the request on its way and (keeping the record) lets it run on.
                guard !Task.isCancelled, session.isActive, maySend(id) else {
                    return .failure(.endedDuringRefresh)
                }
                let proofKey = session.tokens?.proofKey
                if bound == true, proofKey == nil { return .failure(.endedDuringRefresh) }
                do {
                    let tokens = try await DiagnosticContext.with(session.configuration, account: session.account) {
                        try await endpoint.refresh(using: presented, for: session.account, proofKey: proofKey)
                    }
                    return await commit(tokens, of: exchange, to: session, flight: id, presented: presented)
                } catch let error as SessionError {
                    action = exchange.sendFailed(
                        error, sessionActive: session.isActive, random: Double.random(in: 0..<1))
                } catch is CancellationError {
                    return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
                } catch {
                    return .failure(SessionError(.networkUnavailable, "token request failed: \(type(of: error))"))
                }
            case .retry(let delay):
                // A released flight sends nothing more (its session ended): no backoff for the account's queue to
                // wait through.
                if wasReleased(id) { return .failure(.endedDuringRefresh) }
                do { try await clock.sleep(for: delay) } catch {
                    return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
                }
                action = exchange.backoffElapsed()
            case .readRejectedRecord:
                action = exchange.rejectedRecordRead(
                    storedRefreshToken: (try? await store?.load(for: session.account))?.refreshToken)
            case .deleteRejectedRecord:
                // Before the lock is released, so no other process presents it again.
                session.lifetime(.beginDeletingRejectedGrant)
                try? await store?.delete(for: session.account)
                await lock?.announceChange(of: session.account)
                action = exchange.rejectedRecordDeleted()
            case .finish(let error):
                return .failure(error)
            }
        }
    }

    /// Commits refreshed `tokens` in one step that first checks the session is still active; then waits for the
    /// store write, so no waiter resumes before the rotated refresh token is durable.
    private func commit(
        _ tokens: TokenSet, of exchange: Machine.Exchange, to session: UserSession, flight id: Machine.FlightID,
        presented: String
    ) async -> Result<Obtained, SessionError> {
        switch session.commitRefreshed(tokens) {
        case .ended:
            if wasReleased(id), !Task.isCancelled {
                await storeRotation(tokens, replacing: presented, ofEnded: session)
            }
            return .failure(SessionError(.sessionEnded, "the session ended before the refresh completed"))
        case .committed(let accessToken, let write):
            if let write {
                let error = await write.value
                switch exchange.rotationWritten(failed: error != nil) {
                case .keepUnstored(let retired):
                    session.lifetime(.rotationRefused(leaving: retired))
                    if let error { session.report(.storageFailed(error)) }
                case .stored:
                    session.storedPendingRotation()
                    session.report(.stored)
                }
            }
            session.report(.refreshed)
            return .success(Obtained(accessToken: accessToken, adopted: false))
        }
    }

    /// Stores the rotation a released flight brought (its session ended, keeping its record, while the token
    /// request was on its way): the server has retired `presented`, and a record left holding it would sign the
    /// account out at its next refresh (reuse detection). Nothing reaches the ended session.
    ///
    /// Written only if the record still holds `presented`: a record deleted (a sign-out) or replaced (a new sign-in,
    /// another process's refresh) meanwhile is left as it is. The flight still holds the store's lock, and the
    /// vault's queue for the account waits for it, so no deletion or refresh is between the read and the write.
    private func storeRotation(_ tokens: TokenSet, replacing presented: String, ofEnded session: UserSession) async {
        guard let store = session.vault?.store, let rotated = tokens.refreshToken, rotated != presented else { return }
        let outcome: String
        do {
            if let stored = try await store.load(for: session.account), stored.refreshToken == presented {
                var merged = tokens
                if merged.idToken == nil { merged.idToken = stored.idToken }
                var record = session.record(for: merged, selectedAt: stored.selectedAt)
                if tokens.idToken == nil { record.providerSessionID = stored.providerSessionID }
                try await store.save(record)
                outcome = "stored"
            } else {
                outcome = "record_changed"
            }
        } catch {
            outcome = "failed (\((error as? SessionError)?.code.rawValue ?? "\(type(of: error))"))"
        }
        session.diagnose(.notice, .refreshStoredAfterEnd, ["outcome": outcome])
    }
}
