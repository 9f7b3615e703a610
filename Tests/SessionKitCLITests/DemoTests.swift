import Foundation
import SessionKit
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The root of this repository, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Suite(.timeLimit(.minutes(10))) struct DemoTests {
    /// Whether the naive code shows the bug on this platform, by scenario id (`nil`: it depends on the run).
    static func naiveLeaks(_ id: String) -> Bool? {
        switch id {
        case "cache-leak/no-store": false
        case "cache-leak/vary-authorization":
            #if canImport(FoundationNetworking)
                true  // FoundationNetworking's URLCache ignores Vary on manual lookup
            #else
                nil
            #endif
        case LogoutInFlightScenario.id: nil  // checked against the in-flight count below
        default: true
        }
    }

    static let ids = DemoRunner.scenarios.map(\.id)

    @Test(arguments: ids)
    func sessionKitNeverLeaksAndTheNaiveCodeDoesWhereTheBugExists(id: String) async throws {
        let scenario = try #require(DemoRunner.scenarios.first { $0.id == id })
        let result = try await scenario.run(DemoOptions.defaultSeed)
        #expect(result.id == id)
        #expect(!result.sessionKit.leaked, "\(result.sessionKit.detail)")
        if let expected = Self.naiveLeaks(id) {
            #expect(result.naive.leaked == expected, "\(result.naive.detail)")
        }
        #expect(!result.naive.detail.isEmpty && !result.sessionKit.detail.isEmpty)
    }

    /// Origin B's own log decides: the naive client's token arrives there, SessionKit's session follows the
    /// redirect without it.
    @Test func aRedirectToAnotherOriginHandsTheNaiveTokenOverButNotTheSessions() async throws {
        let token = DemoSupport.tokens("alice").accessToken
        let naive = try await RedirectTokenLeakScenario.naive()
        #expect(naive.leaked, "\(naive.detail)")
        #expect(naive.detail.contains("received 1 request, 1 with the bearer token, by its own log"), "\(naive.detail)")
        let sessionKit = try await RedirectTokenLeakScenario.withSessionKit()
        #expect(!sessionKit.leaked, "\(sessionKit.detail)")
        #expect(
            sessionKit.detail.contains("received 1 request, none with Authorization"),
            "the session follows the redirect, without the token: \(sessionKit.detail)")
        #expect(!naive.detail.contains(token) && !sessionKit.detail.contains(token), "a token was printed")
    }

    /// The naive cache answers Bob from Alice's entry: his request never reaches the server, where the server would
    /// have answered him as himself. `no-store` is the one variant the naive layer honours.
    @Test(arguments: CacheLeakScenario.variants.map(\.name))
    func theNaiveCacheAnswersBobWithoutAskingTheServer(variant name: String) async throws {
        let variant = try #require(CacheLeakScenario.variants.first { $0.name == name })
        let naive = try await CacheLeakScenario.naive(variant)
        guard let leaks = Self.naiveLeaks("cache-leak/\(name)") else { return }
        #expect(naive.leaked == leaks, "\(naive.detail)")
        #expect(naive.detail.contains(leaks ? "(1 server request)" : "(2 server requests)"), "\(naive.detail)")
    }

    /// Why the naive scenario writes its own cache layer: on Linux, a URLSession with a URLCache stores nothing by
    /// itself, so Foundation alone never shows the cache leak there.
    @Test func foundationOnLinuxCachesNothingByItself() async throws {
        try await LocalServer.withRunning { server in
            server.route("/me/profile") { request in
                .json(#"{"name":"\#(DemoSupport.user(of: request))"}"#, headers: [("Cache-Control", "max-age=60")])
            }
            let configuration = URLSessionConfiguration.default
            configuration.urlCache = URLCache(memoryCapacity: 1_000_000, diskCapacity: 0, diskPath: nil)
            let urlSession = URLSession(configuration: configuration)
            defer { urlSession.invalidateAndCancel() }
            for user in ["alice", "bob"] {
                let (data, _) = try await urlSession.data(
                    for: DemoSupport.get(server, "/me/profile", token: "token-\(user)"))
                #expect(DemoSupport.text(data) == #"{"name":"\#(user)"}"#)
            }
            #if os(Linux)
                #expect(server.requests.count == 2, "both requests reached the server")
            #endif
        }
    }

    /// The ids listed after `marker` up to the next blank line, in order: the help's or the README's list.
    static func listedIDs(in text: String, after marker: String) throws -> [String] {
        let start = try #require(text.range(of: marker), "no \(marker) in the text")
        let rest = text[start.upperBound...]
        let list = rest[..<(rest.range(of: "\n\n")?.lowerBound ?? rest.endIndex)]
        return list.split(whereSeparator: { ", \n`".contains($0) }).map(String.init)
    }

    @Test func theHelpListsExactlyTheDemosScenariosInOrder() throws {
        #expect(try Self.listedIDs(in: Usage.text(.demo), after: "Scenarios:") == Self.ids)
    }

    @Test func theDemosHelpGivesTheDemosExitStatusesNotTheAudits() {
        let help = flattened(Usage.text(.demo))
        #expect(help.contains("0 no SessionKit row leaked"), "\(help)")
        #expect(help.contains("1 a SessionKit row leaked"))
        #expect(help.contains("3 a scenario could not run"))
        #expect(!help.contains("host unreachable") && !help.contains("TLS"), "the demo contacts no remote host")
    }

    @Test func theReadmeListsExactlyTheDemosScenariosAndTheirCount() throws {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(try Self.listedIDs(in: readme, after: "Its scenarios, in the order it runs them:") == Self.ids)
        #expect(readme.contains("runs \(Self.ids.count) scenarios"))
    }

    @Test func theNaiveAppLeaksExactlyWhenSomethingIsInFlightAtLogout() async throws {
        let schedule = ArrivalSchedule(seed: DemoOptions.defaultSeed)
        let (naive, inFlight) = try await LogoutInFlightScenario.naive(schedule)
        #expect(naive.leaked == (inFlight > 0), "\(naive.detail)")
        let (sessionKit, _) = try await LogoutInFlightScenario.withSessionKit(schedule)
        #expect(!sessionKit.leaked, "\(sessionKit.detail)")
        #expect(sessionKit.detail.contains("0 committed after logout"))
    }

    @Test func theScheduleFollowsTheSeedAndTheDefaultSeedHasRequestsInFlight() {
        #expect(ArrivalSchedule(seed: 1) == ArrivalSchedule(seed: 1))
        #expect(ArrivalSchedule(seed: 1) != ArrivalSchedule(seed: 2))
        let schedule = ArrivalSchedule(seed: DemoOptions.defaultSeed)
        #expect(schedule.scheduledInFlight > 0, "the default seed should show the bug")
        #expect(schedule.logout.seconds >= ArrivalSchedule.earliestLogout)
        #expect(schedule.logout.seconds < ArrivalSchedule.latestLogout)
        #expect(schedule.arrivals == schedule.arrivals.sorted())
        #expect(schedule.arrivals.allSatisfy { $0 < schedule.logout })
        #expect(abs(ArrivalSchedule.expectedInFlight - 1.2) < 1e-9)
    }

    @Test func jsonHasExactlyTheDocumentedShapeAndEveryScenario() async throws {
        let captured = CapturedConsole()
        let status = await captured.run(["demo", "--json"])
        #expect(status == .ok, "\(captured.errors)")
        #expect(
            captured.output.hasPrefix(
                #"{"seed":5,"totals":{"scenarios":\#(DemoRunner.scenarios.count),"naiveLeaked":"#))
        let object = try JSONSerialization.jsonObject(with: Data(captured.output.utf8))
        let root = try #require(object as? [String: Any])
        #expect(Set(root.keys) == ["seed", "totals", "scenarios"])
        let totals = try #require(root["totals"] as? [String: Int])
        #expect(Set(totals.keys) == ["scenarios", "naiveLeaked", "sessionkitLeaked"])
        #expect(totals["sessionkitLeaked"] == 0)
        let scenarios = try #require(root["scenarios"] as? [[String: Any]])
        #expect(totals["scenarios"] == scenarios.count)
        #expect(
            totals["naiveLeaked"]
                == scenarios.filter { ($0["naive"] as? [String: Any])?["leaked"] as? Bool == true }.count)
        #expect(scenarios.compactMap { $0["id"] as? String } == Self.ids)
        #if canImport(FoundationNetworking)
            // Every naive row but the control leaks here; the README and the help say how many.
            let claim = "\(try #require(totals["naiveLeaked"])) of the \(scenarios.count)"
            let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
            #expect(flattened(readme).contains("\(claim) do. `cache-leak/no-store` is the control"), "\(claim)")
            #expect(flattened(Usage.text(.demo)).contains("\(claim) naive rows leak"), "\(claim)")
        #endif
        for scenario in scenarios {
            #expect(Set(scenario.keys) == ["id", "naive", "sessionkit"])
            for side in ["naive", "sessionkit"] {
                let verdict = try #require(scenario[side] as? [String: Any])
                #expect(Set(verdict.keys) == ["leaked", "detail"])
                #expect(verdict["leaked"] is Bool)
                #expect((verdict["detail"] as? String)?.isEmpty == false)
            }
            #expect((scenario["sessionkit"] as? [String: Any])?["leaked"] as? Bool == false)
        }
    }

    @Test func theTableFitsEightyColumnsAndColourFollowsTheTerminalAndNoColor() async {
        let terminal = CapturedConsole(isTerminal: true)
        #expect(await terminal.run(["demo", "--only", "cache-leak/"]) == .ok)
        #expect(fitsEightyColumns(terminal.output))
        #expect(terminal.output.contains("\u{1B}[31mLEAKED"))
        #expect(terminal.errors.contains("[1/4] cache-leak/max-age"), "progress on a terminal")
        #expect(terminal.errors.contains("[4/4] cache-leak/vary-authorization"))

        let noColor = CapturedConsole(environment: ["NO_COLOR": "1"], isTerminal: true)
        #expect(await noColor.run(["demo", "--only", "cache-leak/no"]) == .ok)
        #expect(!noColor.output.contains("\u{1B}["))

        // no-color.org: an empty NO_COLOR does not disable colour.
        let emptyNoColor = CapturedConsole(environment: ["NO_COLOR": ""], isTerminal: true)
        #expect(await emptyNoColor.run(["demo", "--only", "cache-leak/max"]) == .ok)
        #expect(emptyNoColor.output.contains("\u{1B}[31mLEAKED"))

        let piped = CapturedConsole()
        #expect(await piped.run(["demo", "--only", "cache-leak/no"]) == .ok)
        #expect(!piped.output.contains("\u{1B}["))
        #expect(piped.errors.isEmpty, "no progress when standard error is not a terminal")
        #expect(piped.output.contains("cache-leak/no-store"))
        #expect(!piped.output.contains("cache-leak/max-age"))
    }

    /// The totals line counts in words: "1 scenario", never "1 scenarios".
    @Test func theFooterCountsOneScenarioInTheSingular() async {
        let one = CapturedConsole()
        #expect(await one.run(["demo", "--only", "cache-leak/no-store"]) == .ok)
        #expect(flattened(one.output).contains("1 scenario in "), "\(one.output)")
        #expect(!one.output.contains("1 scenarios"))
    }

    @Test func anUnknownPrefixIsAUsageErrorListingTheIds() async {
        let captured = CapturedConsole()
        #expect(await captured.run(["demo", "--only", "nothing"]) == .usage)
        #expect(captured.errors.contains("no scenario id starts with that"))
        #expect(captured.errors.contains("writes-in-flight"))
    }

    @Test func onlyALeakingSessionKitRowOrAFailedScenarioMakesTheExitStatusNonZero() {
        func row(naive: Bool, sessionKit: Bool) -> ScenarioResult {
            ScenarioResult(
                id: "x", naive: Verdict(leaked: naive, detail: "a"),
                sessionKit: Verdict(leaked: sessionKit, detail: "b"))
        }
        #expect(SessionKitTool.exitCode([row(naive: true, sessionKit: false)], failures: 0) == .ok)
        #expect(
            SessionKitTool.exitCode(
                [row(naive: true, sessionKit: false), row(naive: false, sessionKit: true)], failures: 0) == .leak)
        #expect(SessionKitTool.exitCode([row(naive: true, sessionKit: false)], failures: 1) == .failure)
        #expect(
            DemoReport.json([row(naive: true, sessionKit: false)], seed: 7)
                == #"{"seed":7,"totals":{"scenarios":1,"naiveLeaked":1,"sessionkitLeaked":0},"#
                + #""scenarios":[{"id":"x","naive":{"leaked":true,"detail":"a"},"sessionkit":{"leaked":false,"detail":"b"}}]}"#
        )
    }

    @Test func jsonStringsAreEscaped() throws {
        let text = "say \"hi\"\\ λW\n\t\u{01}"
        let quoted = JSONValue.quoted(text)
        #expect(quoted == #""say \"hi\"\\ λW\n\t\u0001""#)
        let decoded = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
        #expect(decoded == [text])
    }
}
