import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

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
}
