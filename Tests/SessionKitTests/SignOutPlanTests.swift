import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The order of a sign-out and its server steps, as ``SignOutPlan`` decides them, without sessions, sockets or
/// clocks: every combination of the inputs the plan reads.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SignOutPlanTests {
    typealias Phase = SignOutPlan.Phase
    typealias Step = SignOutPlan.ServerStep

    static let tokens = TokenSet(accessToken: "a", refreshToken: "r", lifetime: .seconds(60), receivedAt: .now)

    @Test(arguments: [false, true], [false, true])
    func thePhasesKeepTheOrderTheInvariantsNeed(wasCurrent: Bool, waitForServer: Bool) {
        let plan = SignOutPlan(wasCurrent: wasCurrent, options: SignOutOptions(waitForServer: waitForServer))
        var expected: [Phase] = [.seal]
        if wasCurrent { expected.append(.clear) }
        expected += [.publish, .settleWrites, .cancel, .startServerSteps, .purge]
        if waitForServer { expected.append(.awaitServerSteps) }
        #expect(plan.phases == expected)
    }

    @Test func everyRuleOfTheOrderHolds() {
        for wasCurrent in [false, true] {
            for waitForServer in [false, true] {
                let phases = SignOutPlan(wasCurrent: wasCurrent, options: SignOutOptions(waitForServer: waitForServer))
                    .phases
                func before(_ first: Phase, _ second: Phase) -> Bool {
                    guard let a = phases.firstIndex(of: first), let b = phases.firstIndex(of: second) else {
                        return true
                    }
                    return a < b
                }
                // The record's deletion is queued before anything can suspend, and before the session ends.
                #expect(phases.first == .seal)
                // Every screen is emptied, and observers told, before the first suspension (the writes' wait).
                #expect(before(.clear, .publish) && before(.publish, .settleWrites))
                // Writes finish on their session before it ends; the server gets the tokens as they were at the end.
                #expect(before(.settleWrites, .cancel) && before(.cancel, .startServerSteps))
                // The server steps run beside the purge, not after it.
                #expect(before(.startServerSteps, .purge) && before(.purge, .awaitServerSteps))
                #expect(Set(phases).count == phases.count)
            }
        }
    }

    @Test func aStepRunsWhenItsOptionAsksAndThereIsSomethingToSend() {
        let everything = SignOutOptions(serverSteps: [
            .revokeRefreshToken, .revokeAccessToken, .backend { _ in }, .provider { _ in },
        ])
        #expect(
            SignOutPlan.serverSteps(options: everything, tokens: Self.tokens, canRevoke: true)
                == [.refreshTokenRevocation, .serverSession, .accessTokenRevocation, .providerLogout])
        // Local only: nothing goes to a server.
        #expect(SignOutPlan.serverSteps(options: .localOnly, tokens: Self.tokens, canRevoke: true).isEmpty)
        // By default the refresh token is revoked, and nothing else.
        #expect(
            SignOutPlan.serverSteps(options: SignOutOptions(), tokens: Self.tokens, canRevoke: true)
                == [.refreshTokenRevocation])
    }

    @Test func nothingIsRevokedWithoutARevokerOrWithAnEmptyToken() {
        let revokeBoth = SignOutOptions(serverSteps: [.revokeRefreshToken, .revokeAccessToken])
        #expect(SignOutPlan.serverSteps(options: revokeBoth, tokens: Self.tokens, canRevoke: false).isEmpty)
        let emptyAccess = TokenSet(accessToken: "", refreshToken: "r", lifetime: nil, receivedAt: .now)
        #expect(
            SignOutPlan.serverSteps(options: revokeBoth, tokens: emptyAccess, canRevoke: true)
                == [.refreshTokenRevocation])
        let emptyRefresh = TokenSet(accessToken: "a", refreshToken: "", lifetime: nil, receivedAt: .now)
        #expect(
            SignOutPlan.serverSteps(options: revokeBoth, tokens: emptyRefresh, canRevoke: true)
                == [.accessTokenRevocation])
        let noRefresh = TokenSet(accessToken: "a", refreshToken: nil, lifetime: nil, receivedAt: .now)
        #expect(
            SignOutPlan.serverSteps(options: revokeBoth, tokens: noRefresh, canRevoke: true)
                == [.accessTokenRevocation])
        // A session that ended holding nothing: no revocation and no backend step, which needs the tokens.
        let backend = SignOutOptions(serverSteps: [.revokeRefreshToken, .backend { _ in }])
        #expect(SignOutPlan.serverSteps(options: backend, tokens: nil, canRevoke: true).isEmpty)
    }

    @Test func theProvidersSignOutNeedsNoTokens() {
        let provider = SignOutOptions(serverSteps: [.provider { _ in }])
        #expect(SignOutPlan.serverSteps(options: provider, tokens: nil, canRevoke: false) == [.providerLogout])
    }

    @Test func theListsOrderDoesNotChangeThePlan() {
        let steps: [SignOutServerStep] = [
            .provider { _ in }, .backend { _ in }, .revokeAccessToken, .revokeRefreshToken,
        ]
        #expect(
            SignOutPlan.serverSteps(options: SignOutOptions(serverSteps: steps), tokens: Self.tokens, canRevoke: true)
                == [.refreshTokenRevocation, .serverSession, .accessTokenRevocation, .providerLogout])
        // A step listed twice runs once.
        let twice = SignOutOptions(serverSteps: [.revokeRefreshToken, .revokeRefreshToken])
        #expect(
            SignOutPlan.serverSteps(options: twice, tokens: Self.tokens, canRevoke: true) == [.refreshTokenRevocation])
    }

    @Test func theAppsOwnAndTheOpenIDSignOutAreOneProviderStep() {
        let logout = OpenIDLogout(
            provider: OpenIDProvider(
                configuration: .init(issuer: URL(string: "https://idp.example")!, clientID: "app")),
            postLogoutRedirectURI: nil
        ) { _ in }
        let both = SignOutOptions(serverSteps: [.provider { _ in }, .openID(logout)])
        #expect(SignOutPlan.serverSteps(options: both, tokens: nil, canRevoke: false) == [.providerLogout])
        #expect(SignOutServerStep.openID(logout).reportedAs == .providerLogout)
        #expect(SignOutServerStep.provider { _ in }.reportedAs == .providerLogout)
        #expect(SignOutServerStep.backend { _ in }.reportedAs == .serverSession)
        #expect(SignOutServerStep.revokeRefreshToken.reportedAs == .refreshTokenRevocation)
        #expect(SignOutServerStep.revokeAccessToken.reportedAs == .accessTokenRevocation)
    }

    @Test func theAccessTokensRevocationWaitsForTheBackendStepOnlyWhenBothRun() {
        #expect(SignOutPlan.accessRevocationWaitsForBackend([.serverSession, .accessTokenRevocation]))
        #expect(
            SignOutPlan.accessRevocationWaitsForBackend([
                .refreshTokenRevocation, .serverSession, .accessTokenRevocation, .providerLogout,
            ]))
        #expect(!SignOutPlan.accessRevocationWaitsForBackend([.refreshTokenRevocation, .accessTokenRevocation]))
        #expect(!SignOutPlan.accessRevocationWaitsForBackend([.serverSession, .providerLogout]))
        #expect(!SignOutPlan.accessRevocationWaitsForBackend([]))
        // Planned from a list whose backend step cannot run (no tokens): nothing to wait for.
        let options = SignOutOptions(serverSteps: [.backend { _ in }, .revokeAccessToken])
        #expect(
            SignOutPlan.accessRevocationWaitsForBackend(
                SignOutPlan.serverSteps(options: options, tokens: Self.tokens, canRevoke: true)))
        #expect(
            !SignOutPlan.accessRevocationWaitsForBackend(
                SignOutPlan.serverSteps(options: options, tokens: nil, canRevoke: true)))
    }

    @Test func eachStepIsReportedInItsOwnField() {
        var report = SignOutReport(account: Account(issuer: "https://idp.example", subject: "alice"))
        let outcomes: [Step: SignOutReport.StepOutcome] = [
            .refreshTokenRevocation: .succeeded, .serverSession: .failed(.backendDenied),
            .accessTokenRevocation: .unanswered, .providerLogout: .notSent,
        ]
        for (step, outcome) in outcomes { report[step] = outcome }
        #expect(report.refreshTokenRevocation == .succeeded)
        #expect(report.serverSession == .failed(.backendDenied))
        #expect(report.accessTokenRevocation == .unanswered)
        #expect(report.providerLogout == .notSent)
        for (step, outcome) in outcomes { #expect(report[step] == outcome) }
        // The names the diagnostics tell are the documented ones.
        #expect(
            Step.allCases.map(\.rawValue) == [
                "refresh_token_revocation", "server_session", "access_token_revocation", "provider_logout",
            ])
    }
}
