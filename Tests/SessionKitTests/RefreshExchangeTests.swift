import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// One flight's run without sockets, stores or clocks: each transition of ``RefreshStateMachine/Exchange``'s table,
/// and the proactive margin.
@Suite struct RefreshExchangeTests {
    typealias Exchange = RefreshStateMachine<String>.Exchange

    let now = ContinuousClock.now
    let policy = RetryPolicy(maximumAttempts: 3, baseDelay: .milliseconds(500), usesJitter: false)

    func exchange(presenting refreshToken: String = "r0") -> Exchange {
        Exchange(presenting: refreshToken, retryPolicy: policy)
    }

    func stored(_ access: String, refresh: String?, remaining: Duration?) -> TokenSet {
        TokenSet(accessToken: access, refreshToken: refresh, lifetime: remaining, receivedAt: now)
    }

    var transient: SessionError { SessionError(.providerOutage, "503", statusCode: 503) }
    var rejected: SessionError { SessionError(.refreshRejected, "invalid_grant", oauthError: "invalid_grant") }

    /// An exchange that took the lock and read a record holding the token in hand: it is sending, under the lock.
    func sendingUnderLock() -> Exchange {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        _ = exchange.lockAcquired(sessionActive: true, unstoredRotation: false)
        _ = exchange.recordRead(stored("t0", refresh: "r0", remaining: .seconds(60)), holding: "t0", at: now)
        return exchange
    }

    // MARK: - Start and the lock

    @Test(.timeLimit(.minutes(1))) func withoutASharedLockTheHeldRefreshTokenIsSentAtOnce() {
        var exchange = exchange()
        #expect(exchange.start(sharedLock: false) == .send(refreshToken: "r0"))
        #expect(exchange.attempt == 1)
    }

    @Test(.timeLimit(.minutes(1))) func withASharedLockTheLockIsTakenFirst() {
        var exchange = exchange()
        #expect(exchange.start(sharedLock: true) == .acquireLock)
    }

    @Test(.timeLimit(.minutes(1))) func aSessionThatEndedWhileWaitingForTheLockSendsNothing() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        let action = exchange.lockAcquired(sessionActive: false, unstoredRotation: true)
        #expect(action == .finish(.endedDuringRefresh))
    }

    /// Rule: the store still holds the refresh token an unstored rotation retired; the rotation is stored before
    /// the record is read, so the retired token is never presented or adopted.
    @Test(.timeLimit(.minutes(1))) func anUnstoredRotationIsStoredBeforeTheRecordIsRead() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        #expect(exchange.lockAcquired(sessionActive: true, unstoredRotation: true) == .storeRotation)
        #expect(exchange.rotationStored() == .readRecord)
    }

    @Test(.timeLimit(.minutes(1))) func withoutAnUnstoredRotationTheRecordIsReadAtOnce() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        #expect(exchange.lockAcquired(sessionActive: true, unstoredRotation: false) == .readRecord)
    }

    // MARK: - The record read under the lock

    @Test(.timeLimit(.minutes(1))) func aRecordThatIsGoneEndsTheSession() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        _ = exchange.lockAcquired(sessionActive: true, unstoredRotation: false)
        #expect(exchange.recordRead(nil, holding: "t0", at: now) == .endSignedOutElsewhere)
    }

    @Test(.timeLimit(.minutes(1))) func anotherProcesssUsableTokensAreAdopted() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        _ = exchange.lockAcquired(sessionActive: true, unstoredRotation: false)
        let rotated = stored("t1", refresh: "r1", remaining: .seconds(60))
        #expect(exchange.recordRead(rotated, holding: "t0", at: now) == .adopt(rotated))
    }

    @Test(.timeLimit(.minutes(1))) func theNewestStoredRefreshTokenIsPresented() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: true)
        _ = exchange.lockAcquired(sessionActive: true, unstoredRotation: false)
        let action = exchange.recordRead(stored("", refresh: "r1", remaining: .zero), holding: "t0", at: now)
        #expect(action == .send(refreshToken: "r1"))
        #expect(exchange.presented == "r1")
        #expect(exchange.attempt == 1)
    }

    // MARK: - Retries

    /// Rule: a transient failure is retried after the policy's backoff, presenting the same token, until the
    /// policy's attempts are spent; then it is the run's failure.
    @Test(.timeLimit(.minutes(1))) func transientFailuresAreRetriedUpToThePolicysAttempts() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: false)
        let first = exchange.sendFailed(transient, sessionActive: true, random: 0.5)
        #expect(first == .retry(after: policy.delay(beforeAttempt: 2, retryAfter: nil, random: 0.5)))
        #expect(exchange.attempt == 2)
        #expect(exchange.backoffElapsed() == .send(refreshToken: "r0"))
        let second = exchange.sendFailed(transient, sessionActive: true, random: 0.5)
        #expect(second == .retry(after: policy.delay(beforeAttempt: 3, retryAfter: nil, random: 0.5)))
        #expect(exchange.sendFailed(transient, sessionActive: true, random: 0.5) == .finish(transient))
    }

    @Test(.timeLimit(.minutes(1))) func aRetryWaitsAtLeastTheServersRetryAfter() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: false)
        let outage = SessionError(.providerOutage, "429", statusCode: 429, retryAfter: .seconds(4))
        guard case .retry(let delay) = exchange.sendFailed(outage, sessionActive: true, random: 0) else {
            Issue.record("a transient failure was not retried")
            return
        }
        #expect(delay >= .seconds(4))
    }

    @Test(.timeLimit(.minutes(1))) func aFailureOnceTheSessionEndedIsTheEnd() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: false)
        let failure = SessionError(.authorizationFailed, "invalid_client", statusCode: 401)
        #expect(exchange.sendFailed(failure, sessionActive: false, random: 0) == .finish(.endedDuringRefresh))
        var ended = self.exchange()
        _ = ended.start(sharedLock: false)
        let own = SessionError(.sessionEnded, "ended")
        #expect(ended.sendFailed(own, sessionActive: true, random: 0) == .finish(.endedDuringRefresh))
    }

    @Test(.timeLimit(.minutes(1))) func aFailureThatIsNotTransientIsTheRunsFailure() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: false)
        let failure = SessionError(.authorizationFailed, "invalid_client", statusCode: 401)
        #expect(exchange.sendFailed(failure, sessionActive: true, random: 0) == .finish(failure))
    }

    // MARK: - A rejected grant

    @Test(.timeLimit(.minutes(1))) func aRejectionWithoutTheSharedLockDeletesNothingHere() {
        var exchange = exchange()
        _ = exchange.start(sharedLock: false)
        #expect(exchange.sendFailed(rejected, sessionActive: true, random: 0) == .finish(rejected))
    }

    /// Rule: a rejected grant's record is deleted under the lock only when it still holds the refresh token that
    /// was rejected; a record holding another is another process's newer grant.
    @Test(.timeLimit(.minutes(1))) func aRejectedGrantsRecordIsDeletedOnlyWhenItHoldsTheRejectedToken() {
        var holding = sendingUnderLock()
        #expect(holding.sendFailed(rejected, sessionActive: true, random: 0) == .readRejectedRecord)
        #expect(holding.rejectedRecordRead(storedRefreshToken: "r0") == .deleteRejectedRecord)
        #expect(holding.rejectedRecordDeleted() == .finish(rejected))

        var newer = sendingUnderLock()
        _ = newer.sendFailed(rejected, sessionActive: true, random: 0)
        #expect(newer.rejectedRecordRead(storedRefreshToken: "r1") == .finish(rejected))

        var gone = sendingUnderLock()
        _ = gone.sendFailed(rejected, sessionActive: true, random: 0)
        #expect(gone.rejectedRecordRead(storedRefreshToken: nil) == .finish(rejected))
    }

    @Test(.timeLimit(.minutes(1))) func aRejectedIDTokenEndsTheGrantToo() {
        var exchange = sendingUnderLock()
        let someoneElse = SessionError(.idTokenRejected, "another account", idTokenCheck: .sameAccount)
        #expect(exchange.sendFailed(someoneElse, sessionActive: true, random: 0) == .readRejectedRecord)
    }

    // MARK: - The rotation's store write

    /// Rule: a refresh whose rotated tokens the store refused leaves the presented (retired) refresh token in the
    /// store, and the session remembers it until the rotation is stored.
    @Test(.timeLimit(.minutes(1))) func aRefusedWriteKeepsTheRotationUnstoredWithThePresentedTokenInTheStore() {
        let exchange = sendingUnderLock()
        #expect(exchange.rotationWritten(failed: true) == .keepUnstored(retiredInStore: "r0"))
        #expect(exchange.rotationWritten(failed: false) == .stored)
    }

    // MARK: - Events out of order

    @Test(.timeLimit(.minutes(1))) func anEventOutOfOrderEndsTheRunAndSendsNothing() {
        var exchange = exchange()
        #expect(exchange.rotationStored() == .finish(.endedDuringRefresh))
        var notLocking = self.exchange()
        _ = notLocking.start(sharedLock: false)
        #expect(notLocking.lockAcquired(sessionActive: true, unstoredRotation: false) == .finish(.endedDuringRefresh))
        var notChecking = self.exchange()
        _ = notChecking.start(sharedLock: false)
        #expect(notChecking.rejectedRecordRead(storedRefreshToken: "r0") == .finish(.endedDuringRefresh))
    }

    // MARK: - The proactive margin

    @Test(.timeLimit(.minutes(1))) func aTokenCountsAsExpiringTheMarginBeforeItExpires() {
        let tokens = TokenSet(accessToken: "t0", lifetime: .seconds(3600), receivedAt: now)
        let from = RefreshStateMachine<String>.expiringFrom(tokens, margin: .seconds(75))
        #expect(from == now.advanced(by: .seconds(3600 - 75)))
        #expect(RefreshStateMachine<String>.expiringFrom(TokenSet(accessToken: "t0"), margin: .seconds(75)) == nil)
    }
}
