import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The stories an app's logs must tell (issue 36): a rejected grant, an outage at launch, a failed purge, a
/// sign-out in another process, a redirect that left the origin, a request after the end. Each is driven for real and
/// its events read in order.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct DiagnosticsTests {
    static let alice = Account(issuer: "https://diagnostics.sessionkit.invalid", subject: "alice")

    /// A sink that keeps every event.
    final class Recorder: Sendable {
        let events = Lock<[DiagnosticEvent]>([])
        let diagnostics: Diagnostics

        init() {
            let events = events
            diagnostics = Diagnostics(level: .debug) { event in events.withLock { $0.append(event) } }
        }

        /// The events so far, once every emitted one has been handed over.
        var recorded: [DiagnosticEvent] {
            diagnostics.flush()
            return events.withLock { $0 }
        }

        /// Whether the kinds (with the fields each names) occur in this order, other events between them allowed.
        func saw(_ expected: [(DiagnosticEvent.Kind, [String: String])]) -> Bool {
            var remaining = expected[...]
            for event in recorded {
                guard let (kind, fields) = remaining.first else { break }
                if event.kind == kind, fields.allSatisfy({ event.fields[$0.key] == $0.value }) {
                    remaining = remaining.dropFirst()
                }
            }
            return remaining.isEmpty
        }
    }

    static func tokens(_ name: String, lifetime: Duration = .seconds(3600)) -> TokenSet {
        TokenSet(accessToken: "at-\(name)-secret", refreshToken: "rt-\(name)-secret", lifetime: lifetime)
    }

    @Test func aRejectedGrantTellsItsCauseCodeAndTheStateItLeft() async throws {
        let recorder = Recorder()
        let endpoint = ScriptedTokenEndpoint { _, _ in
            throw SessionError(.refreshRejected, "rejected", statusCode: 400, oauthError: "invalid_grant")
        }
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), tokenEndpoint: endpoint,
                sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
        let session = try await manager.signIn(Self.alice, tokens: Self.tokens("alice"))
        await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        #expect(
            recorder.saw([
                (.stateChanged, ["from": "authenticating", "to": "active"]),
                (.refreshStarted, ["cause": "forced"]),
                (.refreshRejected, ["cause": "forced", "code": "refreshRejected", "oauthError": "invalid_grant"]),
                (.stateChanged, ["to": "reauthenticationRequired"]),
            ]), "\(recorder.recorded.map(\.description))")
        let rejected = recorder.recorded.filter { $0.kind == .refreshRejected }
        #expect(!rejected.isEmpty && rejected.allSatisfy { $0.level == .error })
        // How long the refresh took is told with every outcome, whole milliseconds.
        #expect(rejected.allSatisfy { $0.fields["milliseconds"].flatMap(Int.init) != nil })
    }

    @Test func anOutageAtLaunchTellsWhyTheUserIsOffline() async throws {
        let recorder = Recorder()
        let store = InMemoryCredentialStore()
        // No access token stored: restore must refresh, and the provider cannot be reached.
        await store.save(
            CredentialRecord(account: Self.alice, refreshToken: "rt-alice-secret", savedAt: Date()))
        let endpoint = ScriptedTokenEndpoint { _, _ in throw SessionError(.networkUnavailable, "offline") }
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: endpoint,
                sessionConfiguration: .init(
                    retryPolicy: RetryPolicy(maximumAttempts: 1), diagnostics: recorder.diagnostics),
                refreshPolicy: RefreshPolicy(retryPolicy: RetryPolicy(maximumAttempts: 1))))
        #expect(await manager.restore() == .active(Self.alice, offline: true))
        #expect(
            recorder.saw([
                (.refreshStarted, ["cause": "forced"]),
                (.refreshFailed, ["code": "networkUnavailable"]),
                (.restoreFinished, ["outcome": "offline", "reason": "network", "accounts": "1"]),
            ]), "\(recorder.recorded.map(\.description))")
        let failed = recorder.recorded.filter { $0.kind == .refreshFailed }
        #expect(!failed.isEmpty && failed.allSatisfy { $0.fields["milliseconds"].flatMap(Int.init) != nil })
    }

    @Test func aFailedPurgeStepIsAWarningNamingTheStep() async throws {
        let recorder = Recorder()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
        manager.register(PurgeStep("search-index") { _ in throw SessionError(.storageFailure, "disk full") })
        _ = try await manager.signIn(Self.alice, tokens: Self.tokens("alice"))
        let report = try #require(await manager.signOut())
        #expect(!report.isPurgeComplete)
        #expect(
            recorder.saw([
                (.stateChanged, ["to": "signedOut"]),
                (.signOutStep, ["step": "credential_deletion", "outcome": "succeeded"]),
                (.signOutStep, ["step": "resource:search-index", "outcome": "failed (storageFailure)"]),
            ]), "\(recorder.recorded.map(\.description))")
        let failed = recorder.recorded.first { $0.fields["step"] == "resource:search-index" }
        #expect(failed?.level == .warning)
        // A step that succeeded is told, not warned about.
        let deleted = recorder.recorded.first { $0.fields["step"] == "credential_deletion" }
        #expect(deleted?.level == .info)
    }

    /// A revoker that fails, as a provider that is down does.
    struct FailingRevoker: TokenRevoker {
        func revoke(_ token: String, hint: TokenTypeHint) async throws {
            throw SessionError(.providerOutage, "down")
        }
    }

    @Test func aRevocationLeftToTheBackgroundIsToldWhenItsOutcomeIsKnown() async throws {
        let recorder = Recorder()
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), revoker: FailingRevoker(),
                sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
        _ = try await manager.signIn(Self.alice, tokens: Self.tokens("alice"))
        var options = SignOutOptions()
        options.waitForServer = false
        await manager.signOut(options: options)
        _ = await manager.finishPendingWork(within: .seconds(5))
        // Either may come first: the revocation runs beside the purge.
        let outcomes = recorder.recorded.filter { $0.fields["step"] == "refresh_token_revocation" }
            .compactMap { $0.fields["outcome"] }
        #expect(Set(outcomes) == ["in background", "failed (providerOutage)"], "\(outcomes)")
        #expect(outcomes.count == 2)
    }

    @Test func aSignOutInAnotherProcessIsTold() async throws {
        try await TemporaryDirectory.with { directory in
            let recorder = Recorder()
            // Two managers on one directory, each with its own store, as two processes have.
            let first = SessionManager(configuration: .init(store: try FileCredentialStore(directory: directory)))
            _ = try await first.signIn(Self.alice, tokens: Self.tokens("alice"))
            let second = SessionManager(
                configuration: .init(
                    store: try FileCredentialStore(directory: directory),
                    sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
            #expect(await second.restore() == .active(Self.alice, offline: false))
            await first.signOut()
            for _ in 0..<2000 where second.current != nil { try await Task.sleep(for: .milliseconds(1)) }
            #expect(
                recorder.saw([
                    (.restoreFinished, ["outcome": "restored"]),
                    (.crossProcessNotice, [:]),
                    (.signedOutElsewhere, [:]),
                    (.stateChanged, ["from": "active", "to": "signedOut"]),
                ]), "\(recorder.recorded.map(\.description))")
        }
    }

    @Test func aRedirectToAnotherOriginTellsTheCredentialsStayedBehindAndARequestAfterTheEndIsRefused()
        async throws
    {
        try await LocalServer.withRunning { other async throws in
            try await LocalServer.withRunning { server async throws in
                other.route("/landing") { _ in .json("{}") }
                server.route("/go") { _ in
                    .text("", status: 302, headers: [("Location", other.url("/landing?x=secret-query").absoluteString)])
                }
                let recorder = Recorder()
                let session = UserSession(
                    account: Self.alice, tokens: Self.tokens("alice"),
                    configuration: .init(diagnostics: recorder.diagnostics))
                _ = try await session.data(for: URLRequest(url: server.url("/go?q=secret-query")))
                session.end()
                await #expect(throws: SessionError.self) {
                    _ = try await session.data(for: URLRequest(url: server.url("/go")))
                }
                let from = Origin(server.url("/"))!.description
                let to = Origin(other.url("/"))!.description
                #expect(
                    recorder.saw([
                        (.credentialsWithheld, ["from": from, "to": to, "status": "302"]),
                        (.requestRefusedAfterEnd, ["method": "GET"]),
                    ]), "\(recorder.recorded.map(\.description))")
                #expect(!recorder.recorded.contains { $0.description.contains("secret") })
            }
        }
    }

    @Test func aRefusedRedirectIsAWarningWithItsCode() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/loop") { _ in .text("", status: 302, headers: [("Location", "/loop?again=secret-query")]) }
            let recorder = Recorder()
            let session = UserSession(
                account: Self.alice, tokens: Self.tokens("alice"),
                configuration: .init(diagnostics: recorder.diagnostics))
            defer { session.end() }
            await #expect(throws: SessionError.self) {
                _ = try await session.data(for: URLRequest(url: server.url("/loop")))
            }
            let origin = Origin(server.url("/"))!.description
            let refused = recorder.recorded.filter { $0.kind == .redirectRefused }
            #expect(refused.count == 1)
            #expect(
                refused.first?.fields
                    == ["from": origin, "to": origin, "status": "302", "code": "malformedResponse"])
            #expect(refused.first?.level == .warning)
            #expect(!recorder.recorded.contains { $0.description.contains("secret") })
        }
    }

    /// A captured stream is read by people and by `sessionkit timeline`: each level is written by its name, and every
    /// level reads back as itself.
    @Test(arguments: zip(DiagnosticEvent.Level.allCases, ["debug", "info", "notice", "warning", "error"]))
    func everyLevelIsWrittenByItsNameAndReadBack(_ level: DiagnosticEvent.Level, _ name: String) throws {
        let event = DiagnosticEvent(
            time: Date(timeIntervalSince1970: 1_800_000_000), level: level, kind: .refreshStarted, account: nil)
        #expect("\(level)" == name)
        #expect(event.jsonLine.contains(#""level":"\#(name)""#), "\(event.jsonLine)")
        #expect(DiagnosticEvent(jsonLine: event.jsonLine) == event)
    }

    /// Logs and `sessionkit timeline` read kinds by their raw values: each is a distinct, non-empty
    /// `area.what` name, and the ones this round added are spelled as the documentation says.
    @Test func everyKindHasItsOwnStableName() {
        let names = DiagnosticEvent.Kind.allCases.map(\.rawValue)
        #expect(Set(names).count == names.count)
        #expect(names.allSatisfy { $0.split(separator: ".").count == 2 }, "\(names)")
        #expect(DiagnosticEvent.Kind.dpopNonceRetry.rawValue == "dpop.nonce_retry")
        #expect(DiagnosticEvent.Kind.refreshAdopted.rawValue == "refresh.adopted")
    }

    @Test func eventsRoundTripThroughJSONLinesAndTheLineSinkKeepsItsLevel() throws {
        let event = DiagnosticEvent(
            time: Date(timeIntervalSince1970: 1_800_000_000.25), level: .warning, kind: .refreshFailed,
            account: Self.alice, fields: ["cause": "401", "code": "networkUnavailable", "milliseconds": "12"])
        #expect(DiagnosticEvent(jsonLine: event.jsonLine) == event)
        #expect(DiagnosticEvent(jsonLine: "not json") == nil)
        #expect(DiagnosticEvent(jsonLine: #"{"time":"2027-01-15T08:00:00.250Z","level":"loud","kind":"x"}"#) == nil)
        let lines = Lock<[String]>([])
        let sink = Diagnostics.lines(level: .warning, format: .jsonLines) { line in lines.withLock { $0.append(line) } }
        sink.emit(.info, .refreshStarted, account: Self.alice, at: event.time, ["cause": "401"])
        sink.emit(.warning, .refreshFailed, account: Self.alice, at: event.time, event.fields)
        sink.flush()
        #expect(lines.withLock { $0 } == [event.jsonLine])
    }

    /// An event's `milliseconds` field is the whole milliseconds of the duration, rounded down.
    @Test func durationsAreToldInWholeMilliseconds() {
        #expect(Duration.zero.diagnosticMilliseconds == "0")
        #expect(Duration.milliseconds(5).diagnosticMilliseconds == "5")
        #expect((Duration.seconds(1) + .microseconds(234_999)).diagnosticMilliseconds == "1234")
        #expect(Duration.seconds(3600).diagnosticMilliseconds == "3600000")
    }
}
