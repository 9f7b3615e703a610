import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The code that README.md and the Getting Started and Testing articles show, run against servers on loopback;
/// and a check that the documents show exactly this code.
///
/// Each sample sits between `// sample-begin: <name>` and `// sample-end: <name>`. In a document, the fenced
/// `swift` block that follows `<!-- sample: <name> -->` must equal the sample with its common indentation removed.
/// Change a sample here first, run `swift format format -i`, then paste it into the document.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct CodeSamplesTests {
    @Test func readmeExample() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app")) { mock in
            try mock.addUser("alice")
            let tokenURL = mock.tokenEndpoint
            let revokeURL = mock.revocationEndpoint
            let profileURL = mock.userInfoEndpoint
            let account = Account(issuer: mock.issuer, subject: "alice")
            let tokens = try mock.issueTokens(for: "alice")  // what the app's sign-in flow obtained

            // sample-begin: readme
            let oauth = OAuthClient(
                configuration: .init(tokenEndpoint: tokenURL, revocationEndpoint: revokeURL, clientID: "my-app"))
            let manager = SessionManager(
                configuration: .init(store: InMemoryCredentialStore(), tokenEndpoint: oauth, revoker: oauth))
            let profile = SessionScoped<String>(empty: "")
            manager.register(profile)  // emptied the moment its session changes or ends

            let session = try await manager.signIn(account, tokens: tokens)
            let (data, _) = try await session.data(for: URLRequest(url: profileURL))  // this session's token only
            profile.commit(String(decoding: data, as: UTF8.self), from: session)  // refused if it ended meanwhile
            let report = await manager.signOut()  // detach, clear, cancel, revoke, purge
            // sample-end: readme

            #expect(String(decoding: data, as: UTF8.self) == #"{"user":"alice"}"#)
            #expect(profile.discardedCommits == 0, "the commit happened while the session was current")
            #expect(profile.value == "", "sign-out emptied the container")
            #expect(!session.isActive)
            #expect(report?.refreshTokenRevocation == .succeeded)
            let refreshToken = try #require(tokens.refreshToken)
            #expect(!mock.isActive(token: refreshToken), "the refresh token was revoked")
            #expect(mock.requests.filter { $0.path == "/api/me" }.map(\.bearerToken) == [tokens.accessToken])
        }
    }

    /// The browser's part of a sign-in: follows the authorization URL to the callback it redirects to.
    static func followInBrowser(_ url: URL) async throws -> URL {
        let browser = URLSession(configuration: .ephemeral)
        defer { browser.finishTasksAndInvalidate() }
        let (_, response) = try await browser.data(for: URLRequest(url: url))
        return try #require(response.url)
    }

    @Test func gettingStarted() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app", openID: true)) { mock in
            try mock.addUser("alice")
            let issuer = try #require(URL(string: mock.issuer))
            let api = mock.url("/api")
            let store = InMemoryCredentialStore()
            let redirectURI = mock.callbackURL.absoluteString
            // The browser's part: the user signs in as alice, and the server redirects to the callback.
            try mock.approveNextAuthorization(as: "alice")
            @Sendable func openInBrowser(_ url: URL) async throws -> URL { try await Self.followInBrowser(url) }

            // sample-begin: getting-started-setup
            let provider = OpenIDProvider(
                configuration: .init(
                    issuer: issuer, clientID: "my-app",
                    validation: .init(algorithms: [.rs256, .es256])))  // what your provider signs with
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: provider, revoker: provider))
            // At launch: finishes an interrupted sign-out, then restores the stored accounts.
            await manager.restore()
            // sample-end: getting-started-setup
            #expect(manager.state == .signedOut)

            // sample-begin: getting-started-sign-in
            let session = try await manager.signIn(openID: {
                let request = try await provider.authorizationRequest(redirectURI: redirectURI, scope: "openid profile")
                let callback = try await openInBrowser(request.url)  // ASWebAuthenticationSession on iOS
                return try await provider.signIn(code: request.authorizationCode(from: callback), for: request)
            })
            // sample-end: getting-started-sign-in
            let account = session.account
            #expect(account == Account(issuer: mock.issuer, subject: "alice"))
            #expect(manager.state == .active(account, offline: false))
            #expect(mock.tokenRequestCount(grant: .authorizationCode) == 1)
            let refreshToken = try #require(session.tokens?.refreshToken)
            #expect(await store.load(for: account)?.refreshToken == refreshToken)

            // sample-begin: getting-started-request
            let profile = SessionScoped<Data?>(empty: nil)
            manager.register(profile)
            let request = URLRequest(url: api.appendingPathComponent("me"))
            let (data, response) = try await session.data(for: request)
            if response.statusCode == 200 {
                profile.commit(data, from: session)  // refused if the session ended meanwhile
            }
            // sample-end: getting-started-request
            #expect(profile.value.map { String(decoding: $0, as: UTF8.self) } == #"{"user":"alice"}"#)

            // sample-begin: getting-started-sign-out
            let report = await manager.signOut()  // nil when nobody was signed in
            // sample-end: getting-started-sign-out
            #expect(profile.value == nil)
            #expect(manager.state == .signedOut)
            #expect(!session.isActive)
            #expect(report?.refreshTokenRevocation == .succeeded)
            #expect(report?.credentialDeletion == .succeeded)
            #expect(report?.isPurgeComplete == true)
            #expect(await store.load(for: account) == nil)
            #expect(!mock.isActive(token: refreshToken))
            #expect(await manager.signOut() == nil, "nobody is signed in now")
        }
    }

    /// Getting Started's second way to wire a provider: named, and signed in through its name.
    @Test func gettingStartedNamedProvider() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app", openID: true)) { mock in
            try mock.addUser("alice")
            try mock.approveNextAuthorization(as: "alice")
            let issuer = try #require(URL(string: mock.issuer))
            let store = InMemoryCredentialStore()
            let redirectURI = mock.callbackURL.absoluteString
            @Sendable func openInBrowser(_ url: URL) async throws -> URL { try await Self.followInBrowser(url) }
            let provider = OpenIDProvider(
                configuration: .init(issuer: issuer, clientID: "my-app", validation: .init(algorithms: [.es256])))

            // sample-begin: provider-named
            let manager = SessionManager(
                configuration: .init(store: store, providers: [Provider(id: "id.example", openID: provider)]))
            let session = try await manager.signIn(
                through: "id.example",
                openID: {
                    let request = try await provider.authorizationRequest(
                        redirectURI: redirectURI, scope: "openid profile")
                    let callback = try await openInBrowser(request.url)
                    return try await provider.signIn(code: request.authorizationCode(from: callback), for: request)
                })
            // sample-end: provider-named

            #expect(await store.load(for: session.account)?.provider == "id.example", "the record names it")
            try await session.refreshTokens()
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            #expect(try #require(await manager.signOut()).refreshTokenRevocation == .succeeded)
        }
    }

    @Test func openIDConnectArticle() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app", openID: true)) { mock in
            try mock.addUser("alice")
            try mock.approveNextAuthorization(as: "alice")
            let store = InMemoryCredentialStore()
            let redirectURI = mock.callbackURL.absoluteString
            let issuerURL = try #require(URL(string: mock.issuer))
            @Sendable func openInBrowser(_ url: URL) async throws -> URL { try await Self.followInBrowser(url) }

            // sample-begin: openid-sign-in
            let provider = OpenIDProvider(
                configuration: .init(
                    issuer: issuerURL, clientID: "my-app", validation: .init(algorithms: [.rs256, .es256])))
            let manager = SessionManager(
                configuration: .init(store: store, providers: [Provider(id: "id.example", openID: provider)]))

            let session = try await manager.signIn(
                through: "id.example",
                openID: {
                    let request = try await provider.authorizationRequest(
                        redirectURI: redirectURI, scope: "openid profile")
                    let callback = try await openInBrowser(request.url)  // ASWebAuthenticationSession on iOS
                    return try await provider.signIn(code: request.authorizationCode(from: callback), for: request)
                })
            // sample-end: openid-sign-in
            #expect(session.account.subject == "alice")

            // sample-begin: openid-sign-out
            // Registered for the client; the provider redirects there, and nothing needs to listen.
            let postLogoutRedirectURI = "http://127.0.0.1/signed-out"
            let report = await manager.signOut(
                options: SignOutOptions(serverSteps: [
                    .revokeRefreshToken, .openID(.calling(provider, postLogoutRedirectURI: postLogoutRedirectURI)),
                ]))
            print(report?.providerLogout ?? .notRequested)  // succeeded: the provider answered with that redirect
            // sample-end: openid-sign-out
            #expect(report?.providerLogout == .succeeded)
            #expect(report?.refreshTokenRevocation == .succeeded)
            #expect(mock.endSessions.map(\.user) == ["alice"])
            #expect(mock.endSessions.map(\.postLogoutRedirectURI) == [postLogoutRedirectURI])
        }
    }

    /// The OpenID Connect article's other way to wire a provider: the manager's default.
    @Test func openIDConnectDefaultProvider() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app", openID: true)) { mock in
            try mock.addUser("alice")
            try mock.approveNextAuthorization(as: "alice")
            let issuerURL = try #require(URL(string: mock.issuer))
            let store = InMemoryCredentialStore()
            let redirectURI = mock.callbackURL.absoluteString
            @Sendable func openInBrowser(_ url: URL) async throws -> URL { try await Self.followInBrowser(url) }
            let provider = OpenIDProvider(
                configuration: .init(issuer: issuerURL, clientID: "my-app", validation: .init(algorithms: [.es256])))

            // sample-begin: provider-default
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: provider, revoker: provider))
            let session = try await manager.signIn(openID: {
                let request = try await provider.authorizationRequest(redirectURI: redirectURI, scope: "openid profile")
                let callback = try await openInBrowser(request.url)
                return try await provider.signIn(code: request.authorizationCode(from: callback), for: request)
            })
            // sample-end: provider-default

            #expect(session.account.subject == "alice")
            #expect(await store.load(for: session.account)?.provider == nil, "the default keeps no name")
            try await session.refreshTokens()
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            #expect(try #require(await manager.signOut()).refreshTokenRevocation == .succeeded)
        }
    }

    /// SessionManager's overview: the calls in the order an app makes them.
    @Test func sessionManagerOverview() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app")) { mock in
            try mock.addUser("alice")
            let oauth = mock.makeClient()
            let store = InMemoryCredentialStore()
            let account = Account(issuer: mock.issuer, subject: "alice")
            let tokens = try mock.issueTokens(for: "alice")

            // sample-begin: session-manager-overview
            let manager = SessionManager(
                configuration: .init(store: store, tokenEndpoint: oauth, revoker: oauth))
            await manager.restore()  // first, before anything signs in or sends

            let session = try await manager.signIn(account, tokens: tokens)
            // … requests through `session`, results committed to registered containers …
            let report = await manager.signOut()  // detach, clear, cancel, revoke, purge; nil: nobody to sign out
            let left = await manager.finishPendingWork(within: .seconds(5))  // before the process exits
            // sample-end: session-manager-overview

            #expect(!session.isActive)
            #expect(report?.refreshTokenRevocation == .succeeded)
            #expect(report?.isPurgeComplete == true)
            #expect(left.isEmpty)
        }
    }

    @Test func testingALateResponse() async throws {
        try await LocalServer.withRunning { server async throws in
            // sample-begin: testing-late-response
            let gate = Gate()
            server.route("GET", "/me") { _ in
                await gate.wait()  // the response waits until the test opens the gate
                return .json(#"{"name":"Alice"}"#)
            }
            let manager = SessionManager(configuration: .init(store: InMemoryCredentialStore()))
            let profile = SessionScoped<String>(empty: "")
            manager.register(profile)
            let session = try await manager.signIn(
                alice, tokens: TokenSet(accessToken: "token-alice"))
            let load = Task {
                let (data, _) = try await session.data(for: URLRequest(url: server.url("/me")))
                // Refused if the session ended meanwhile:
                profile.commit(String(decoding: data, as: UTF8.self), from: session)
            }

            await gate.waitForArrivals(1)  // the request is on the server now
            await manager.signOut(options: .localOnly)
            gate.open()

            let error = await #expect(throws: SessionError.self) { try await load.value }
            #expect(error?.code == .sessionEnded)  // never the response
            #expect(profile.value == "")  // nothing of Alice's reached the screen
            #expect(server.requests.map(\.bearerToken) == ["token-alice"])
            // sample-end: testing-late-response
        }
    }

    @Test func testingSingleFlightRefresh() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            // sample-begin: testing-mock-refresh
            try mock.addUser("alice")
            let session = UserSession(
                account: Account(issuer: mock.issuer, subject: "alice"),
                tokens: try mock.issueTokens(for: "alice"),
                tokenEndpoint: mock.makeClient())
            mock.invalidateAccessTokens(for: "alice")  // the resource now answers 401

            async let first = session.data(for: URLRequest(url: mock.userInfoEndpoint))
            async let second = session.data(for: URLRequest(url: mock.userInfoEndpoint))
            let (a, b) = try await (first, second)

            #expect(a.1.statusCode == 200 && b.1.statusCode == 200)
            // One refresh, however the two requests interleave:
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            session.end()
            // sample-end: testing-mock-refresh
        }
    }

    @Test func testingProactiveRefreshWithAManualClock() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            // sample-begin: testing-manual-clock
            try mock.addUser("alice")
            let clock = ManualClock()
            let session = UserSession(
                account: Account(issuer: mock.issuer, subject: "alice"),
                // Expires in one hour on `clock`:
                tokens: try mock.issueTokens(for: "alice", clock: clock),
                configuration: .init(clock: clock),
                tokenEndpoint: mock.makeClient(clock: clock))
            // Inside the refresh leeway (60 s, plus up to 15 s of jitter):
            clock.advance(by: .seconds(3600 - 30))

            _ = try await session.data(for: URLRequest(url: mock.userInfoEndpoint))
            // Refreshed before sending: no 401 needed.
            #expect(mock.tokenRequestCount(grant: .refreshToken) == 1)
            #expect(mock.requests.filter { $0.path == "/api/me" }.count == 1)
            session.end()
            // sample-end: testing-manual-clock
        }
    }

    @Test func severalProviders() async throws {
        let configuration = MockAuthorizationServer.Configuration(clientID: "mail")
        try await MockAuthorizationServer.withRunning(configuration: configuration) { workServer in
            try await MockAuthorizationServer.withRunning(configuration: configuration) { personalServer in
                try workServer.addUser("alice")
                try personalServer.addUser("alice")
                let store = InMemoryCredentialStore()
                let (workIssuer, personalIssuer) = (workServer.issuer, personalServer.issuer)
                let (workClient, personalClient) = (workServer.makeClient(), personalServer.makeClient())
                let workAccount = Account(issuer: workIssuer, subject: "alice")
                let personalAccount = Account(issuer: personalIssuer, subject: "alice")
                let workTokens = try workServer.issueTokens(for: "alice")
                let personalTokens = try personalServer.issueTokens(for: "alice")

                // sample-begin: several-providers
                let manager = SessionManager(
                    configuration: .init(
                        store: store,
                        providers: [
                            Provider(id: "work", issuer: workIssuer, client: workClient),
                            Provider(id: "personal", issuer: personalIssuer, client: personalClient),
                        ]))
                let work = try await manager.signIn(workAccount, tokens: workTokens, through: "work")
                let personal = try await manager.signIn(
                    personalAccount, tokens: personalTokens, through: "personal", makeCurrent: false)
                try await personal.refreshTokens()  // at the personal provider, with its client
                // sample-end: several-providers

                #expect(manager.current === work)
                #expect(personalServer.tokenRequestCount(grant: .refreshToken) == 1)
                #expect(workServer.tokenRequestCount(grant: .refreshToken) == 0)
                // The next launch, configured the same way, knows which provider each account came through.
                let next = SessionManager(configuration: manager.configuration)
                work.end()
                personal.end()
                // Restore refreshes the current account (its access token is not stored) at the work provider.
                await next.restore()
                #expect(next.current?.account == workAccount)
                #expect(workServer.tokenRequestCount(grant: .refreshToken) == 1)
                let restored = try #require(next.sessions.first { $0.account == personalAccount })
                try await restored.refreshTokens()
                #expect(personalServer.tokenRequestCount(grant: .refreshToken) == 2)
                #expect(workServer.tokenRequestCount(grant: .refreshToken) == 1)
                for session in next.sessions { session.end() }
            }
        }
    }

    @Test func finishingPendingWorkBeforeExiting() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-app")) { mock in
            try mock.addUser("alice")
            let oauth = mock.makeClient()
            let store = InMemoryCredentialStore()
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth, revoker: oauth))
            let account = Account(issuer: mock.issuer, subject: "alice")
            try await manager.signIn(account, tokens: try mock.issueTokens(for: "alice"))
            var options = SignOutOptions()
            options.waitForServer = false
            await manager.signOut(options: options)

            // sample-begin: getting-started-exit
            let left = await manager.finishPendingWork(within: .seconds(5))
            if !left.isEmpty {
                print("warning: \(left)")  // e.g. "1 sign-out server steps still pending"; never a token
            }
            // sample-end: getting-started-exit

            #expect(left.isEmpty)
            #expect(mock.requests.filter { $0.path == "/revoke" }.count == 1, "revoked before the call returned")
        }
    }

    @Test func commandLineSignIn() async throws {
        try await MockAuthorizationServer.withRunning(configuration: .init(clientID: "my-cli")) { mock in
            try mock.addUser("alice")
            try mock.approveNextAuthorization(as: "alice")
            let oauth = mock.makeClient(clientID: "my-cli")
            let account = Account(issuer: mock.issuer, subject: "alice")
            let credentials = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: credentials) }
            let profileURL = mock.userInfoEndpoint
            let issuer = mock.issuer
            let shown = Locked<Int>(0)
            // The browser: follows the sign-in to the listener's redirect and shows its page.
            @Sendable func openInBrowser(_ url: URL) async throws {
                let browser = URLSession(configuration: .ephemeral)
                defer { browser.finishTasksAndInvalidate() }
                let (_, response) = try await browser.data(for: URLRequest(url: url))
                shown.withLock { $0 = (response as? HTTPURLResponse)?.statusCode ?? 0 }
            }

            // sample-begin: command-line-sign-in
            struct Me: Decodable { let user: String }  // what your API's "me" endpoint answers

            let store = try FileCredentialStore(directory: credentials)
            let manager = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth, revoker: oauth))
            await manager.restore()
            let session: UserSession
            if let restored = manager.current {
                session = restored  // signed in on an earlier run: no browser
            } else {
                session = try await manager.signIn {
                    try await oauth.authorizeInBrowser(scope: "profile") { url in
                        print("Sign in at \(url)")  // the listener already waits on 127.0.0.1
                        try await openInBrowser(url)
                    }
                } identify: { provisional in
                    // No ID token came with the grant: your API says whose tokens these are.
                    let (data, _) = try await provisional.data(for: URLRequest(url: profileURL))
                    return Account(issuer: issuer, subject: try JSONDecoder().decode(Me.self, from: data).user)
                }
            }
            let (profile, _) = try await session.data(for: URLRequest(url: profileURL))
            print(String(decoding: profile, as: UTF8.self))
            // sample-end: command-line-sign-in

            // sample-begin: command-line-exit
            let left = await manager.finishPendingWork(within: .seconds(5))
            if !left.isEmpty { FileHandle.standardError.write(Data("sessionkit: \(left)\n".utf8)) }
            // sample-end: command-line-exit

            #expect(shown.withLock { $0 } == 200, "the browser saw the listener's page")
            #expect(String(decoding: profile, as: UTF8.self) == #"{"user":"alice"}"#)
            #expect(left.isEmpty)
            #expect(session.account == account, "the account came from the API")
            #expect(try await store.load(for: account)?.refreshToken != nil)
            session.end()
            // The next run restores without a browser.
            let next = SessionManager(configuration: .init(store: store, tokenEndpoint: oauth, revoker: oauth))
            await next.restore()
            #expect(next.current?.account == account)
            #expect(mock.tokenRequestCount(grant: .authorizationCode) == 1)
            next.current?.end()
        }
    }

    /// Seeing what happened: the stream turned on as the article shows, written as JSON lines that
    /// `sessionkit timeline` reads.
    @Test func diagnosticsTurnedOnAsTheArticleShows() async throws {
        let folder = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let eventsFile = folder.appendingPathComponent("app-events.jsonl")
        let store = InMemoryCredentialStore()
        let oauth = ScriptedTokenEndpoint { _, call in
            TokenSet(accessToken: "at-\(call)", refreshToken: "rt-\(call)", lifetime: .seconds(3600))
        }
        let account = Account(issuer: "https://id.example", subject: "alice")
        // sample-begin: diagnostics-on
        var sessions = UserSession.Configuration()
        sessions.diagnostics = try .file(at: eventsFile)  // JSON lines, appended; what `sessionkit timeline` reads
        let manager = SessionManager(
            configuration: .init(store: store, tokenEndpoint: oauth, sessionConfiguration: sessions))
        // sample-end: diagnostics-on
        let session = try await manager.signIn(account, tokens: TokenSet(accessToken: "at-0", refreshToken: "rt-0"))
        try await session.refreshTokens()
        // sample-begin: diagnostics-flush
        sessions.diagnostics?.flush()  // before reading the file: every event emitted so far is written
        // sample-end: diagnostics-flush
        let text = try String(contentsOf: eventsFile, encoding: .utf8)
        #expect(text.hasSuffix("\n"), "each line ends in a newline")
        let lines = text.split(separator: "\n").map(String.init)
        let read = lines.compactMap(DiagnosticEvent.init(jsonLine:))
        #expect(read.count == lines.count, "every line is an event")
        #expect(read.map(\.kind).contains(.refreshSucceeded))
        #expect(read.allSatisfy { $0.level >= .info })
        session.end()
    }

    /// Seeing What Happened's table names every kind of event once, with the levels it is emitted at.
    @Test func theDiagnosticsTableNamesEveryKindWithItsLevel() throws {
        let document = try String(
            contentsOf: Self.root.appendingPathComponent("Sources/SessionKit/SessionKit.docc/SeeingWhatHappened.md"),
            encoding: .utf8)
        let rows = document.components(separatedBy: "\n").filter { $0.hasPrefix("| `") }
        let cells = rows.map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
        let kinds = cells.flatMap { $0[0].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        #expect(kinds.sorted() == DiagnosticEvent.Kind.allCases.map { "`\($0.rawValue)`" }.sorted())
        let levels = Set(DiagnosticEvent.Level.allCases.map(\.description))
        for row in cells {
            let named = row[1].split(whereSeparator: { !$0.isLetter }).map(String.init).filter(levels.contains)
            #expect(!named.isEmpty && row[1].hasPrefix(named[0]), "\(row[0]) gives its level first")
        }
    }

    // MARK: - The documents show this code

    /// Where each sample is shown.
    static let documents: [(path: String, samples: [String])] = [
        ("README.md", ["readme"]),
        (
            "Sources/SessionKit/SessionKit.docc/GettingStarted.md",
            [
                "getting-started-setup", "getting-started-sign-in", "provider-named", "getting-started-request",
                "getting-started-sign-out", "getting-started-exit",
            ]
        ),
        ("Sources/SessionKit/SessionKit.docc/SeveralAccounts.md", ["several-providers"]),
        ("Sources/SessionKit/SessionKit.docc/SeeingWhatHappened.md", ["diagnostics-on", "diagnostics-flush"]),
        (
            "Sources/SessionKit/SessionKit.docc/OpenIDConnect.md",
            ["openid-sign-in", "provider-default", "openid-sign-out"]
        ),
        ("Sources/SessionKit/SessionKit.docc/SessionManager.md", ["session-manager-overview"]),
        (
            "Sources/SessionKit/SessionKit.docc/SigningInFromACommandLine.md",
            ["command-line-sign-in", "command-line-exit"]
        ),
        (
            "Sources/SessionKit/SessionKit.docc/TestingYourApp.md",
            ["testing-late-response", "testing-mock-refresh", "testing-manual-clock"]
        ),
    ]

    /// The repository's root, from this file's path.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test(arguments: CodeSamplesTests.documents.map(\.path))
    func documentShowsTheTestedCode(_ path: String) throws {
        let root = Self.root
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let document = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        let expected = try #require(Self.documents.first { $0.path == path }).samples

        let shown = try Self.markedBlocks(in: document)
        #expect(shown.map(\.name) == expected, "\(path) marks these samples, in this order")
        for (name, block) in shown {
            let tested = try #require(Self.sample(name, in: source), "no sample \(name) in CodeSamplesTests.swift")
            #expect(block == tested, "\(path): the block marked \(name) differs from the tested code")
        }
    }

    @Test func sampleExtractionFindsDifferences() throws {
        let source = """
                // sample-begin: one
                let a = 1
                    let b = 2
                // sample-end: one
            """
        #expect(Self.sample("one", in: source) == "let a = 1\n    let b = 2")
        #expect(Self.sample("two", in: source) == nil)
        let document = """
            Text.

            <!-- sample: one -->
            ```swift
            let a = 1
                let b = 2
            ```

            <!-- sample: two -->
            ```swift
            let c = 3
            ```
            """
        let blocks = try Self.markedBlocks(in: document)
        #expect(blocks.map(\.name) == ["one", "two"])
        #expect(blocks.first?.code == Self.sample("one", in: source))
        #expect(blocks.last?.code != Self.sample("one", in: source))
        #expect(throws: (any Error).self) { try Self.markedBlocks(in: "<!-- sample: x -->\nno fence\n") }
    }

    /// The sample `name` in `source`, without its common indentation; `nil` when there is none.
    static func sample(_ name: String, in source: String) -> String? {
        let lines = source.components(separatedBy: "\n")
        guard
            let begin = lines.firstIndex(where: {
                $0.trimmingCharacters(in: .whitespaces) == "// sample-begin: \(name)"
            }),
            let end = lines[begin...].firstIndex(where: {
                $0.trimmingCharacters(in: .whitespaces) == "// sample-end: \(name)"
            })
        else { return nil }
        let body = Array(lines[(begin + 1)..<end])
        let indent = body.filter { !$0.allSatisfy(\.isWhitespace) }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return body.map { $0.allSatisfy(\.isWhitespace) ? "" : String($0.dropFirst(indent)) }
            .joined(separator: "\n")
    }

    /// Every fenced `swift` block that follows a `<!-- sample: name -->` line, in document order.
    static func markedBlocks(in document: String) throws -> [(name: String, code: String)] {
        struct Unfenced: Error { let name: String }
        let lines = document.components(separatedBy: "\n")
        var blocks: [(name: String, code: String)] = []
        var index = 0
        while index < lines.count {
            let line = lines[index].trimmingCharacters(in: .whitespaces)
            index += 1
            guard line.hasPrefix("<!-- sample: "), line.hasSuffix(" -->") else { continue }
            let name = String(line.dropFirst("<!-- sample: ".count).dropLast(" -->".count))
            guard index < lines.count, lines[index] == "```swift",
                let close = lines[(index + 1)...].firstIndex(of: "```")
            else { throw Unfenced(name: name) }
            blocks.append((name, lines[(index + 1)..<close].joined(separator: "\n")))
            index = close + 1
        }
        return blocks
    }
}
