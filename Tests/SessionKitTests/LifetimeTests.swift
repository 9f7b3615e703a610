import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `UserSession.Lifetime`'s operations as plain function calls: no lock, no task, no server.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct LifetimeTests {
    typealias Lifetime = UserSession.Lifetime

    static func tokens(_ access: String, refresh: String? = "refresh") -> TokenSet {
        TokenSet(accessToken: access, refreshToken: refresh)
    }

    static func write() -> UserSession.PendingWrite {
        UserSession.PendingWrite(policy: .discard, done: Broadcast<Void>())
    }

    @Test func holdingTokensWorksOutTheirCredential() {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a"), refreshedBy: nil)
        #expect(lifetime.credential?.token == "a")
        #expect(lifetime.credential?.authorization == "Bearer a")
        #expect(!lifetime.isExpiring(at: .now), "no refresher: never expiring")
    }

    @Test func everyKindOfRegistrationTakesItsIDFromOneAllocator() throws {
        var lifetime = Lifetime()
        let handler = lifetime.addEndHandler {}
        let write = lifetime.beginWrite(Self.write())
        let other = lifetime.addEndHandler {}
        let ids = try [#require(handler), #require(write), #require(other)]
        #expect(Set(ids).count == 3)
        lifetime.endWrite(ids[1])
        lifetime.removeEndHandler(ids[0])
        #expect(lifetime.pendingWrites.isEmpty)
        #expect(lifetime.endHandlerCount == 1)
    }

    @Test func endTakesEverythingOnceAndRefusesWhatComesAfter() throws {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a"), refreshedBy: nil)
        _ = lifetime.addEndHandler {}
        let end = lifetime.end()
        let ended = try #require(end)
        #expect(ended.handlers.count == 1)
        #expect(ended.tokens?.accessToken == "a")
        #expect(ended.requests.isEmpty)
        #expect(!lifetime.isActive)
        #expect(lifetime.tokens == nil && lifetime.credential == nil)
        #expect(lifetime.endHandlerCount == 0)
        let again = lifetime.end()
        #expect(again == nil, "only the first end takes anything")
        let handler = lifetime.addEndHandler {}
        let write = lifetime.beginWrite(Self.write())
        let handedOver = lifetime.complete(nil)
        let committed = lifetime.commitRefreshed(Self.tokens("late"), refreshedBy: nil)
        let adopted = lifetime.adopt(Self.tokens("stored"), refreshedBy: nil)
        let selected = lifetime.select(at: Date())
        let sealed = lifetime.sealCredentials()
        #expect(handler == nil && write == nil)
        #expect(!handedOver, "no answer is handed over after the end")
        #expect(committed == nil && !adopted)
        #expect(lifetime.tokens == nil, "a late refresh is dead")
        #expect(selected == nil && sealed == nil)
        #expect(lifetime.activeEventHandler == nil)
    }

    @Test func aRefreshWithoutARefreshTokenKeepsTheOldOne() throws {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a", refresh: "r1"), refreshedBy: nil)
        let commit = lifetime.commitRefreshed(Self.tokens("b", refresh: nil), refreshedBy: nil)
        let committed = try #require(commit)
        #expect(committed.tokens.refreshToken == "r1")
        #expect(committed.storable)
        #expect(lifetime.credential?.authorization == "Bearer b")
    }

    @Test func sealingStopsCredentialWritesButKeepsTheTokens() throws {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a"), refreshedBy: nil)
        let selected = lifetime.select(at: Date(timeIntervalSince1970: 1))
        let first = lifetime.sealCredentials()
        let second = lifetime.sealCredentials()
        let refused = lifetime.select(at: Date(timeIntervalSince1970: 2))
        #expect(selected?.accessToken == "a")
        #expect(first == true)
        #expect(second == false, "sealed once")
        #expect(lifetime.storableTokens == nil)
        #expect(refused == nil)
        #expect(lifetime.selectedAt == Date(timeIntervalSince1970: 1), "a refused selection records nothing")
        let commit = lifetime.commitRefreshed(Self.tokens("b"), refreshedBy: nil)
        let committed = try #require(commit)
        #expect(!committed.storable)
        #expect(lifetime.tokens?.accessToken == "b", "held in memory for the last requests and revocation")
    }

    @Test func aTemporaryDownloadsDirectoryIsRemovedAtTheEnd() throws {
        var lifetime = Lifetime()
        let directory = URL(fileURLWithPath: "/nonexistent/downloads")
        let made = lifetime.downloads { directory }
        let again = lifetime.downloads { URL(fileURLWithPath: "/other") }
        #expect(made == directory)
        #expect(again == directory, "made once")
        #expect(lifetime.endHandlerCount == 1)
        var managed = Lifetime()
        managed.useDownloadsDirectory(directory)
        let set = managed.downloads { URL(fileURLWithPath: "/other") }
        #expect(set == directory)
        #expect(managed.endHandlerCount == 0, "the account's directory is purged by the sign-out, not at the end")
    }

    // MARK: The machine's events, one transition each

    @Test func aURLSessionOfferedAfterTheEndIsHandedBackToBeInvalidatedNotKept() {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a"), refreshedBy: nil)
        _ = lifetime.end()
        let handoff = URLSession(configuration: .ephemeral)
        defer { handoff.invalidateAndCancel() }
        let transfers = TransferSession(cookies: nil, idleTimeout: 60)
        defer { transfers.urlSession.invalidateAndCancel() }
        guard case .spare(nil) = lifetime.offerHandoff(handoff) else {
            Issue.record("a hand-off URLSession offered after the end was kept")
            return
        }
        guard case .spare(nil) = lifetime.offerTransfers(transfers) else {
            Issue.record("a transfer URLSession offered after the end was kept")
            return
        }
        #expect(lifetime.endHandlerCount == 0, "no end handler registered after the end")
        guard case .ended = lifetime.transferSupply(nonceFor: nil), case .ended = lifetime.handoffSupply(nonceFor: nil)
        else {
            Issue.record("an ended lifetime supplies a URLSession")
            return
        }
    }

    @Test func theFirstURLSessionOfferedIsKeptAndARacersIsASpare() {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a"), refreshedBy: nil)
        guard case .make = lifetime.transferSupply(nonceFor: nil) else {
            Issue.record("none made yet: the answer is to make one")
            return
        }
        let first = TransferSession(cookies: nil, idleTimeout: 60)
        let second = TransferSession(cookies: nil, idleTimeout: 60)
        defer {
            first.urlSession.invalidateAndCancel()
            second.urlSession.invalidateAndCancel()
        }
        guard case .kept = lifetime.offerTransfers(first) else {
            Issue.record("the first offer is kept")
            return
        }
        guard case .spare(let kept) = lifetime.offerTransfers(second) else {
            Issue.record("a second offer is a spare")
            return
        }
        #expect(kept === first)
        #expect(lifetime.endHandlerCount == 1, "one end handler, for the one kept")
        guard case .use(let used, let credential, _) = lifetime.transferSupply(nonceFor: nil) else {
            Issue.record("once made, it is used")
            return
        }
        #expect(used === first && credential?.token == "a")
    }

    @Test func endTakesEveryRegistrationAndTheHandOffSessionInOneStep() throws {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a"), refreshedBy: nil)
        let handoff = URLSession(configuration: .ephemeral)
        defer { handoff.invalidateAndCancel() }
        _ = lifetime.offerHandoff(handoff)
        _ = lifetime.addEndHandler {}
        _ = lifetime.addEndHandler {}
        lifetime.rotationRefused(leaving: "r0")
        guard case .ended(let end) = lifetime.handle(.end) else {
            Issue.record("the end answers what it took")
            return
        }
        let ended = try #require(end)
        #expect(ended.handlers.count == 2)
        #expect(ended.handoff === handoff, "the hand-off URLSession is taken, to finish and invalidate")
        #expect(ended.tokens?.accessToken == "a")
        #expect(ended.refreshTokenLeftInStore == "r0")
        #expect(lifetime.phase == .ended)
        guard case .id(nil) = lifetime.handle(.addEndHandler({})),
            case .id(nil) = lifetime.handle(.beginWrite(Self.write()))
        else {
            Issue.record("a registration after the end is refused")
            return
        }
        guard case .ended(nil) = lifetime.handle(.end) else {
            Issue.record("only the first end takes anything")
            return
        }
    }

    @Test func theCredentialEventAnswersTheHeldCredentialAndTheNonceOnlyForABoundToken() throws {
        let url = try #require(URL(string: "https://api.example/me"))
        var bearer = Lifetime()
        bearer.hold(Self.tokens("a"), refreshedBy: nil)
        bearer.noteNonce("n1", for: url)
        guard case .credential(let credential?, false, nil) = bearer.handle(.credential(at: .now, nonceFor: url)) else {
            Issue.record("a bearer token is sent with no nonce, not expiring without a refresher")
            return
        }
        #expect(credential.authorization == "Bearer a")
        var bound = Lifetime()
        var tokens = Self.tokens("b")
        tokens.proofKey = try DPoPKey.generate()
        bound.hold(tokens, refreshedBy: nil)
        bound.noteNonce("n2", for: url)
        guard case .credential(_?, _, "n2") = bound.handle(.credential(at: nil, nonceFor: url)) else {
            Issue.record("a bound token's proof carries its origin's last nonce")
            return
        }
        _ = bound.end()
        guard case .credential(nil, _, _) = bound.handle(.credential(at: nil, nonceFor: url)) else {
            Issue.record("an ended lifetime sends no credential")
            return
        }
    }

    @Test func aRefusedRotationIsRememberedUntilTheSessionsTokensAreStored() {
        var lifetime = Lifetime()
        lifetime.hold(Self.tokens("a", refresh: "r1"), refreshedBy: nil)
        lifetime.rotationRefused(leaving: "r0")
        lifetime.rotationRefused(leaving: "r-later")
        #expect(lifetime.unstoredRotation)
        #expect(lifetime.refreshTokenLeftInStore == "r0", "the first retired token is the one the record holds")
        lifetime.stored(refreshToken: "r-other")
        #expect(lifetime.unstoredRotation && lifetime.refreshTokenLeftInStore == "r-other")
        lifetime.stored(refreshToken: "r1")
        #expect(!lifetime.unstoredRotation && lifetime.refreshTokenLeftInStore == nil)
        lifetime.beginDeletingRejectedGrant()
        #expect(lifetime.deletingRejectedGrant)
    }
}
