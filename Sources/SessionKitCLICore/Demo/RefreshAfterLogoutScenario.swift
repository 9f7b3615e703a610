import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Bug 3: a token refresh is in flight when Alice signs out; it completes afterwards.
///
/// Runs against ``MockAuthorizationServer``, which rotates refresh tokens and issues a new access token when it
/// processes the refresh; the answer is held until after the sign-out. The server's log and the credential
/// store then say whether the new token was used or kept.
enum RefreshAfterLogoutScenario {
    static let id = "refresh-after-logout"
    static let scenario = DemoScenario(id: id) { _ in
        ScenarioResult(id: id, naive: try await naive(), sessionKit: try await withSessionKit())
    }

    private static let configuration = MockAuthorizationServer.Configuration(clientID: "sessionkit-demo")

    /// One global "current token", refreshed in place and written to the keychain, whoever is signed in.
    private final class NaiveTokenManager: Sendable {
        let current = Shared<TokenSet?>(nil)
        let keychain: InMemoryCredentialStore

        init(keychain: InMemoryCredentialStore) { self.keychain = keychain }

        func refresh(at mock: MockAuthorizationServer, session: URLSession) async throws {
            guard let refreshToken = current.value?.refreshToken else { return }
            let request = try TokenRequest(grant: .refreshToken(refreshToken, scope: nil), clientID: "sessionkit-demo")
                .urlRequest(endpoint: mock.tokenEndpoint)
            let (data, response) = try await session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            let tokens = try TokenResponse.parse(
                data: data, statusCode: status, receivedAt: .now, receivedAtWall: Date())
            current.update { $0 = tokens }  // stored whoever is signed in now
            await keychain.save(CredentialRecord(account: DemoSupport.alice, refreshToken: tokens.refreshToken))
        }

        func logout() async {
            current.update { $0 = nil }
            await keychain.delete(for: DemoSupport.alice)
        }
    }

    /// The access token the held refresh produced: the newest one issued to Alice, if it is not the first.
    private static func refreshedToken(_ mock: MockAuthorizationServer, first: String) throws -> String {
        guard let newest = mock.accessTokens(issuedTo: "alice").last, newest != first else {
            throw SessionError(.malformedResponse, "the refresh never reached the mock authorization server")
        }
        return newest
    }

    static func naive() async throws -> Verdict {
        try await MockAuthorizationServer.withRunning(configuration: configuration) { mock in
            try mock.addUser("alice")
            let issued = try mock.issueTokens(for: "alice")
            let keychain = InMemoryCredentialStore()
            let tokens = NaiveTokenManager(keychain: keychain)
            tokens.current.update { $0 = issued }
            await keychain.save(CredentialRecord(account: DemoSupport.alice, refreshToken: issued.refreshToken))
            let urlSession = DemoSupport.appURLSession()
            defer { urlSession.invalidateAndCancel() }

            let gate = Gate()
            mock.holdNext(.token, at: gate, afterProcessing: true)
            let refresh = Task { try await tokens.refresh(at: mock, session: urlSession) }
            await gate.waitForArrivals(1)  // the server rotated; its answer is held
            await tokens.logout()
            gate.open()
            try await refresh.value

            // The app's background sync uses whatever token is current.
            var syncStatus: Int?
            if let token = tokens.current.value?.accessToken {
                var request = URLRequest(url: mock.userInfoEndpoint)
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                let (_, response) = try await urlSession.data(for: request)
                syncStatus = (response as? HTTPURLResponse)?.statusCode
            }
            let refreshed = try refreshedToken(mock, first: issued.accessToken)
            let used = mock.requests.filter { $0.bearerToken == refreshed }.count
            let stored = await keychain.accounts().count
            var facts: [String] = []
            if stored > 0 { facts.append("the keychain holds Alice's new refresh token") }
            if used > 0 {
                facts.append(
                    "the next sync sent the new access token (\(DemoSupport.count(used, "request"))"
                        + (syncStatus.map { ", answered \($0)" } ?? "") + ")")
            }
            return Verdict(
                leaked: stored > 0 || used > 0,
                detail: facts.isEmpty
                    ? "the late refresh was not kept"
                    : "the refresh completed after logout and signed Alice back in: " + facts.joined(separator: "; ")
            )
        }
    }

    static func withSessionKit() async throws -> Verdict {
        try await MockAuthorizationServer.withRunning(configuration: configuration) { mock in
            try mock.addUser("alice")
            let issued = try mock.issueTokens(for: "alice")
            let store = InMemoryCredentialStore()
            let client = mock.makeClient(requestTimeout: .seconds(5))
            let manager = DemoSupport.manager(store: store, tokenEndpoint: client, revoker: client)
            let session = try await manager.signIn(DemoSupport.alice, tokens: issued)

            let gate = Gate()
            mock.holdNext(.token, at: gate, afterProcessing: true)
            let refresh = Task { try await session.refreshTokens() }
            await gate.waitForArrivals(1)
            let report = await manager.signOut(options: SignOutOptions(serverTimeout: .seconds(3)))
            gate.open()
            let refreshOutcome: String
            do {
                try await refresh.value
                refreshOutcome = "completed"
            } catch {
                refreshOutcome = "ended with \(DemoSupport.describe(error))"
            }

            // The app's background sync, SessionKit's way: as the current session (there is none), and, if some
            // code kept a reference, as the ended one (refused before anything is sent).
            if let current = manager.current {
                _ = try? await current.data(for: URLRequest(url: mock.userInfoEndpoint))
            }
            let stale: String
            var staleSent = false
            do {
                _ = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
                staleSent = true
                stale = "a request from the ended session was sent"
            } catch {
                stale = "a request from the ended session was refused (\(DemoSupport.describe(error)))"
            }
            let refreshed = try refreshedToken(mock, first: issued.accessToken)
            let used = mock.requests.filter { $0.bearerToken == refreshed }.count
            let stored = await store.accounts().count
            let held = session.tokens != nil
            let usage =
                used == 0
                ? "no request carried the new token"
                : "\(DemoSupport.count(used, "request")) carried the new token"
            return Verdict(
                leaked: used > 0 || stored > 0 || held || staleSent,
                detail: "the refresh \(refreshOutcome); \(usage); credential store: "
                    + (stored == 0 ? "empty" : DemoSupport.count(stored, "record")) + "; \(stale); "
                    + "revocation \(report.map { "\($0.refreshTokenRevocation)" } ?? "not run") (refresh token)"
            )
        }
    }
}
