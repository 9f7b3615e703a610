import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RetryPolicyTests {
    /// A short set of statuses is scanned and a long one hashed: both answer only for their own members.
    @Test(arguments: [Set([429, 502, 503, 504]), Set(500..<520), Set<Int>()])
    func retriesExactlyTheStatusesItNames(_ statuses: Set<Int>) {
        let policy = RetryPolicy(retryableStatuses: statuses)
        for status in [100, 200, 204, 304, 401, 404, 429, 500, 502, 503, 504, 519, 520, 599] {
            #expect(policy.retries(status: status) == statuses.contains(status), "status \(status)")
        }
    }

    /// The set can be changed after the policy is made; the statuses it then names are the ones retried.
    @Test func retriesTheStatusesItNamesAfterTheyChange() {
        var policy = RetryPolicy()
        policy.retryableStatuses = [200, 503]
        #expect(policy.retries(status: 200))
        #expect(policy.retries(status: 503))
        #expect(!policy.retries(status: 429))
        policy.retryableStatuses = []
        #expect(!policy.retries(status: 503))
    }

    /// Every field of a policy can be changed after it is made (the documented way to adjust the default one), and
    /// the policy then follows the new values.
    @Test func everyFieldCanBeChangedAfterThePolicyIsMade() {
        var policy = RetryPolicy()
        policy.maximumAttempts = 7
        policy.baseDelay = .milliseconds(10)
        policy.maximumDelay = .milliseconds(40)
        policy.usesJitter = false
        #expect(policy.maximumAttempts == 7)
        #expect(policy.delay(beforeAttempt: 2, retryAfter: nil, random: 0.5) == .milliseconds(10))
        #expect(policy.delay(beforeAttempt: 6, retryAfter: nil, random: 0.5) == .milliseconds(40))
    }

    /// The ceiling doubles with each attempt up to 2^30 times the base and stays there (the shift never overflows,
    /// whatever the attempt number): seen with a base small enough that the maximum delay is not what stops it.
    @Test func theCeilingStopsDoublingAfterThirtyDoublings() {
        let policy = RetryPolicy(
            maximumAttempts: .max, baseDelay: .nanoseconds(1), maximumDelay: .seconds(100), usesJitter: false)
        #expect(policy.delay(beforeAttempt: 3, random: 0) == .nanoseconds(2))
        #expect(policy.delay(beforeAttempt: 32, random: 0) == .nanoseconds(1 << 30))
        #expect(policy.delay(beforeAttempt: 33, random: 0) == .nanoseconds(1 << 30))
        #expect(policy.delay(beforeAttempt: .max, random: 0) == .nanoseconds(1 << 30))
    }

    /// RFC 9110 §9.2.2: the idempotent methods may be sent again without the caller's say-so; any other only with
    /// an `Idempotency-Key`.
    @Test func onlyIdempotentMethodsOrKeyedRequestsAreReplayable() {
        func request(_ method: String, key: String? = nil) -> URLRequest {
            var request = URLRequest(url: URL(string: "https://api.example/r")!)
            request.httpMethod = method
            request.setValue(key, forHTTPHeaderField: "Idempotency-Key")
            return request
        }
        for method in ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE", "delete"] {
            #expect(RetryPolicy.isReplayable(request(method)), "\(method)")
        }
        for method in ["POST", "PATCH", "CONNECT", ""] {
            #expect(!RetryPolicy.isReplayable(request(method)), "\(method)")
            #expect(RetryPolicy.isReplayable(request(method, key: "k-1")), "\(method) with a key")
        }
    }

    @Test func fullJitterDrawsBelowTheDoublingCeiling() {
        let policy = RetryPolicy(maximumAttempts: 5, baseDelay: .milliseconds(100), maximumDelay: .seconds(10))
        #expect(policy.delay(beforeAttempt: 2, random: 0) == .zero)
        #expect(policy.delay(beforeAttempt: 2, random: 0.5) == .milliseconds(50))
        #expect(policy.delay(beforeAttempt: 3, random: 0.5) == .milliseconds(100))
        #expect(policy.delay(beforeAttempt: 4, random: 0.25) == .milliseconds(100))
        // A draw outside 0 ..< 1 is clamped into it: never a negative wait, never one past the ceiling.
        #expect(policy.delay(beforeAttempt: 2, random: -0.5) == .zero)
        #expect(policy.delay(beforeAttempt: 2, random: 7) == .milliseconds(100))
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
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0) == .seconds(1))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .seconds(30), random: 0.5) == .seconds(2))
        #expect(policy.delay(beforeAttempt: 40, random: 1) == .seconds(2))
        let steady = RetryPolicy(baseDelay: .milliseconds(100), maximumDelay: .seconds(2), usesJitter: false)
        #expect(steady.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0) == .seconds(1))
        #expect(steady.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0.9) == .seconds(1))
    }

    /// Clients told the same `Retry-After` must not all come back at that instant: the waits are spread over
    /// the interval after it, never before it.
    @Test func waitsAfterRetryAfterAreSpreadNotSynchronized() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100), maximumDelay: .seconds(10))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0.5) == .milliseconds(1500))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0.999) < .seconds(2))
        // A backoff ceiling longer than Retry-After widens the spread.
        let slow = RetryPolicy(baseDelay: .seconds(4), maximumDelay: .seconds(10))
        #expect(slow.delay(beforeAttempt: 2, retryAfter: .seconds(1), random: 0.5) == .seconds(3))
        // 1,000 clients: every wait at or after Retry-After, and no 100 ms slice holds more than a few times
        // its share.
        var generator = SeededGenerator(seed: 42)
        var buckets = [Int](repeating: 0, count: 10)
        for _ in 0..<1000 {
            let wait = policy.delay(
                beforeAttempt: 2, retryAfter: .seconds(1), random: Double.random(in: 0..<1, using: &generator))
            #expect(wait >= .seconds(1) && wait < .seconds(2))
            let slice = Int((wait - .seconds(1)) / .milliseconds(100))
            buckets[min(max(slice, 0), 9)] += 1
        }
        #expect(buckets.allSatisfy { $0 > 0 }, "\(buckets)")
        #expect(buckets.max()! < 300, "\(buckets)")
    }

    @Test func aZeroOrAbsentRetryAfterKeepsFullJitter() {
        let policy = RetryPolicy(baseDelay: .milliseconds(100))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: .zero, random: 0.5) == .milliseconds(50))
        #expect(policy.delay(beforeAttempt: 2, retryAfter: nil, random: 0) == .zero)
    }
}
