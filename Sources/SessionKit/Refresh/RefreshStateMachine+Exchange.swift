import SessionKitOAuth

extension RefreshStateMachine {
    /// One flight's run, as a value: whether it takes the shared store's lock, stores a rotation the store refused
    /// first, what it presents, whether a failure is retried and after how long, and whether a rejected grant's
    /// record is deleted.
    ///
    /// Pure, like the machine: the refresher performs each action and answers with the event it led to. The session
    /// facts an event needs (whether it is still active, whether it holds an unstored rotation, the access token it
    /// holds) and the random draw of the backoff come in as arguments.
    ///
    /// | Step                  | Event                                         | Action                           | Next step         |
    /// |-----------------------|-----------------------------------------------|----------------------------------|-------------------|
    /// | start                 | `start(sharedLock: true)`                     | `.acquireLock`                   | locking           |
    /// | start                 | `start(sharedLock: false)`                    | `.send(held refresh)`            | sending, try 1    |
    /// | locking               | `lockAcquired`, session no longer active      | `.finish(ended)`                 | done              |
    /// | locking               | `lockAcquired`, an unstored rotation          | `.storeRotation`                 | storing           |
    /// | locking               | `lockAcquired`, otherwise                     | `.readRecord`                    | reading           |
    /// | storing               | `rotationStored`                              | `.readRecord`                    | reading           |
    /// | reading               | `recordRead`, none                            | `.endSignedOutElsewhere`         | done              |
    /// | reading               | `recordRead`, another's usable access token   | `.adopt(stored)`                 | done              |
    /// | reading               | `recordRead`, otherwise                       | `.send(the flight's or newest)`  | sending, try 1    |
    /// | sending, try n        | `sendFailed(transient)`, n < attempts         | `.retry(after: backoff(n + 1))`  | sending, try n+1  |
    /// | sending               | `sendFailed`, `sessionEnded` or not active    | `.finish(ended)`                 | done              |
    /// | sending, under lock   | `sendFailed(ends the grant)`                  | `.readRejectedRecord`            | checking          |
    /// | sending               | `sendFailed`, otherwise                       | `.finish(error)`                 | done              |
    /// | sending               | `backoffElapsed`                              | `.send(the same)`                | sending           |
    /// | checking              | `rejectedRecordRead`, it holds the presented  | `.deleteRejectedRecord`          | deleting          |
    /// | checking              | `rejectedRecordRead`, anything else           | `.finish(the rejection)`         | done              |
    /// | deleting              | `rejectedRecordDeleted`                       | `.finish(the rejection)`         | done              |
    ///
    /// "Backoff(n)" is the retry policy's delay before attempt n, at least the failure's `Retry-After`.
    /// "Unstored rotation": this session's rotated tokens were refused by the store, which still holds the refresh
    /// token they retired; it must never be presented or adopted, so they are stored before anything is read. A
    /// rejected grant's record is deleted under the lock, so no other process presents it again, and only when it
    /// still holds the token that was rejected: a record holding another is another process's newer grant. After a
    /// refresh has committed, ``rotationWritten(failed:)`` says what the session keeps of a store write that failed.
    struct Exchange: Sendable {
        /// What the refresher does next.
        enum Action: Equatable, Sendable {
            /// Take the shared store's cross-process lock.
            case acquireLock
            /// Store the session's rotated tokens, which the store refused before.
            case storeRotation
            /// Read the stored record, from the store itself.
            case readRecord
            /// Send a refresh presenting this refresh token.
            case send(refreshToken: String)
            /// Wait this long, then tell ``backoffElapsed()``.
            case retry(after: Duration)
            /// End the session: the account was signed out in another process.
            case endSignedOutElsewhere
            /// Hold these tokens another process stored; present nothing.
            case adopt(TokenSet)
            /// Read the stored record again, to learn whether it holds the rejected refresh token.
            case readRejectedRecord
            /// Delete the stored record: it holds the rejected grant.
            case deleteRejectedRecord
            /// The run failed with this error.
            case finish(SessionError)
        }

        /// What the session keeps after a committed refresh's store write.
        enum RotationAction: Equatable, Sendable {
            /// The write failed: the rotation is unstored, and the store still holds this retired refresh token.
            case keepUnstored(retiredInStore: String)
            /// The write succeeded: no rotation is pending.
            case stored
        }

        private enum Step: Equatable {
            case start, locking, storing, reading, sending, checking, deleting, done
        }

        /// How transient failures are retried.
        let retryPolicy: RetryPolicy
        /// The refresh token presented: the flight's, until the stored record names a newer one.
        private(set) var presented: String
        /// The attempt in progress, from 1; 0 before the first send.
        private(set) var attempt = 0
        private var step = Step.start
        private var underLock = false
        private var rejection: SessionError?

        /// A run presenting `refreshToken`, retrying as `retryPolicy` says.
        init(presenting refreshToken: String, retryPolicy: RetryPolicy) {
            self.presented = refreshToken
            self.retryPolicy = retryPolicy
        }

        /// The run starts: with the store's cross-process lock when it has one.
        mutating func start(sharedLock: Bool) -> Action {
            guard step == .start else { return finish(.endedDuringRefresh) }
            guard sharedLock else { return send(presented) }
            step = .locking
            return .acquireLock
        }

        /// The lock is held.
        ///
        /// - Parameters:
        ///   - sessionActive: Whether the session is still active (and the task not cancelled).
        ///   - unstoredRotation: Whether the session holds rotated tokens the store refused.
        /// - Returns: What to do next.
        mutating func lockAcquired(sessionActive: Bool, unstoredRotation: Bool) -> Action {
            guard step == .locking, sessionActive else { return finish(.endedDuringRefresh) }
            underLock = true
            if unstoredRotation {
                step = .storing
                return .storeRotation
            }
            step = .reading
            return .readRecord
        }

        /// The unstored rotation is stored now.
        mutating func rotationStored() -> Action {
            guard step == .storing else { return finish(.endedDuringRefresh) }
            step = .reading
            return .readRecord
        }

        /// The stored record was read (``RefreshStateMachine/storedRecordRead(_:presenting:holding:at:)`` decides).
        ///
        /// - Parameters:
        ///   - stored: The record's tokens; `nil` when there is none.
        ///   - heldAccessToken: The access token the session holds now.
        ///   - now: The instant of the read.
        /// - Returns: What to do next.
        mutating func recordRead(
            _ stored: TokenSet?, holding heldAccessToken: String?, at now: ContinuousClock.Instant
        ) -> Action {
            guard step == .reading else { return finish(.endedDuringRefresh) }
            let decision = RefreshStateMachine.storedRecordRead(
                stored, presenting: presented, holding: heldAccessToken, at: now)
            switch decision {
            case .signedOutElsewhere:
                step = .done
                return .endSignedOutElsewhere
            case .adopt(let tokens):
                step = .done
                return .adopt(tokens)
            case .present(let refreshToken):
                return send(refreshToken)
            }
        }

        /// A send failed with `error`.
        ///
        /// - Parameters:
        ///   - error: The failure.
        ///   - sessionActive: Whether the session is still active.
        ///   - random: A uniform draw in `0..<1` for the backoff's jitter.
        /// - Returns: What to do next.
        mutating func sendFailed(_ error: SessionError, sessionActive: Bool, random: Double) -> Action {
            guard step == .sending else { return finish(.endedDuringRefresh) }
            if error.isTransient, attempt < retryPolicy.maximumAttempts {
                attempt += 1
                return .retry(
                    after: retryPolicy.delay(beforeAttempt: attempt, retryAfter: error.retryAfter, random: random))
            }
            if error.code == .sessionEnded || !sessionActive { return finish(.endedDuringRefresh) }
            if error.endsGrant, underLock {
                rejection = error
                step = .checking
                return .readRejectedRecord
            }
            return finish(error)
        }

        /// The backoff before a retry has passed: send again, presenting the same token.
        func backoffElapsed() -> Action {
            guard step == .sending else { return .finish(.endedDuringRefresh) }
            return .send(refreshToken: presented)
        }

        /// The record was read again after a rejection.
        ///
        /// - Parameter storedRefreshToken: Its refresh token; `nil` when there is none or it could not be read.
        /// - Returns: What to do next.
        mutating func rejectedRecordRead(storedRefreshToken: String?) -> Action {
            guard step == .checking, let rejection else { return finish(.endedDuringRefresh) }
            guard storedRefreshToken == presented else { return finish(rejection) }
            step = .deleting
            return .deleteRejectedRecord
        }

        /// The rejected grant's record was deleted.
        mutating func rejectedRecordDeleted() -> Action {
            guard step == .deleting, let rejection else { return finish(.endedDuringRefresh) }
            return finish(rejection)
        }

        /// A committed refresh's store write finished.
        ///
        /// - Parameter failed: Whether the store refused it.
        /// - Returns: What the session keeps: the store still holds the presented refresh token when it failed.
        func rotationWritten(failed: Bool) -> RotationAction {
            failed ? .keepUnstored(retiredInStore: presented) : .stored
        }

        private mutating func send(_ refreshToken: String) -> Action {
            presented = refreshToken
            attempt = 1
            step = .sending
            return .send(refreshToken: refreshToken)
        }

        private mutating func finish(_ error: SessionError) -> Action {
            step = .done
            return .finish(error)
        }
    }

    /// How long before expiry a token of `lifetime` is refreshed proactively: the leeway plus this session's share
    /// of the jitter (`offset`), scaled down for short-lived tokens so that the margin is never more than half the
    /// lifetime.
    ///
    /// Without the scaling a token that lives no longer than the leeway would look expired the moment it arrived and
    /// every request would refresh. Scaled, a token is refreshed at the earliest half-way through its life, keeping
    /// the jitter's spread in proportion.
    static func margin(lifetime: Duration?, leeway: Duration, jitter: Duration, offset: Duration) -> Duration {
        let full = leeway + offset
        guard let lifetime, lifetime > .zero else { return full }
        let ceiling = leeway + jitter
        let half = lifetime / 2
        guard ceiling > half, ceiling > .zero else { return full }
        return full * (half / ceiling)
    }

    /// The instant from which `tokens`' access token counts as expiring: `margin` before it expires; `nil` when the
    /// server gave no lifetime.
    static func expiringFrom(_ tokens: TokenSet, margin: Duration) -> ContinuousClock.Instant? {
        tokens.expiresAt.map { $0.advanced(by: .zero - margin) }
    }
}
