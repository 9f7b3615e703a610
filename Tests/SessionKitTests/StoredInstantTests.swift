import Foundation
import Testing

@testable import SessionKit

/// `StoredInstant`, the fixed-layout form in which the request path keeps continuous-clock instants: it must give
/// back exactly the instant it was given, order as instants do, and take instants far from now (a test's manual
/// clock moved by years).
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct StoredInstantTests {
    @Test(arguments: [
        Duration.zero, .nanoseconds(1), .seconds(-1), .seconds(3601), .seconds(-3601),
        .seconds(3_155_760_000), .seconds(-3_155_760_000), Duration(secondsComponent: 7, attosecondsComponent: 1),
    ])
    func anInstantComesBackExactly(offset: Duration) {
        let instant = ContinuousClock.now.advanced(by: offset)
        let stored = StoredInstant(instant)
        #expect(stored.instant == instant)
        #expect(StoredInstant(stored.instant) == stored)
    }

    @Test func storedInstantsOrderAsTheirInstants() {
        let now = ContinuousClock.now
        let instants = [
            now.advanced(by: .seconds(-5)), now, now.advanced(by: .nanoseconds(1)), now.advanced(by: .seconds(9)),
        ]
        for a in instants {
            for b in instants {
                #expect((StoredInstant(a) < StoredInstant(b)) == (a < b))
                #expect((StoredInstant(a) == StoredInstant(b)) == (a == b))
            }
        }
    }

    /// `TokenSet.expiresAt` is stored this way now; what it reads back and what equality says must not change.
    @Test func aTokenSetKeepsItsExpiryAndItsEquality() {
        let received = ContinuousClock.now.advanced(by: .seconds(-86_400 * 400))
        var tokens = TokenSet(accessToken: "a", lifetime: .seconds(3600), receivedAt: received, receivedAtWall: Date())
        #expect(tokens.expiresAt == received.advanced(by: .seconds(3600)))
        var same = tokens
        #expect(same == tokens)
        same.expiresAt = received.advanced(by: .seconds(3599))
        #expect(same != tokens)
        tokens.expiresAt = nil
        #expect(tokens.expiresAt == nil && !tokens.isExpired(at: .now.advanced(by: .seconds(86_400 * 800))))
    }
}
