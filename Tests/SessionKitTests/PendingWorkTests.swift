import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// `finishPendingWork(within:)` waits for what SessionKit still does after the calls that started it returned, and
/// says what was left when its bound passed. The bound here is short and real: it is what the call is for.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct PendingWorkTests {
    @Test func nothingStartedIsNothingPending() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let left = await manager.finishPendingWork(within: .milliseconds(200))
        #expect(left.isEmpty)
        #expect(left.description == "no pending work")
    }

    @Test func aRefreshInFlightIsWaitedForAndItsRotatedTokenIsStoredBeforeTheCallReturns() async throws {
        let gate = Gate()
        let endpoint = ScriptedTokenEndpoint(gate: gate) { _, call in
            TokenSet(accessToken: "token-alice-\(call)", refreshToken: "refresh-alice-\(call)", lifetime: nil)
        }
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: endpoint))
        let session = try await manager.signIn(alice, tokens: tokens("alice"))
        let refresh = Task { try await session.refreshTokens() }
        await gate.waitForArrivals(1)

        let early = await manager.finishPendingWork(within: .milliseconds(200))
        #expect(early.refreshes == 1)
        #expect(early.description == "1 refreshes still pending")

        gate.open()
        let left = await manager.finishPendingWork()
        #expect(left.isEmpty, "\(left)")
        #expect(await store.load(for: alice)?.refreshToken == "refresh-alice-1", "the rotated token was not stored")
        try await refresh.value
    }

    @Test func aWriteHandedOffAtSignOutIsWaitedFor() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("POST", "/upload") { _ in
                await gate.wait()
                return .json("{}", status: 201)
            }
            let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
            let session = try await manager.signIn(alice, tokens: tokens("alice"))
            let upload = Task { try await session.write(post(server, "/upload"), policy: .handOff) }
            await gate.waitForArrivals(1)
            let report = try #require(await manager.signOut(options: .localOnly))
            #expect(report.writesHandedOff == 1)

            let early = await manager.finishPendingWork(within: .milliseconds(200))
            #expect(early.handedOffWrites == 1)
            #expect(early.description == "1 handed-off writes still pending")

            gate.open()
            #expect(await manager.finishPendingWork().isEmpty)
            let (_, response) = try await upload.value
            #expect(response.statusCode == 201)
        }
    }

    @Test func signOutStepsLeftInTheBackgroundAreWaitedFor() async throws {
        let gate = Gate()
        let revoker = ScriptedRevoker(gate: gate)
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore(), revoker: revoker))
        try await manager.signIn(alice, tokens: tokens("alice"))
        var options = SignOutOptions()
        options.waitForServer = false
        let report = try #require(await manager.signOut(options: options))
        #expect(report.refreshTokenRevocation == .inBackground)
        await gate.waitForArrivals(1)

        let early = await manager.finishPendingWork(within: .milliseconds(200))
        #expect(early.serverSteps == 1)
        #expect(early.description == "1 sign-out server steps still pending")

        gate.open()
        #expect(await manager.finishPendingWork().isEmpty)
        #expect(revoker.revoked.withLock { $0 } == ["refresh-alice"])
    }
}
