import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(Glibc)
    import Glibc
#endif

/// OpenID Connect Back-Channel Logout 1.0 (issue 50), against logout tokens signed by jwcrypto (PyPI) through
/// `Tests/AuthorizationServer/forge_logout_tokens.py`: every valid token ends exactly the sessions it names (by `sub`,
/// by `sid`, by both), in every process on the store; every forged, stale or replayed one is refused for its named
/// check and ends nothing.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct BackChannelLogoutTests {
    struct Made {
        var jwks: String
        var keys: JSONWebKeySet
        var valid: [String: String]
        var forged: [(name: String, check: String, token: String)]
    }

    static func make(
        issuer: String, clientID: String, now: Int, valid: [String], targetSub: String, targetSid: String
    ) throws -> Made {
        var arguments = [
            "--issuer", issuer, "--client-id", clientID, "--now", String(now), "--target-sub", targetSub,
            "--target-sid", targetSid,
        ]
        for spec in valid { arguments += ["--valid", spec] }
        let data = try PythonTools.run("forge_logout_tokens.py", arguments)
        guard case .object(let document) = try JSONParser.parse(Array(data)),
            case .object(let jwks)? = document["jwks"],
            case .array(let validTokens)? = document["valid"], case .array(let forged)? = document["forged"]
        else { throw SessionError(.malformedResponse, "the script printed something else") }
        let jwksText = JSONValue.object(jwks).serialized
        var byName: [String: String] = [:]
        for entry in validTokens {
            if let name = entry["name"]?.stringValue, let token = entry["token"]?.stringValue { byName[name] = token }
        }
        return Made(
            jwks: jwksText, keys: try JSONWebKeySet(json: Array(jwksText.utf8)), valid: byName,
            forged: forged.compactMap { entry in
                guard let name = entry["name"]?.stringValue, let check = entry["check"]?.stringValue,
                    let token = entry["token"]?.stringValue
                else { return nil }
                return (name, check, token)
            })
    }

    static let validation = IDTokenValidation(algorithms: [.rs256, .es256])

    /// The validator alone: every valid token is accepted with what it names, and every forgery is refused for the
    /// check its maker names, with a message that never quotes it.
    @Test func theValidatorAcceptsJwcryptoTokensAndRefusesEachForgeryForItsCheck() throws {
        guard PythonTools.available("BackChannelLogoutTests") else { return }
        let now = 1_800_000_000
        let made = try Self.make(
            issuer: "https://id.example/o", clientID: "my-app", now: now,
            valid: ["by-sub:alice:", "by-sid::sid-b", "es256-both:carol:sid-c", "untyped-dave:dave:sid-d"],
            targetSub: "alice", targetSid: "sid-a")
        let validator = LogoutTokenValidator(
            issuer: "https://id.example/o", clientID: "my-app", validation: Self.validation, maximumAge: .seconds(300))
        let clock = Date(timeIntervalSince1970: TimeInterval(now))
        func outcome(_ token: String) -> String {
            do {
                switch try validator.validate(token, keys: made.keys, now: clock) {
                case .valid(let claims): return "valid \(claims.subject ?? "-") \(claims.sessionID ?? "-")"
                case .needsKeys: return IDTokenCheck.key.description
                }
            } catch {
                #expect(error.code == .logoutTokenRejected)
                #expect(!error.message.contains(token) && error.message.hasPrefix("the logout token"))
                return error.idTokenCheck?.description ?? "untyped \(error.code)"
            }
        }
        #expect(outcome(try #require(made.valid["by-sub"])) == "valid alice -")
        #expect(outcome(try #require(made.valid["by-sid"])) == "valid - sid-b")
        #expect(outcome(try #require(made.valid["es256-both"])) == "valid carol sid-c")
        #expect(outcome(try #require(made.valid["untyped-dave"])) == "valid dave sid-d")
        #expect(made.forged.count >= 20)
        for (name, check, token) in made.forged {
            #expect(outcome(token) == check, "forged token \(name)")
        }
        // The clock a few minutes on: the same tokens are stale.
        let later = Date(timeIntervalSince1970: TimeInterval(now + 600))
        #expect(throws: SessionError.self) {
            _ = try validator.validate(try #require(made.valid["by-sub"]), keys: made.keys, now: later)
        }
    }

    /// The replay guard keeps a `jti` until its token would be refused anyway; when full it drops what has expired,
    /// and only then the entry whose retention ends soonest.
    @Test func theReplayGuardRefusesASecondDeliveryAndForgetsOnlyWhatHasExpired() async {
        let guardian = LogoutTokenReplayGuard()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(await guardian.admit("a", until: now.addingTimeInterval(60), now: now))
        #expect(await !guardian.admit("a", until: now.addingTimeInterval(60), now: now))
        for index in 1..<LogoutTokenReplayGuard.capacity {
            _ = await guardian.admit("x\(index)", until: now.addingTimeInterval(Double(10 + index % 7)), now: now)
        }
        #expect(await guardian.count == LogoutTokenReplayGuard.capacity)
        // Full, nothing expired: the one retained for the shortest time goes, "a" (kept longest) stays.
        #expect(await guardian.admit("b", until: now.addingTimeInterval(60), now: now))
        #expect(await guardian.count == LogoutTokenReplayGuard.capacity)
        #expect(await !guardian.admit("a", until: now.addingTimeInterval(60), now: now))
        // Later, everything but "a" and "b" has expired: the next one clears them.
        let later = now.addingTimeInterval(30)
        #expect(await guardian.admit("c", until: later.addingTimeInterval(60), now: later))
        #expect(await guardian.count == 3)
        #expect(await !guardian.admit("b", until: later.addingTimeInterval(60), now: later))
    }

    /// The provider the tests receive logout tokens from: discovery and the key set jwcrypto made, on loopback.
    static func serveProvider(_ server: LocalServer, jwks: Lock<String>) {
        server.route("GET", "/.well-known/openid-configuration") { _ in
            let document: [String: JSONValue] = [
                "issuer": .string(server.url("").absoluteString.trimmingSuffix("/")),
                "token_endpoint": .string(server.url("/token").absoluteString),
                "jwks_uri": .string(server.url("/jwks").absoluteString),
                "authorization_endpoint": .string(server.url("/authorize").absoluteString),
                "id_token_signing_alg_values_supported": .array([.string("RS256"), .string("ES256")]),
            ]
            return .json(JSONValue.object(document).serialized)
        }
        server.route("GET", "/jwks") { _ in .json(jwks.withLock { $0 }) }
    }

    /// A record of `account` in the provider session `sid`, with an hour-long access token.
    static func record(_ account: Account, sid: String, now: Date) -> CredentialRecord {
        CredentialRecord(
            account: account, refreshToken: "rt-\(account.subject)", accessToken: "at-\(account.subject)",
            accessTokenExpiresAt: now.addingTimeInterval(3600), savedAt: now, providerSessionID: sid)
    }

    /// A process with no session of the account, only its record: a token naming the account's earlier provider
    /// session leaves the record (it belongs to a newer session, which other processes follow), and one naming the
    /// session the record belongs to deletes it.
    @Test func aRecordAloneIsDeletedOnlyForTheProviderSessionItBelongsTo() async throws {
        guard PythonTools.available("BackChannelLogoutTests") else { return }
        try await TemporaryDirectory.with { root in
            let jwks = Lock("{\"keys\":[]}")
            try await LocalServer.withRunning { server in
                Self.serveProvider(server, jwks: jwks)
                let issuer = server.url("").absoluteString.trimmingSuffix("/")
                let made = try Self.make(
                    issuer: issuer, clientID: "bff", now: Int(Date().timeIntervalSince1970),
                    valid: ["earlier::sid-dave-0", "current::sid-dave-1"], targetSub: "dave", targetSid: "sid-dave-1")
                jwks.withLock { $0 = made.jwks }
                let store = try FileCredentialStore(directory: root.appendingPathComponent("credentials"))
                let dave = Account(issuer: issuer, subject: "dave")
                try await store.save(Self.record(dave, sid: "sid-dave-1", now: Date()))
                let manager = SessionManager(configuration: .init(store: store))
                let provider = OpenIDProvider(
                    configuration: .init(issuer: URL(string: issuer)!, clientID: "bff", validation: Self.validation))
                let earlier = try await manager.receiveBackChannelLogout(
                    try #require(made.valid["earlier"]), from: provider)
                #expect(earlier.endedAccounts.isEmpty)
                #expect(try await store.load(for: dave)?.providerSessionID == "sid-dave-1")
                let current = try await manager.receiveBackChannelLogout(
                    try #require(made.valid["current"]), from: provider)
                #expect(current.endedAccounts == [dave])
                #expect(current.reports.map(\.credentialDeletion) == [.succeeded])
                #expect(try await store.load(for: dave) == nil)
            }
        }
    }

    /// Four processes on one store (this one and three children), five accounts live in each: alice, bob, carol and
    /// dave at the provider, and an alice at another issuer. Every forgery is refused in this process and ends
    /// nothing anywhere; then a token by `sub` ends alice, one by `sid` bob, one by both carol, each in every process
    /// within 250 ms; one naming dave's earlier provider session ends nobody; each replay is refused.
    @Test func everyValidTokenEndsExactlyTheSessionsItNamesInEveryProcessAndNoForgeryEndsAny() async throws {
        guard PythonTools.available("BackChannelLogoutTests") else { return }
        let executable = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        try await TemporaryDirectory.with { root in
            let jwks = Lock("{\"keys\":[]}")
            try await LocalServer.withRunning { server in
                Self.serveProvider(server, jwks: jwks)
                let issuer = server.url("").absoluteString.trimmingSuffix("/")
                let made = try Self.make(
                    issuer: issuer, clientID: "bff", now: Int(Date().timeIntervalSince1970),
                    valid: [
                        "by-sub:alice:", "by-sid::sid-bob-1", "es256-both:carol:sid-carol-1",
                        "untyped-stale:dave:sid-dave-0",
                    ],
                    targetSub: "bob", targetSid: "sid-bob-1")
                jwks.withLock { $0 = made.jwks }
                let directory = root.appendingPathComponent("credentials")
                let store = try FileCredentialStore(directory: directory)
                let now = Date()
                let accounts = ["alice", "bob", "carol", "dave"].map { Account(issuer: issuer, subject: $0) }
                let elsewhere = Account(issuer: "https://another.issuer.example", subject: "alice")
                for (index, account) in accounts.enumerated() {
                    try await store.save(
                        Self.record(
                            account, sid: "sid-\(account.subject)-1", now: now.addingTimeInterval(Double(index))))
                }
                try await store.save(Self.record(elsewhere, sid: "sid-alice-1", now: now))

                var children: [ChildProcess] = []
                for _ in 0..<3 {
                    children.append(
                        try ChildProcess(executable, ["back-channel", directory.path], writableInput: true))
                }
                for (index, child) in children.enumerated() {
                    #expect(child.readLine() == "ready 5", "child \(index) did not restore every account")
                }
                let processIDs = children.map(\.process.processIdentifier)
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(60))
                    for pid in processIDs { _ = kill(pid, SIGKILL) }
                }
                defer { watchdog.cancel() }

                let manager = SessionManager(
                    configuration: .init(
                        store: store,
                        tokenEndpoint: ScriptedTokenEndpoint { _, _ in
                            throw SessionError(.networkUnavailable, "no refresh in this test")
                        }))
                await manager.restore()
                #expect(manager.sessions.count == 5)
                let provider = OpenIDProvider(
                    configuration: .init(issuer: URL(string: issuer)!, clientID: "bff", validation: Self.validation))

                var refused = 0
                for (name, check, token) in made.forged {
                    do {
                        try await manager.receiveBackChannelLogout(token, from: provider)
                        Issue.record("forged token \(name) was accepted")
                    } catch let error as SessionError {
                        #expect(error.code == .logoutTokenRejected, "\(name)")
                        #expect(error.idTokenCheck?.description == check, "forged token \(name)")
                        if error.idTokenCheck?.description == check { refused += 1 }
                    }
                }
                #expect(manager.sessions.filter(\.isActive).count == 5, "a forgery ended a session here")
                #expect(try await store.accounts().count == 5, "a forgery deleted a record")

                // Each valid token, and what it must end.
                let endings: [(name: String, ends: String?)] = [
                    ("by-sub", "alice"), ("by-sid", "bob"), ("es256-both", "carol"), ("untyped-stale", nil),
                ]
                var valid = 0
                var ended = 0
                var slowest = 0.0
                for (name, subject) in endings {
                    let token = try #require(made.valid[name])
                    let sent = CrossProcessSignOutTests.monotonicNanoseconds()
                    let result = try await manager.receiveBackChannelLogout(token, from: provider)
                    valid += 1
                    #expect(result.endedAccounts.map(\.subject) == (subject.map { [$0] } ?? []), "\(name)")
                    #expect(result.reports.allSatisfy { $0.endedBy == .backChannelLogout })
                    guard let subject else { continue }
                    let here = manager.sessions.contains {
                        $0.account.subject == subject && $0.account.issuer == issuer
                    }
                    #expect(!here, "\(name): the session here is still live")
                    ended += 1
                    for (index, child) in children.enumerated() {
                        let line = try #require(child.readLine(), "child \(index) said nothing after \(name)")
                        let parts = line.split(separator: " ")
                        #expect(parts.count == 4 && parts[0] == "ended", "\(line)")
                        guard parts.count == 4 else { continue }
                        #expect(parts[1] == subject && parts[2] == issuer, "child \(index) ended \(line) for \(name)")
                        let at = UInt64(parts[3]) ?? 0
                        slowest = max(slowest, Double(at - min(at, sent)) / 1_000_000)
                        ended += 1
                    }
                }
                // A second delivery of a token already accepted is a replay, whether it ended someone or not.
                for name in ["untyped-stale", "by-sub"] {
                    do {
                        try await manager.receiveBackChannelLogout(try #require(made.valid[name]), from: provider)
                        Issue.record("the replay of \(name) was accepted")
                    } catch let error as SessionError {
                        #expect(error.idTokenCheck == .replay, "replay of \(name)")
                        if error.idTokenCheck == .replay { refused += 1 }
                    }
                }
                var survivors: [String] = []
                for child in children {
                    child.send("quit")
                    let line = child.readLine() ?? ""
                    survivors.append(line)
                    let (output, status) = child.finish()
                    #expect(status == 0, "\(output)")
                }
                let expected = "live alice@https://another.issuer.example,dave@\(issuer)"
                #expect(survivors.allSatisfy { $0 == expected }, "\(survivors)")
                let liveHere: Set<Account> = Set(manager.sessions.filter(\.isActive).map(\.account))
                let survivingAccounts: Set<Account> = [elsewhere, accounts[3]]
                #expect(liveHere == survivingAccounts)
                let stored: Set<Account> = Set(try await store.accounts())
                #expect(stored == survivingAccounts)
                let forged = made.forged.count + 2
                print(
                    "back-channel logout: valid \(valid) ended \(ended) sessions, forged refused \(refused) of \(forged); "
                        + "processes 4, slowest \(Int(slowest.rounded(.up))) ms")
                #expect(ended == 12)
                #expect(refused == forged)
                #expect(slowest <= 250)
            }
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
