import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// One manager, accounts from several providers: each account's refreshes and revocations go to the client that
/// issued its tokens, live and after a restore, and never to another's.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ProviderTests {
    let work = Account(issuer: "https://login.work.example", subject: "alice")
    let personal = Account(issuer: "https://id.mail.example", subject: "alice")

    /// An endpoint that rotates the tokens it issued (prefixed `name`), and rejects any other refresh token as a
    /// real server does a token another client was issued.
    func endpoint(_ name: String) -> ScriptedTokenEndpoint {
        ScriptedTokenEndpoint { refreshToken, call in
            guard refreshToken.hasPrefix("\(name)-") else {
                throw SessionError(
                    .refreshRejected, "invalid_grant: not this client's token", oauthError: "invalid_grant")
            }
            return TokenSet(
                accessToken: "\(name)-access-\(call)", refreshToken: "\(name)-refresh-\(call)", lifetime: .seconds(3600)
            )
        }
    }

    func tokens(_ name: String) -> TokenSet {
        TokenSet(accessToken: "\(name)-access-0", refreshToken: "\(name)-refresh-0", lifetime: .seconds(3600))
    }

    struct Setup {
        let store = InMemoryCredentialStore()
        let workEndpoint: ScriptedTokenEndpoint
        let personalEndpoint: ScriptedTokenEndpoint
        let workRevoker = ScriptedRevoker()
        let personalRevoker = ScriptedRevoker()

        func configuration() -> SessionManager.Configuration {
            .init(
                store: store,
                providers: [
                    Provider(
                        id: "work", issuer: "https://login.work.example", tokenEndpoint: workEndpoint,
                        revoker: workRevoker),
                    Provider(
                        id: "personal", issuer: "https://id.mail.example", tokenEndpoint: personalEndpoint,
                        revoker: personalRevoker),
                ])
        }
    }

    func setup() -> Setup {
        Setup(workEndpoint: endpoint("work"), personalEndpoint: endpoint("personal"))
    }

    @Test func eachAccountRefreshesAtItsOwnProviderOnly() async throws {
        let setup = setup()
        let manager = SessionManager(configuration: setup.configuration())
        let atWork = try await manager.signIn(work, tokens: tokens("work"), through: "work")
        let atHome = try await manager.signIn(personal, tokens: tokens("personal"), through: "personal")
        #expect(atWork.provider == "work")
        #expect(atHome.provider == "personal")
        try await atWork.refreshTokens()
        try await atHome.refreshTokens()
        #expect(setup.workEndpoint.presented == ["work-refresh-0"])
        #expect(setup.personalEndpoint.presented == ["personal-refresh-0"])
        #expect(atWork.isActive && atHome.isActive)
        #expect(await setup.store.load(for: work)?.provider == "work")
        #expect(await setup.store.load(for: personal)?.provider == "personal")
    }

    @Test func aRestoredAccountRefreshesAtTheProviderItSignedInThrough() async throws {
        let setup = setup()
        let first = SessionManager(configuration: setup.configuration())
        try await first.signIn(work, tokens: tokens("work"), through: "work")
        try await first.signIn(personal, tokens: tokens("personal"), through: "personal")

        let next = SessionManager(configuration: setup.configuration())
        await next.restore()
        #expect(next.sessions.count == 2)
        for session in next.sessions { try await session.refreshTokens() }
        // Each restored session presented its own token to its own client; nobody was rejected.
        #expect(setup.workEndpoint.presented.allSatisfy { $0.hasPrefix("work-") })
        #expect(setup.personalEndpoint.presented.allSatisfy { $0.hasPrefix("personal-") })
        #expect(setup.workEndpoint.count >= 1 && setup.personalEndpoint.count >= 1)
        #expect(next.sessions.allSatisfy { $0.isActive })
        #expect(Set(next.sessions.compactMap(\.provider)) == ["work", "personal"])
    }

    @Test func signOutRevokesThroughTheSessionsOwnProvider() async throws {
        let setup = setup()
        let manager = SessionManager(configuration: setup.configuration())
        let atWork = try await manager.signIn(work, tokens: tokens("work"), through: "work")
        let atHome = try await manager.signIn(personal, tokens: tokens("personal"), through: "personal")
        await manager.signOut(atWork)
        await manager.signOut(atHome)
        #expect(setup.workRevoker.revoked.withLock { $0 } == ["work-refresh-0"])
        #expect(setup.personalRevoker.revoked.withLock { $0 } == ["personal-refresh-0"])
    }

    @Test func theDefaultProviderStillServesSignInsThatNameNone() async throws {
        let endpoint = endpoint("default")
        let store = InMemoryCredentialStore()
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: endpoint,
                providers: [
                    Provider(id: "work", tokenEndpoint: self.endpoint("work"))
                ]))
        let session = try await manager.signIn(work, tokens: tokens("default"))
        try await session.refreshTokens()
        #expect(session.provider == nil)
        #expect(endpoint.presented == ["default-refresh-0"])
        #expect(await store.load(for: work)?.provider == nil)
    }

    @Test func anUnknownProviderIsRefusedBeforeTheGrantRuns() async throws {
        let setup = setup()
        let manager = SessionManager(configuration: setup.configuration())
        let ran = Counter()
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(through: "nowhere") {
                ran.increment()
                return (work, tokens("work"))
            }
        }
        #expect(error?.code == .invalidInput)
        #expect(ran.value == 0)
        #expect(await setup.store.accounts().isEmpty)
        #expect(manager.current == nil)
    }

    @Test func anAccountOfAnotherIssuerIsRefusedAndNothingIsStored() async throws {
        let setup = setup()
        let manager = SessionManager(configuration: setup.configuration())
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(personal, tokens: tokens("personal"), through: "work")
        }
        #expect(error?.code == .invalidInput)
        #expect(await setup.store.accounts().isEmpty)
        #expect(manager.sessions.isEmpty)
    }

    @Test func aProviderNameConfiguredTwiceIsRefused() async throws {
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(),
                providers: [
                    Provider(id: "work", tokenEndpoint: endpoint("work")),
                    Provider(id: "work", tokenEndpoint: endpoint("other")),
                ]))
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(work, tokens: tokens("work"), through: "work")
        }
        #expect(error?.code == .invalidInput)
        #expect(manager.sessions.isEmpty)
    }

    @Test func aRecordNamingAProviderThisBuildLacksIsKeptAndNotRefreshedElsewhere() async throws {
        let store = InMemoryCredentialStore()
        await store.save(
            CredentialRecord(account: work, refreshToken: "work-refresh-0", provider: "retired"))
        let fallback = endpoint("default")
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: fallback))
        let state = await manager.restore()
        guard case .failed(let error) = state else {
            Issue.record("expected failed, got \(state)")
            return
        }
        #expect(error.code == .invalidInput)
        #expect(fallback.count == 0)
        #expect(await store.load(for: work)?.refreshToken == "work-refresh-0")
    }

    @Test func aRecordPairingAProviderWithAnotherIssuerIsNotRestored() async throws {
        let setup = setup()
        await setup.store.save(
            CredentialRecord(account: personal, refreshToken: "personal-refresh-0", provider: "work"))
        await setup.store.save(CredentialRecord(account: work, refreshToken: "work-refresh-0", provider: "work"))
        let manager = SessionManager(configuration: setup.configuration())
        await manager.restore()
        #expect(manager.sessions.map(\.account) == [work])
        #expect(setup.personalEndpoint.count == 0)
        #expect(await setup.store.load(for: personal) != nil)
    }

    @Test func aRecordSavedBeforeProvidersWereKeptReadsAsTheDefault() throws {
        let encoded = #"""
            {"account":{"displayName":"alice","issuer":"https://login.work.example","subject":"alice"},\#
            "refreshToken":"r","savedAt":0,"tokenType":"Bearer","version":1}
            """#
        let record = try JSONDecoder().decode(CredentialRecord.self, from: Data(encoded.utf8))
        #expect(record.provider == nil)
        #expect(record.refreshToken == "r")
        let roundTrip = try JSONDecoder().decode(
            CredentialRecord.self,
            from: JSONEncoder().encode(CredentialRecord(account: work, refreshToken: "r", provider: "work")))
        #expect(roundTrip.provider == "work")
    }
}
