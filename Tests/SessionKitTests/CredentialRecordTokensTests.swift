import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The tokens a stored record gives a restored session: the access token with what is left of its lifetime on the
/// session's clock, or, once it has expired, no access token and nothing left, so the session refreshes before its
/// first request instead of presenting a dead token.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct CredentialRecordTokensTests {
    static func record(expiringAt: Date) -> CredentialRecord {
        CredentialRecord(
            account: alice, refreshToken: "r", accessToken: "a", accessTokenExpiresAt: expiringAt, idToken: "i",
            scope: "s", tokenType: "Bearer")
    }

    @Test func aStoredAccessTokenKeepsWhatIsLeftOfItsLifetime() {
        let clock = ManualClock()
        let tokens = Self.record(expiringAt: clock.wallNow.addingTimeInterval(100)).tokens(clock: clock)
        #expect(tokens.accessToken == "a")
        #expect(tokens.expiresAt == clock.now.advanced(by: .seconds(100)))
        #expect(!tokens.isExpired(at: clock.now, leeway: .seconds(99)))
        #expect(tokens.isExpired(at: clock.now, leeway: .seconds(101)))
        #expect(tokens.refreshToken == "r" && tokens.idToken == "i" && tokens.scope == "s")
    }

    @Test func anExpiredAccessTokenIsDroppedAndTheTokensAreExpiring() {
        let clock = ManualClock()
        let tokens = Self.record(expiringAt: clock.wallNow.addingTimeInterval(-1)).tokens(clock: clock)
        #expect(tokens.accessToken.isEmpty)
        #expect(tokens.expiresAt == clock.now)
        #expect(tokens.isExpired(at: clock.now))
        #expect(tokens.refreshToken == "r")
    }
}
