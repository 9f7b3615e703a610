import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a sign-in throws when its closure fails, and how a sign-in learns whose tokens it got without an ID token.
///
/// Every error a sign-in throws is a `SessionError` (issue 47): an app's own error comes wrapped as `appError`, the
/// error itself underneath and only its type in the message, and the state reports the very error the caller saw.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SignInErrorsAndIdentityTests {
    /// An app's own error whose text quotes what the grant handled, as real ones do.
    struct GrantFailure: Error, CustomStringConvertible, Equatable {
        let detail: String
        var description: String { "the callback carried code=\(detail)" }
    }

    // MARK: - The error the closure threw

    @Test func theClosuresOwnErrorComesWrappedAsAnAppErrorAndTheStateShowsTheSameError() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let thrown = GrantFailure(detail: "SECRET-CODE-123")
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(authenticate: { throw thrown })
        }
        #expect(error?.code == .appError)
        #expect(error?.underlyingError as? GrantFailure == thrown)
        // The caller and the state agree: one error, one code.
        let seen = try #require(error)
        #expect(manager.state == .failed(seen))
    }

    @Test func everySignInFormWrapsTheAppsErrorTheSameWay() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let thrown = GrantFailure(detail: "x")
        let forms: [@Sendable () async throws -> Void] = [
            { _ = try await manager.signIn(authenticate: { throw thrown }) },
            { _ = try await manager.signIn { () -> (account: Account, tokens: TokenSet) in throw thrown } },
            { _ = try await manager.signIn(openID: { throw thrown }) },
            {
                _ = try await manager.signIn {
                    tokens("alice")
                } identify: { _ in
                    throw thrown
                }
            },
        ]
        for form in forms {
            let error = await #expect(throws: SessionError.self) { try await form() }
            #expect(error?.code == .appError)
            #expect(error?.underlyingError as? GrantFailure == thrown)
            let seen = try #require(error)
            #expect(manager.state == .failed(seen))
        }
    }

    @Test func aSessionErrorTheClosureThrowsComesOutUnchanged() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let thrown = SessionError(
            .authorizationFailed, "the token endpoint refused the code", oauthError: "invalid_grant")
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(authenticate: { throw thrown })
        }
        #expect(error == thrown)
        #expect(manager.state == .failed(thrown))
    }

    @Test func theErrorKeepsTheAppsErrorUnderneathAndNamesOnlyItsType() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(authenticate: { throw GrantFailure(detail: "SECRET-CODE-123") })
        }
        guard case .failed(let failure) = manager.state else {
            Issue.record("expected failed, got \(manager.state)")
            return
        }
        #expect(failure.code == .appError)
        #expect(failure.underlyingError as? GrantFailure == GrantFailure(detail: "SECRET-CODE-123"))
        #expect(failure.message.contains("GrantFailure"))
        for text in [
            failure.description, failure.message, "\(manager.state)", failure.localizedDescription,
            "\(String(describing: error))",
        ] {
            #expect(!text.contains("SECRET-CODE-123"))
        }
    }

    @Test func aFoundationErrorIsNamedByItsDomainAndCode() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(authenticate: { throw URLError(.notConnectedToInternet) })
        }
        #expect((error?.underlyingError as? URLError)?.code == .notConnectedToInternet)
        guard case .failed(let failure) = manager.state else {
            Issue.record("expected failed, got \(manager.state)")
            return
        }
        #expect(failure.message.contains("\(URLError.notConnectedToInternet.rawValue)"))
        #expect((failure.underlyingError as? URLError)?.code == .notConnectedToInternet)
    }

    @Test func aCancellationStaysACancellationAndSignsNobodyIn() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        await #expect(throws: CancellationError.self) {
            try await manager.signIn(authenticate: { throw CancellationError() })
        }
        #expect(manager.state == .signedOut)
    }

    @Test func aFailureWhileAnotherAccountIsCurrentReturnsToItAndStillThrowsTheAppsError() async throws {
        let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
        try await manager.signIn(alice, tokens: tokens("alice"))
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn(authenticate: { throw GrantFailure(detail: "x") })
        }
        #expect(error?.code == .appError)
        #expect(error?.underlyingError as? GrantFailure == GrantFailure(detail: "x"))
        #expect(manager.state == .active(alice, offline: false))
    }

    // MARK: - Who the tokens belong to

    @Test func aProvisionalSessionAsksWhoSignedInAndTheAccountGetsTheTokens() async throws {
        try await LocalServer.withRunning { server in
            server.route("/me") { request in .json(#"{"id":"\#(user(of: request))"}"#) }
            let store = InMemoryCredentialStore()
            let manager = SessionManager(configuration: .init(store: store))
            let seen = Locked<UserSession?>(nil)
            let session = try await manager.signIn {
                tokens("alice")
            } identify: { provisional in
                seen.withLock { $0 = provisional }
                #expect(provisional.isActive)
                let (data, _) = try await provisional.data(for: get(server, "/me"))
                let id = try #require(
                    (try JSONSerialization.jsonObject(with: data) as? [String: String])?["id"])
                return Account(issuer: issuer, subject: id)
            }
            #expect(session.account == alice)
            #expect(session.tokens?.accessToken == "token-alice")
            #expect(manager.current === session)
            // The provisional session ended, is nobody's, and stored nothing.
            let provisional = try #require(seen.withLock { $0 })
            #expect(!provisional.isActive)
            #expect(provisional !== session)
            #expect(!manager.sessions.contains { $0 === provisional })
            #expect(await store.accounts() == [alice])
            #expect(server.requests.map(\.bearerToken) == ["token-alice"])
        }
    }

    @Test func anIdentifyThatFailsStoresNothingAndEndsTheProvisionalSession() async throws {
        let store = InMemoryCredentialStore()
        let manager = SessionManager(configuration: .init(store: store))
        let seen = Locked<UserSession?>(nil)
        let error = await #expect(throws: SessionError.self) {
            try await manager.signIn {
                tokens("alice")
            } identify: { provisional in
                seen.withLock { $0 = provisional }
                throw GrantFailure(detail: "me failed")
            }
        }
        #expect(error?.underlyingError as? GrantFailure == GrantFailure(detail: "me failed"))
        #expect(seen.withLock { $0 }?.isActive == false)
        #expect(await store.accounts().isEmpty)
        #expect(manager.current == nil)
        #expect(manager.sessions.isEmpty)
    }

    @Test func aProvisionalSessionRefusesOriginsOutsideTheCredentialScope() async throws {
        try await LocalServer.withRunning { server in
            server.route("/me") { _ in .json("{}") }
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(),
                    sessionConfiguration: .init(credentialScope: .only([Origin("https://api.example.com")!]))))
            let error = await #expect(throws: SessionError.self) {
                try await manager.signIn {
                    tokens("alice")
                } identify: { provisional in
                    _ = try await provisional.data(for: get(server, "/me"))
                    return alice
                }
            }
            #expect(error?.code == .originNotServed)
            #expect(server.requests.isEmpty)
        }
    }
}
