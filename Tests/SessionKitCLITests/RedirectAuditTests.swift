import Foundation
import SessionKit
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

/// `sessionkit audit redirects` against real loopback servers: origin A at `http://127.0.0.1:<port>`, and where a
/// second origin is needed, B at `http://localhost:<another port>` (another host and port) or at
/// `http://127.0.0.1:<another port>` (another port only). B's own log shows what reached it.
@Suite(.timeLimit(.minutes(5))) struct RedirectAuditTests {
    static let token = "Zq7xK2mP9vL4-wR8tY3nB6cJ1"

    /// Runs the audit of `url` with the token from `API_TOKEN`, and checks what every run must: no piece of the
    /// token printed, 80 columns.
    private func audit(_ url: URL, _ extra: [String] = []) async -> (ExitCode, CapturedConsole) {
        let captured = CapturedConsole(environment: ["API_TOKEN": Self.token])
        let status = await captured.run(
            ["audit", "redirects", "--url", url.absoluteString, "--token-env", "API_TOKEN"] + extra)
        expectNoPieceOfTheToken(in: captured.all)
        #expect(fitsEightyColumns(captured.output))
        return (status, captured)
    }

    private func expectNoPieceOfTheToken(in text: String, token: String = token) {
        let characters = Array(token)
        for start in 0...(characters.count - TokenScrubber.minimumRun) {
            let piece = String(characters[start..<start + TokenScrubber.minimumRun])
            #expect(!text.contains(piece), "a piece of the token was printed: \(piece)")
        }
    }

    private func json(_ captured: CapturedConsole) throws -> [String: Any] {
        #expect(captured.output.hasSuffix("\n") && captured.output.split(separator: "\n").count == 1)
        return try #require(try JSONSerialization.jsonObject(with: Data(captured.output.utf8)) as? [String: Any])
    }

    private static func redirect(_ status: Int = 302, to location: String) -> LocalServer.Response {
        LocalServer.Response(status: status, headers: [("Location", location)])
    }

    /// `/me` answers 200 to the token, 401 otherwise.
    private static func resource(_ request: LocalServer.Request) -> LocalServer.Response {
        request.bearerToken == token ? .json(#"{"user":"alice"}"#) : .status(401)
    }

    // MARK: - Verdicts

    @Test func noRedirectAtAllExitsZero() async throws {
        try await LocalServer.withRunning { a in
            a.route("GET", "/me", Self.resource)
            let (status, captured) = await audit(a.url("/me"))
            #expect(status == .ok, "\(captured.output)")
            #expect(a.requests.map(\.bearerToken) == [Self.token])
            let output = flattened(captured.output)
            #expect(output.contains("SAFE: the answer (200) comes from http://127.0.0.1:\(a.port) itself, without a"))
            #expect(!output.contains("Fix:"))
        }
    }

    @Test func redirectsWithinTheOriginExitZeroAndCarryTheToken() async throws {
        try await LocalServer.withRunning { a in
            a.route("GET", "/old") { _ in Self.redirect(301, to: "/me-moved") }  // relative
            a.route("GET", "/me-moved") { _ in Self.redirect(308, to: "http://127.0.0.1:\(a.port)/me") }
            a.route("GET", "/me", Self.resource)
            let (status, captured) = await audit(a.url("/old"))
            #expect(status == .ok, "\(captured.output)")
            #expect(a.requests.map(\.path) == ["/old", "/me-moved", "/me"])
            #expect(a.requests.allSatisfy { $0.bearerToken == Self.token }, "the token goes along within the origin")
            #expect(flattened(captured.output).contains("after 2 redirects within it"))
        }
    }

    /// `to`: `localhost` is another host (and port); `127.0.0.1` another port only. Both are another origin.
    @Test(arguments: [(302, "localhost"), (307, "localhost"), (303, "127.0.0.1"), (308, "127.0.0.1")])
    func aRedirectToAnotherOriginExitsOneAndTheAuditDoesNotHandOverTheToken(status code: Int, to host: String)
        async throws
    {
        try await LocalServer.withRunning { b in
            b.route("GET", "/land") { _ in .json(#"{"landed":true}"#) }
            try await LocalServer.withRunning { a in
                a.route("GET", "/me") { _ in Self.redirect(code, to: "http://\(host):\(b.port)/land?sig=abc") }
                let (status, captured) = await audit(a.url("/me"))
                #expect(status == .leak, "\(captured.output)")
                #expect(a.requests.map(\.bearerToken) == [Self.token])
                // B's own log: it was asked, and never saw an Authorization field.
                #expect(b.requests.map(\.path) == ["/land"])
                #expect(b.requests.allSatisfy { $0.header("Authorization") == nil }, "the audit leaked the token")
                #expect(b.requests.allSatisfy { $0.header("Cookie") == nil })
                let output = flattened(captured.output)
                #expect(
                    output.contains(
                        "LEAK: the bearer request to http://127.0.0.1:\(a.port) is redirected to another origin, "
                            + "http://\(host):\(b.port), by hop 1 (\(code))"), "\(captured.output)")
                #expect(output.contains("SENDS IT: a leak"))
                #expect(output.contains("Fix:"))
                #expect(!captured.all.contains("sig=abc"), "a query is never printed")
            }
        }
    }

    /// Once the chain has left the audited origin, the token is not sent again, even to a hop back on it: where
    /// that hop leads was chosen by the other origin.
    @Test func aChainThatLeavesTheOriginNeverCarriesTheTokenAgainEvenBackHome() async throws {
        try await LocalServer.withRunning { a in
            try await LocalServer.withRunning { b in
                a.route("GET", "/me") { _ in Self.redirect(to: "http://localhost:\(b.port)/bounce") }
                b.route("GET", "/bounce") { _ in Self.redirect(to: "http://127.0.0.1:\(a.port)/final") }
                a.route("GET", "/final", Self.resource)
                let (status, captured) = await audit(a.url("/me"), ["--json"])
                #expect(status == .leak)
                #expect(a.requests.map(\.path) == ["/me", "/final"])
                #expect(a.requests.map(\.bearerToken) == [Self.token, nil])
                #expect(b.requests.count == 1 && b.requests.allSatisfy { $0.header("Authorization") == nil })
                let root = try json(captured)
                let hops = try #require(root["hops"] as? [[String: Any]])
                #expect(hops.map { $0["sameOrigin"] as? Bool } == [true, false, true])
                #expect(hops.map { $0["tokenSent"] as? Bool } == [true, false, false])
                #expect(hops.map { $0["leak"] as? Bool } == [false, true, false])
                #expect(hops.map { $0["status"] as? Int } == [302, 302, 401])
            }
        }
    }

    @Test func aRedirectLoopExitsThree() async throws {
        try await LocalServer.withRunning { a in
            a.route("GET", "/loop") { _ in Self.redirect(to: "/loop") }
            let (status, captured) = await audit(a.url("/loop"))
            #expect(status == .failure, "\(captured.output)")
            #expect(a.requests.count == RedirectChain.maximumRedirects + 1)
            #expect(a.requests.allSatisfy { $0.bearerToken == Self.token })
            #expect(
                flattened(captured.output).contains(
                    "INCONCLUSIVE: more than 10 redirects (a loop: hop 2 asks for hop 1's URL again): no final answer"))
        }
    }

    /// `/hop/N` redirects to `/hop/N+1` until `/hop/<last>`, which answers.
    @Test(arguments: [(10, ExitCode.ok), (11, .failure)])
    func tenRedirectsAreFollowedAndAnEleventhIsNot(redirects: Int, expected: ExitCode) async throws {
        let hops: LocalServer.Handler = { request in
            let n = Int(request.path.dropFirst("/hop/".count)) ?? 0
            return n < redirects ? Self.redirect(307, to: "/hop/\(n + 1)") : Self.resource(request)
        }
        try await LocalServer.withRunning(handler: hops) { a in
            let (status, captured) = await audit(a.url("/hop/0"))
            #expect(status == expected, "\(captured.output)")
            #expect(a.requests.count == min(redirects, RedirectChain.maximumRedirects) + 1)
        }
    }

    @Test(arguments: ["http://", "mailto:someone@example.com", "https://:443/x", "http://127.0.0.1:99999/"])
    func aLocationThatIsNotAnHTTPURLExitsThree(location: String) async throws {
        try await LocalServer.withRunning { a in
            a.route("GET", "/me") { _ in Self.redirect(to: location) }
            let (status, captured) = await audit(a.url("/me"))
            #expect(status == .failure, "\(captured.output)")
            #expect(a.requests.count == 1)
            #expect(flattened(captured.output).contains("with a Location that is not an http(s) URL"))
        }
    }

    @Test(arguments: [401, 403])
    func aRefusedTokenIsNoVerdict(status code: Int) async throws {
        try await LocalServer.withRunning { a in
            a.route("GET", "/me") { _ in .status(code) }
            let (status, captured) = await audit(a.url("/me"))
            #expect(status == .failure)
            #expect(flattened(captured.output).contains("the token was refused (\(code))"))
        }
    }

    @Test func anUnreachableURLExitsThreeWithAMessageAndNoReport() async throws {
        let gone = try await LocalServer.start()
        let url = gone.url("/me")
        await gone.stop()
        let (status, captured) = await audit(url)
        #expect(status == .failure)
        #expect(captured.output.isEmpty)
        #expect(captured.errors.contains("could not connect to 127.0.0.1:\(gone.port)"), "\(captured.errors)")

        let (jsonStatus, jsonCaptured) = await audit(url, ["--json"])
        #expect(jsonStatus == .failure)
        let root = try json(jsonCaptured)
        #expect(root["verdict"] as? String == "inconclusive")
        let hops = try #require(root["hops"] as? [[String: Any]])
        try #require(hops.count == 1)
        #expect(hops[0]["status"] is NSNull)
        #expect((hops[0]["error"] as? String)?.contains("could not connect") == true)
    }

    /// The redirect itself is the finding: that the other origin does not answer changes nothing.
    @Test func aRedirectToAnOriginThatIsDownIsStillALeak() async throws {
        let gone = try await LocalServer.start()
        let port = gone.port
        await gone.stop()
        try await LocalServer.withRunning { a in
            a.route("GET", "/me") { _ in Self.redirect(to: "http://localhost:\(port)/land") }
            let (status, captured) = await audit(a.url("/me"))
            #expect(status == .leak, "\(captured.output)")
            let output = flattened(captured.output)
            #expect(output.contains("note: then hop 2 got no answer: could not connect to localhost:\(port)"))
        }
    }

    // MARK: - Output

    @Test func jsonHasTheDocumentedShape() async throws {
        try await LocalServer.withRunning { b in
            b.route("GET", "/land") { _ in .json("{}") }
            try await LocalServer.withRunning { a in
                a.route("GET", "/me") { _ in Self.redirect(to: "http://localhost:\(b.port)/land") }
                let (status, captured) = await audit(a.url("/me?q=private"), ["--json"])
                #expect(status == .leak)
                let root = try json(captured)
                #expect(
                    Set(root.keys) == [
                        "audit", "url", "verdict", "exitCode", "reason", "redirects", "hops", "fixes", "notes",
                    ])
                #expect(root["audit"] as? String == "redirects")
                #expect(root["url"] as? String == "http://127.0.0.1:\(a.port)/me?…")
                #expect(root["verdict"] as? String == "cross-origin")
                #expect(root["exitCode"] as? Int == 1)
                #expect(root["redirects"] as? Int == 1)
                #expect((root["fixes"] as? [String])?.isEmpty == false)
                #expect((root["notes"] as? [String])?.isEmpty == true)
                let hops = try #require(root["hops"] as? [[String: Any]])
                // Required, not expected: the hops are indexed below, and an index out of range ends the process.
                try #require(hops.count == 2)
                for hop in hops {
                    #expect(
                        Set(hop.keys) == [
                            "hop", "url", "origin", "status", "location", "sameOrigin", "tokenSent",
                            "naiveClientSendsToken", "leak", "downgrade", "error",
                        ])
                    #expect(hop["naiveClientSendsToken"] as? Bool == true)
                    #expect(hop["downgrade"] as? Bool == false)
                    #expect(hop["error"] is NSNull)
                }
                #expect(hops.map { $0["hop"] as? Int } == [1, 2])
                #expect(
                    hops.map { $0["origin"] as? String } == [
                        "http://127.0.0.1:\(a.port)", "http://localhost:\(b.port)",
                    ])
                #expect(hops[0]["location"] as? String == "http://localhost:\(b.port)/land")
                #expect(hops[1]["location"] is NSNull)
                #expect(hops.map { $0["sameOrigin"] as? Bool } == [true, false])
                #expect(hops.map { $0["tokenSent"] as? Bool } == [true, false])
                #expect(hops.map { $0["status"] as? Int } == [302, 200])
            }
        }
    }

    /// A server that echoes the token into the redirect's path, a header and the body: no piece of it is printed,
    /// in the report or the JSON, wherever the report cuts a line.
    @Test(arguments: [false, true])
    func theTokenIsNeverPrintedEvenWhenTheServerEchoesIt(json: Bool) async throws {
        try await LocalServer.withRunning { b in
            b.route("GET", "/land/\(Self.token)") { _ in .json("{}") }
            try await LocalServer.withRunning { a in
                a.route("GET", "/me") { request in
                    var response = Self.redirect(to: "http://localhost:\(b.port)/land/\(request.bearerToken ?? "")")
                    response.headers.append(("X-Echo", request.bearerToken ?? ""))
                    response.body = Data((request.bearerToken ?? "").utf8)
                    return response
                }
                let captured = CapturedConsole(input: [Self.token])
                let status = await captured.run(
                    ["audit", "redirects", "--url", a.url("/me").absoluteString, "--token", "-"]
                        + (json ? ["--json"] : []))
                #expect(status == .leak)
                expectNoPieceOfTheToken(in: captured.all)
                // The report names origins only; the JSON shows the hop's path, redacted.
                #expect(captured.all.contains("<redacted") == json)
                #expect(b.requests.count == 1 && b.requests.allSatisfy { $0.header("Authorization") == nil })
            }
        }
    }

    @Test func theTokenComesFromSessionKitTokenByDefault() async throws {
        try await LocalServer.withRunning { a in
            a.route("GET", "/me", Self.resource)
            let captured = CapturedConsole(environment: [RedirectAudit.defaultVariable: Self.token])
            #expect(await captured.run(["audit", "redirects", "--url", a.url("/me").absoluteString]) == .ok)
            #expect(a.requests.map(\.bearerToken) == [Self.token])
            expectNoPieceOfTheToken(in: captured.all)
        }
    }

    @Test func usageErrorsExitTwoWithoutAskingAnything() async throws {
        try await LocalServer.withRunning { a in
            let url = a.url("/me").absoluteString
            for (arguments, environment, message) in [
                (["--url", url], [String: String](), "environment variable SESSIONKIT_TOKEN is not set or empty"),
                (["--url", url, "--token-env", "MISSING"], [:], "environment variable MISSING is not set or empty"),
                (["--token-env", "API_TOKEN"], ["API_TOKEN": Self.token], "--url is required"),
                (["--url", url, "--token", "x", "--token-env", "Y"], [:], "give --token or --token-env, not both"),
                (
                    ["--url", "http://api.example.com/me", "--token-env", "API_TOKEN"], ["API_TOKEN": Self.token],
                    "--url must use https"
                ),
                (["--url", url, "--timeout", "-1"], [:], "--timeout needs a number of seconds"),
                (["--url", url, "--follow", "3"], [:], "unknown option '--follow'"),
            ] {
                let captured = CapturedConsole(environment: environment)
                #expect(await captured.run(["audit", "redirects"] + arguments) == .usage, "\(arguments)")
                #expect(captured.output.isEmpty)
                #expect(captured.errors.contains(message), "\(captured.errors)")
                #expect(captured.errors.hasSuffix("Try 'sessionkit audit redirects --help' for more information.\n"))
                expectNoPieceOfTheToken(in: captured.all)
            }
            #expect(a.requests.isEmpty)
        }
    }

    @Test func theHelpFitsEightyColumnsAndNamesEveryJSONMember() async {
        let captured = CapturedConsole()
        #expect(await captured.run(["help", "audit", "redirects"]) == .ok)
        #expect(fitsEightyColumns(captured.output))
        let help = flattened(captured.output)
        for member in [
            "verdict", "exitCode", "reason", "redirects", "hops", "location", "sameOrigin", "tokenSent",
            "naiveClientSendsToken", "leak", "downgrade", "error", "fixes", "notes",
        ] {
            #expect(help.contains(member), "\(member)")
        }
        for tool in [Usage.text(.tool), Usage.text(.audit)] { #expect(tool.contains("audit redirects")) }
    }

    // MARK: - The chain alone

    private func origin(_ text: String) -> Origin? {
        URL(string: text).flatMap(RedirectChain.origin(of:))
    }

    @Test func originsCompareSchemeHostAndPortWithDefaultPortsAndOnlyHTTPCounts() {
        #expect(origin("https://API.example.com:443/me") == origin("https://api.example.com/other"))
        #expect(origin("http://api.example.com:80/") == origin("HTTP://api.example.com"))
        #expect(origin("https://api.example.com/") != origin("http://api.example.com/"))
        #expect(origin("https://api.example.com/") != origin("https://api.example.com:8443/"))
        #expect(origin("http://127.0.0.1:80/") != origin("http://localhost:80/"), "host names are not resolved")
        #expect(origin("https://[::1]:8443/").map(RedirectChain.shown) == "https://[::1]:8443")
        #expect(origin("https://api.example.com:443/").map(RedirectChain.shown) == "https://api.example.com")
        for other in ["ftp://api.example.com/", "wss://api.example.com/", "mailto:a@example.com", "/relative"] {
            #expect(origin(other) == nil, "\(other)")
        }
    }

    @Test func aLocationIsResolvedAgainstTheHopThatSentIt() {
        let base = URL(string: "https://api.example.com/v1/me")!
        #expect(RedirectChain.resolve("/v2/me", against: base)?.absoluteString == "https://api.example.com/v2/me")
        #expect(RedirectChain.resolve("me2", against: base)?.absoluteString == "https://api.example.com/v1/me2")
        #expect(
            RedirectChain.resolve("//cdn.example.com/x", against: base)?.absoluteString == "https://cdn.example.com/x")
        #expect(RedirectChain.resolve("", against: base) == nil)
        #expect(RedirectChain.resolve("javascript:alert(1)", against: base) == nil)
    }

    @Test func aRedirectFromHTTPSToHTTPIsADowngradeAndALeak() throws {
        var chain = try #require(RedirectChain(url: URL(string: "https://api.example.com/me")!))
        #expect(chain.nextRequest?.sendsToken == true)
        chain.answered(status: 301, location: "http://api.example.com/me")
        #expect(chain.nextRequest?.sendsToken == false, "http is another origin: no token")
        chain.answered(status: 200, location: nil)
        #expect(chain.nextRequest == nil)
        #expect(chain.verdict == .downgrade)
        #expect(chain.verdict.exitCode == .leak)
        #expect(chain.hops.map(\.downgrades) == [true, false])
        #expect(chain.reason.contains("redirects from https to plain http, http://api.example.com"))
        #expect(chain.fixes.first?.contains("Strict-Transport-Security") == true)
    }

    @Test func statusesThatAreNotRedirectsEndTheChain() throws {
        for status in [200, 204, 300, 304, 404, 500] {
            var chain = try #require(RedirectChain(url: URL(string: "https://api.example.com/me")!))
            chain.answered(status: status, location: "https://elsewhere.example.com/")
            #expect(chain.nextRequest == nil, "\(status)")
            #expect(chain.end == .answered)
            #expect(chain.verdict == .safe, "\(status)")
            #expect(chain.foreignOrigins.isEmpty)
        }
    }

    @Test func aFailureAfterAnotherOriginIsStillALeakWithANote() throws {
        var chain = try #require(RedirectChain(url: URL(string: "https://api.example.com/me")!))
        chain.answered(status: 302, location: "https://cdn.example.net/file")
        chain.failed("could not connect to cdn.example.net:443")
        #expect(chain.verdict == .crossOrigin)
        #expect(chain.notes == ["then hop 2 got no answer: could not connect to cdn.example.net:443."])
        #expect(chain.foreignOrigins.map(\.description) == ["https://cdn.example.net"])
    }
}
