import SessionKit
import Testing

@Suite struct RetryPolicyTests {
    @Test func fullJitterDrawsBelowTheDoublingCeiling() {
        let policy = RetryPolicy(maximumAttempts: 5, baseDelay: .milliseconds(100), maximumDelay: .seconds(10))
        #expect(policy.delay(beforeAttempt: 2, random: 0) == .zero)
        #expect(policy.delay(beforeAttempt: 2, random: 0.5) == .milliseconds(50))
        #expect(policy.delay(beforeAttempt: 3, random: 0.5) == .milliseconds(100))
        #expect(policy.delay(beforeAttempt: 4, random: 0.25) == .milliseconds(100))
    }

    @Test func withoutJitterEveryWaitIsTheWholeCeiling() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100), usesJitter: false)
        #expect(!policy.usesJitter)
        #expect(policy.delay(beforeAttempt: 2, random: 0) == .milliseconds(100))
        #expect(policy.delay(beforeAttempt: 3, random: 0.1) == .milliseconds(200))
        #expect(RetryPolicy().usesJitter)
    }

    @Test func retryAfterIsAFloorAndMaximumDelayACap() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maximumDelay: .seconds(2))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0.5) == .seconds(1))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .seconds(30), random: 0.5) == .seconds(2))
        #expect(policy.delay(beforeAttempt: 40, random: 1) == .seconds(2))
        let steady = RetryPolicy(baseDelay: .milliseconds(100), maximumDelay: .seconds(2), usesJitter: false)
        #expect(steady.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0) == .seconds(1))
    }
}
