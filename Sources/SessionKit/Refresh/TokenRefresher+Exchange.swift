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
    /// Holding the lock, the stored record is read again and
    /// ``RefreshStateMachine/storedRecordRead(_:presenting:holding:at:)`` decides: end the session (the record is
    /// gone), adopt another process's tokens, or present a refresh token, the newest there is. The lock is released
    /// once the result is stored.
    func run(
        presenting refreshToken: String, for session: UserSession, cause: String
    ) async -> Result<Obtained, SessionError> {
        guard let store = session.vault?.store, let lock = store.refreshLock else {
            return await exchange(presenting: refreshToken, for: session, cause: cause)
        }
        let held: CrossProcessLock.Held
        let waitStarted = ContinuousClock.now
        do {
            held = try await lock.acquire()
            session.diagnose(
                .debug, .lockWaited, ["milliseconds": (ContinuousClock.now - waitStarted).diagnosticMilliseconds])
        } catch let error as SessionError {
            return .failure(error)
        } catch {
            return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
        }
        defer { held.release() }
        guard !Task.isCancelled, session.isActive else {
            return .failure(.endedDuringRefresh)
        }
        // The store refused this session's rotated tokens (locked): the record holds the refresh token they
        // retired, which must never be presented or adopted. Store them first; while that is refused, no refresh.
        if session.hasUnstoredRotation {
            guard let tokens = session.tokens else { return .failure(.endedDuringRefresh) }
            do {
                try await store.save(session.record(for: tokens, selectedAt: session.selectedAt))
                session.storedPendingRotation()
            } catch {
                return .failure(
                    error as? SessionError
                        ?? SessionError(.storageFailure, "the rotated tokens could not be stored (\(type(of: error)))"))
            }
        }
        // Read from the store itself, not behind this process's queue for the account: a sign-out's deletion
        // queued there waits for this lock.
        let record: CredentialRecord?
        do {
            record = try await store.load(for: session.account)
        } catch {
            return .failure(
                error as? SessionError
                    ?? SessionError(.storageFailure, "the stored record could not be read (\(type(of: error)))"))
        }
        let decision = Machine.storedRecordRead(
            record.map { $0.tokens(clock: clock) }, presenting: refreshToken, holding: session.tokens?.accessToken,
            at: clock.now)
        let presented: String
        switch decision {
        case .signedOutElsewhere:
            session.endSignedOutElsewhere()
            return .failure(SessionError(.sessionEnded, "the account was signed out in another process"))
        case .adopt(let tokens):
            guard case .committed(let accessToken, _) = session.adoptStored(tokens) else {
                return .failure(SessionError(.sessionEnded, "the session ended before the refresh completed"))
            }
            session.report(.refreshed)
            return .success(Obtained(accessToken: accessToken, adopted: true))
        case .present(let refreshToken):
            presented = refreshToken
        }
        let outcome = await exchange(presenting: presented, for: session, cause: cause)
        // A rejected grant's record is deleted before the lock is released, so no other process presents it again.
        if case .failure(let error) = outcome, error.endsGrant,
            (try? await store.load(for: session.account))?.refreshToken == presented
        {
            session.lifetime(.beginDeletingRejectedGrant)
            try? await store.delete(for: session.account)
            lock.announceChange()
        }
        return outcome
    }

    /// Sends the refresh (with retries of transient failures) and commits its result. `refresh.started` is told
    /// here, where this process asks the provider: a refresh that adopts another process's tokens sends nothing.
    private func exchange(
        presenting refreshToken: String, for session: UserSession, cause: String
    ) async -> Result<Obtained, SessionError> {
        session.diagnose(.info, .refreshStarted, ["cause": cause])
        var attempt = 1
        // Whether the tokens are bound to a key, read once with the refresh token: a sign-out that ends the session
        // between the check below and the read of the key takes the key with it, and a bound refresh token is never
        // sent without its proof (the server would refuse it, and it would be a request after the end).
        let bound = session.tokens?.proofKey != nil
        while true {
            guard !Task.isCancelled, session.isActive else {
                return .failure(.endedDuringRefresh)
            }
            let proofKey = session.tokens?.proofKey
            if bound, proofKey == nil { return .failure(.endedDuringRefresh) }
            do {
                let tokens = try await DiagnosticContext.with(session.configuration, account: session.account) {
                    try await endpoint.refresh(using: refreshToken, for: session.account, proofKey: proofKey)
                }
                // Commit in one step that first checks the session is still active; then wait for the store
                // write, so no waiter resumes before the rotated refresh token is durable.
                switch session.commitRefreshed(tokens) {
                case .ended:
                    return .failure(SessionError(.sessionEnded, "the session ended before the refresh completed"))
                case .committed(let accessToken, let write):
                    if let write {
                        if let error = await write.value {
                            session.lifetime(.rotationRefused(leaving: refreshToken))
                            session.report(.storageFailed(error))
                        } else {
                            session.storedPendingRotation()
                            session.report(.stored)
                        }
                    }
                    session.report(.refreshed)
                    return .success(Obtained(accessToken: accessToken, adopted: false))
                }
            } catch let error as SessionError where error.isTransient && attempt < policy.retryPolicy.maximumAttempts {
                attempt += 1
                let delay = policy.retryPolicy.delay(
                    beforeAttempt: attempt,
                    retryAfter: error.retryAfter,
                    random: Double.random(in: 0..<1)
                )
                do { try await clock.sleep(for: delay) } catch {
                    return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
                }
            } catch let error as SessionError {
                if error.code == .sessionEnded || !session.isActive {
                    return .failure(.endedDuringRefresh)
                }
                return .failure(error)
            } catch is CancellationError {
                return .failure(SessionError(.sessionEnded, "the refresh was cancelled"))
            } catch {
                return .failure(SessionError(.networkUnavailable, "token request failed: \(type(of: error))"))
            }
        }
    }
}
