import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// One manager holding accounts from two clients of one issuer and from two issuers, against django-oauth-toolkit:
/// each account is refreshed and revoked through the client that issued its tokens, live and after a restart. A
/// refresh sent to another account's client is `invalid_grant` at this server (a refresh token belongs to its
/// client), which would end the session: every test below fails if one goes astray.
@Suite(
    .timeLimit(.minutes(TimeLimit.heavy)),
    .enabled(
        if: AuthorizationServerFixture.shouldRun,
        "no authorization server: run scripts/test, which starts django-oauth-toolkit on loopback"
    )
)
struct SeveralProvidersIntegrationTests {
    typealias Fixture = AuthorizationServerFixture

    static func client(_ server: Fixture, _ clientID: String) -> OAuthClient {
        AuthorizationServerIntegrationTests.client(server, clientID: clientID)
    }

    /// The refreshes and revocations the server saw for `user`.
    struct ClientCalls {
        /// The `client_id` and status of each refresh.
        var refreshes: [(clientID: String?, status: Int)] = []
        /// The `client_id` and status of each revocation the server could tie to the user (revoking a refresh
        /// token drops its access token, so a revocation of that one after it names nobody).
        var revocations: [(clientID: String?, status: Int)] = []

        /// Whether every call went to `clientID` and succeeded: at least two refreshes, one revocation (restore refreshes the current account once more).
        func allAt(_ clientID: String) -> Bool {
            refreshes.count >= 2 && !revocations.isEmpty
                && (refreshes + revocations).allSatisfy { $0.clientID == clientID && $0.status == 200 }
        }
    }

    static func expectRefreshesAt(
        _ server: Fixture, _ user: Fixture.User, _ clientID: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let calls = try await clientCalls(server, user)
        #expect(
            !calls.refreshes.isEmpty && calls.refreshes.allSatisfy { $0.clientID == clientID && $0.status == 200 },
            "refreshes \(calls.refreshes)", sourceLocation: sourceLocation)
    }

    static func expectAllAt(
        _ server: Fixture, _ user: Fixture.User, _ clientID: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let calls = try await clientCalls(server, user)
        #expect(
            calls.allAt(clientID), "refreshes \(calls.refreshes), revocations \(calls.revocations)",
            sourceLocation: sourceLocation)
    }

    static func clientCalls(_ server: Fixture, _ user: Fixture.User) async throws -> ClientCalls {
        var calls = ClientCalls()
        for entry in try await server.log(username: user.username) {
            if entry.path == "/o/token/", entry.grantType == "refresh_token" {
                calls.refreshes.append((entry.clientID, entry.status))
            } else if entry.path == "/o/revoke_token/" {
                calls.revocations.append((entry.clientID, entry.status))
            }
        }
        return calls
    }

    @Test func theDeviceClientsAccountAndTheCodeClientsAccountEachRefreshAndRevokeAtTheirOwnClient() async throws {
        let server = try Fixture.required()
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let codeClient = Self.client(server, Fixture.pkceClientID)
        let deviceClient = Self.client(server, Fixture.deviceClientID)
        func configuration() throws -> SessionManager.Configuration {
            .init(
                store: try FileCredentialStore(directory: directory.appendingPathComponent("store")),
                providers: [
                    Provider(id: "code", issuer: server.baseURL.absoluteString, client: codeClient),
                    Provider(id: "device", issuer: server.baseURL.absoluteString, client: deviceClient),
                ])
        }
        let browserUser = try await server.createUser()
        let terminalUser = try await server.createUser()
        let manager = SessionManager(configuration: try configuration())
        let byBrowser = try await manager.signIn(through: "code") {
            [account = AuthorizationServerIntegrationTests.account(server, browserUser)] in
            let request = try codeClient.authorizationRequest(redirectURI: Fixture.redirectURI.absoluteString)
            let code = try await server.authorizationCode(
                for: browserUser.username, pkceChallenge: request.pkce.challenge, state: request.state)
            return (account, try await codeClient.exchange(code: code, for: request))
        }
        let byTerminal = try await manager.signIn(through: "device", makeCurrent: false) {
            [account = AuthorizationServerIntegrationTests.account(server, terminalUser)] in
            let device = try await deviceClient.startDeviceAuthorization()
            let polling = Task { try await deviceClient.pollDeviceAuthorization(device) }
            try await server.approveDevice(userCode: device.userCode, username: terminalUser.username)
            return (account, try await polling.value)
        }
        try await byBrowser.refreshTokens()
        try await byTerminal.refreshTokens()
        #expect(byBrowser.isActive && byTerminal.isActive)

        // A new process: restore brings both back, each with its own client.
        let next = SessionManager(configuration: try configuration())
        await next.restore()
        #expect(next.sessions.count == 2)
        for session in next.sessions {
            try await session.refreshTokens()
            let (data, _) = try await session.data(for: AuthorizationServerIntegrationTests.me(server))
            #expect(AuthorizationServerIntegrationTests.username(data) == session.account.subject)
        }
        let restoredTerminal = try #require(next.sessions.first { $0.account.subject == terminalUser.username })
        let leftOver = try #require(restoredTerminal.tokens?.refreshToken)
        for session in next.sessions {
            let report = try #require(await next.signOut(session))
            #expect(report.refreshTokenRevocation == .succeeded)
        }
        try await Self.expectAllAt(server, browserUser, Fixture.pkceClientID)
        try await Self.expectAllAt(server, terminalUser, Fixture.deviceClientID)
        // The revocation took: the device client's own refresh token is dead at its own client.
        #expect(try await server.refresh(leftOver, clientID: Fixture.deviceClientID).status == 400)
    }

    @Test func accountsOfTwoIssuersShareOneManagerAndEachOnlyEverReachesItsOwn() async throws {
        let first = try Fixture.required()
        try await Fixture.withPrivateServer { second in
            let directory = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let firstClient = Self.client(first, Fixture.passwordClientID)
            let secondClient = Self.client(second, Fixture.passwordClientID)
            func configuration() throws -> SessionManager.Configuration {
                .init(
                    store: try FileCredentialStore(directory: directory),
                    providers: [
                        Provider(id: "work", issuer: first.baseURL.absoluteString, client: firstClient),
                        Provider(id: "personal", issuer: second.baseURL.absoluteString, client: secondClient),
                    ])
            }
            // The same username at both issuers: two accounts, two records, two clients.
            let atWork = try await first.createUser()
            try await second.createUser(atWork)
            let manager = SessionManager(configuration: try configuration())
            let workAccount = AuthorizationServerIntegrationTests.account(first, atWork)
            let personalAccount = AuthorizationServerIntegrationTests.account(second, atWork)
            #expect(workAccount != personalAccount)
            let work = try await manager.signIn(through: "work") { [account = workAccount] in
                (account, try await firstClient.password(username: atWork.username, password: atWork.password))
            }
            let personal = try await manager.signIn(through: "personal", makeCurrent: false) {
                [account = personalAccount] in
                (account, try await secondClient.password(username: atWork.username, password: atWork.password))
            }
            try await work.refreshTokens()
            try await personal.refreshTokens()

            let next = SessionManager(configuration: try configuration())
            await next.restore()
            #expect(next.current?.account == workAccount)
            for session in next.sessions { try await session.refreshTokens() }
            for session in next.sessions { _ = await next.signOut(session) }

            // Each issuer saw its own account's two refreshes and its revocation, and nothing of the other's.
            try await Self.expectAllAt(first, atWork, Fixture.passwordClientID)
            try await Self.expectAllAt(second, atWork, Fixture.passwordClientID)
            // An account of the other issuer signed in through the wrong provider is refused before anything is
            // stored.
            await #expect(throws: SessionError.self) {
                try await next.signIn(through: "work") { [account = personalAccount] in
                    (account, try await secondClient.password(username: atWork.username, password: atWork.password))
                }
            }
            #expect(try await FileCredentialStore(directory: directory).accounts().isEmpty)
        }
    }

    /// Getting Started's device sign-in, where nothing says who approved until the API is asked.
    @Test func aDeviceSignInLearnsWhoApprovedItThroughAProvisionalSession() async throws {
        let server = try Fixture.required()
        let user = try await server.createUser()
        let deviceClient = Self.client(server, Fixture.deviceClientID)
        let store = InMemoryCredentialStore()
        let manager = SessionManager(
            configuration: .init(store: store, providers: [Provider(id: "device", client: deviceClient)]))
        let session = try await manager.signIn(through: "device") {
            let device = try await deviceClient.startDeviceAuthorization()
            let polling = Task { try await deviceClient.pollDeviceAuthorization(device) }
            try await server.approveDevice(userCode: device.userCode, username: user.username)
            return try await polling.value
        } identify: { provisional in
            let (data, _) = try await provisional.data(for: AuthorizationServerIntegrationTests.me(server))
            let username = try #require(AuthorizationServerIntegrationTests.username(data))
            return Account(issuer: server.baseURL.absoluteString, subject: username)
        }
        #expect(session.account.subject == user.username)
        #expect(await store.accounts() == [session.account])
        try await session.refreshTokens()
        try await Self.expectRefreshesAt(server, user, Fixture.deviceClientID)
        await manager.signOut()
    }
}
