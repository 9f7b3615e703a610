import Foundation
import SessionKit
import Testing

@testable import SessionKitCLICore

@Suite(.timeLimit(.minutes(5))) struct CommandLineParserTests {
    private func parse(_ line: String) throws(UsageError) -> Command {
        try CommandLineParser.parse(line.split(separator: " ").map(String.init))
    }

    private func usageError(_ line: String) -> UsageError? {
        do {
            _ = try parse(line)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Help

    @Test(arguments: [
        ("--help", HelpTopic.tool), ("-h", .tool), ("help", .tool), ("help demo", .demo), ("help audit", .audit),
        ("help audit cache", .auditCache), ("help audit logout", .auditLogout), ("demo --help", .demo),
        ("demo --json -h", .demo), ("audit --help", .audit), ("audit cache -h", .auditCache),
        ("audit cache --url x --help", .auditCache), ("audit logout --help", .auditLogout),
        ("help audit redirects", .auditRedirects), ("audit redirects --help", .auditRedirects),
        ("audit redirects --url x -h", .auditRedirects),
    ])
    func helpIsFoundForEachCommand(line: String, topic: HelpTopic) throws {
        #expect(try parse(line) == .help(topic))
    }

    @Test func everyHelpTextFitsEightyColumnsAndDocumentsTheExitStatuses() {
        for topic in HelpTopic.allCases {
            let text = Usage.text(topic)
            #expect(fitsEightyColumns(text), "\(topic)")
            for status in ExitCode.allCases { #expect(text.contains("  \(status.rawValue)  "), "\(topic)") }
        }
    }

    @Test func helpExamplesReadTokensFromTheEnvironmentNeverFromTheCommandLine() {
        for topic in [HelpTopic.auditCache, .auditLogout, .auditRedirects] {
            let example = Usage.text(topic).components(separatedBy: "Example:").last ?? ""
            #expect(!example.contains("--token "), "\(topic)")
            #expect(!example.contains("--access-token "), "\(topic)")
            #expect(!example.contains("--refresh-token "), "\(topic)")
        }
    }

    // MARK: - demo

    @Test func demoDefaults() throws {
        #expect(try parse("demo") == .demo(DemoOptions(json: false, only: nil, seed: DemoOptions.defaultSeed)))
    }

    @Test func demoTakesEveryFlagInAnyOrderAndBothForms() throws {
        let expected = Command.demo(DemoOptions(json: true, only: "cache-leak", seed: 42))
        #expect(try parse("demo --json --only cache-leak --seed 42") == expected)
        #expect(try parse("demo --seed=42 --only=cache-leak --json") == expected)
    }

    @Test(arguments: [
        "demo --seed", "demo --seed -1", "demo --seed x", "demo --seed 1.5", "demo --only", "demo --only=",
    ])
    func demoRefusesMissingOrInvalidValues(line: String) {
        #expect(usageError(line)?.topic == .demo)
    }

    @Test func flagsThatTakeNoValueRefuseOne() {
        #expect(usageError("demo --json=yes")?.message == "--json takes no value")
    }

    @Test func anOptionGivenTwiceIsRefused() {
        #expect(usageError("demo --seed 1 --seed 2")?.message == "--seed is given more than once")
        // One prefix per run, as the help and the README say: a second one is refused, not added.
        #expect(
            usageError("demo --only late --only cache-leak/")?.message == "--only is given more than once")
    }

    // MARK: - audit cache

    @Test func auditCacheTakesEveryFlag() throws {
        let command = try parse(
            "audit cache --url https://api.example.com/me --token A --token-env B_TOKEN --timeout 2.5")
        #expect(
            command
                == .auditCache(
                    CacheAuditOptions(
                        url: URL(string: "https://api.example.com/me")!,
                        tokens: [.literal("A"), .environment("B_TOKEN")],
                        timeout: .milliseconds(2500)
                    )))
    }

    @Test func auditCacheTokensComeInOrderAndDashMeansStandardInput() throws {
        guard case .auditCache(let options) = try parse("audit cache --token-env X --token - --url http://127.0.0.1:9/")
        else {
            Issue.record("not an audit cache command")
            return
        }
        #expect(options.tokens == [.environment("X"), .standardInput])
        #expect(options.timeout == .seconds(10))
    }

    @Test(arguments: [
        ("audit cache", "--url is required"),
        ("audit cache --url", "--url needs a value"),
        ("audit cache --token --url https://a.example/", "--token needs a value"),
        (
            "audit cache --url https://a.example/ --token a --token b --token c",
            "give two tokens (--token or --token-env), not 3"
        ),
        ("audit cache --url https://a.example/ --token-env=", "--token-env needs a variable name"),
        ("audit cache --url notaurl", "--url needs an absolute http(s) URL with a host"),
        ("audit cache --url ftp://a.example/", "--url needs an http(s) URL"),
        (
            "audit cache --url https://a.example/ --timeout 0",
            "--timeout needs a number of seconds above 0 and at most 600"
        ),
        (
            "audit cache --url https://a.example/ --timeout 601",
            "--timeout needs a number of seconds above 0 and at most 600"
        ),
        (
            "audit cache --url https://a.example/ --timeout soon",
            "--timeout needs a number of seconds above 0 and at most 600"
        ),
    ])
    func auditCacheRefusesMissingAndInvalidValues(line: String, message: String) {
        let error = usageError(line)
        #expect(error?.message == message)
        #expect(error?.topic == .auditCache)
    }

    @Test func plainHTTPIsRefusedToAnotherMachineAndAcceptedOnLoopback() throws {
        #expect(usageError("audit cache --url http://api.example.com/me")?.message.contains("must use https") == true)
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "[::1]"] {
            #expect(throws: Never.self) { try parse("audit cache --url http://\(host):8080/me") }
        }
    }

    @Test func anUpperCaseSchemeWorksAndIsMadeLowerCase() throws {
        let command = try parse("audit cache --url HTTP://127.0.0.1:8080/me")
        guard case .auditCache(let options) = command else { throw UsageError("not an audit") }
        #expect(options.url.absoluteString == "http://127.0.0.1:8080/me")
        guard case .auditCache(let secure) = try parse("audit cache --url HTTPS://api.example.com/me") else {
            throw UsageError("not an audit")
        }
        #expect(secure.url.scheme == "https")
    }

    @Test(arguments: [
        "http://127.0.0.1:99999/me", "http://127.0.0.1:0/me", "http://127.0.0.1:65536/", "http://127.0.0.1:-1/",
    ])
    func anOutOfRangePortIsAUsageError(url: String) {
        #expect(
            usageError("audit cache --url \(url)")?.message == "--url has a port out of range: a port is 1 to 65535")
    }

    @Test func anIPv6HostIsPrintedInBrackets() {
        #expect(AuditHTTPClient.target(of: URL(string: "http://[::1]:8080/me")) == "[::1]:8080")
        #expect(AuditHTTPClient.target(of: URL(string: "https://[2001:db8::1]/me")) == "[2001:db8::1]:443")
        #expect(CacheAudit.shown(URL(string: "http://[::1]:8080/me?x=1")!) == "http://[::1]:8080/me?…")
    }

    // MARK: - audit logout

    @Test func auditLogoutTakesEveryFlag() throws {
        let command = try parse(
            "audit logout --resource https://api.example.com/me --revocation-endpoint https://id.example.com/revoke "
                + "--client-id app --access-token - --refresh-token-env RT --token-endpoint https://id.example.com/token "
                + "--timeout 3")
        #expect(
            command
                == .auditLogout(
                    LogoutAuditOptions(
                        resource: URL(string: "https://api.example.com/me")!,
                        revocationEndpoint: URL(string: "https://id.example.com/revoke")!,
                        clientID: "app",
                        accessToken: .standardInput,
                        refreshToken: .environment("RT"),
                        tokenEndpoint: URL(string: "https://id.example.com/token")!,
                        timeout: .seconds(3)
                    )))
    }

    @Test func auditLogoutTokensAreOptionalOnTheCommandLine() throws {
        guard
            case .auditLogout(let options) = try parse(
                "audit logout --resource https://a.example/ --revocation-endpoint https://a.example/r --client-id c "
                    + "--access-token-env AT --refresh-token RTVALUE")
        else {
            Issue.record("not an audit logout command")
            return
        }
        #expect(options.accessToken == .environment("AT"))
        #expect(options.refreshToken == .literal("RTVALUE"))
        #expect(options.tokenEndpoint == nil)
    }

    @Test(arguments: [
        ("audit logout --revocation-endpoint https://a.example/r --client-id c", "--resource is required"),
        ("audit logout --resource https://a.example/ --client-id c", "--revocation-endpoint is required"),
        (
            "audit logout --resource https://a.example/ --revocation-endpoint https://a.example/r",
            "--client-id is required"
        ),
        (
            "audit logout --resource https://a.example/ --revocation-endpoint https://a.example/r --client-id c "
                + "--access-token x --access-token-env Y", "give --access-token or --access-token-env, not both"
        ),
        (
            "audit logout --resource https://a.example/ --revocation-endpoint https://a.example/r --client-id c "
                + "--token-endpoint http://id.example.com/token", "--token-endpoint must use https"
        ),
        (
            "audit logout --resource https://a.example/ --revocation-endpoint https://a.example/r --client-id c "
                + "--refresh-token", "--refresh-token needs a value"
        ),
    ])
    func auditLogoutRefusesMissingAndConflictingValues(line: String, message: String) {
        let error = usageError(line)
        #expect(error?.message.hasPrefix(message) == true, "\(error?.message ?? "no error")")
        #expect(error?.topic == .auditLogout)
    }

    // MARK: - audit redirects

    @Test func auditRedirectsTakesEveryFlag() throws {
        #expect(
            try parse("audit redirects --url https://api.example.com/me --token-env API_TOKEN --timeout 2 --json")
                == .auditRedirects(
                    RedirectAuditOptions(
                        url: URL(string: "https://api.example.com/me")!, token: .environment("API_TOKEN"),
                        timeout: .seconds(2), json: true)))
        #expect(
            try parse("audit redirects --token - --url http://127.0.0.1:9/me")
                == .auditRedirects(
                    RedirectAuditOptions(
                        url: URL(string: "http://127.0.0.1:9/me")!, token: .standardInput, timeout: .seconds(10))))
        guard case .auditRedirects(let options) = try parse("audit redirects --url https://a.example/") else {
            Issue.record("not an audit redirects command")
            return
        }
        #expect(options.token == nil, "the environment's SESSIONKIT_TOKEN")
    }

    @Test(arguments: [
        ("audit redirects", "--url is required"),
        ("audit redirects --url=", "--url is required"),
        ("audit redirects --url", "--url needs a value"),
        ("audit redirects --url https://a.example/ --token x --token-env Y", "give --token or --token-env, not both"),
        ("audit redirects --url https://a.example/ --token a --token b", "--token is given more than once"),
        ("audit redirects --url https://a.example/ --token-env=", "--token-env needs a variable name"),
        ("audit redirects --url http://api.example.com/me", "--url must use https"),
        ("audit redirects --url ftp://a.example/", "--url needs an http(s) URL"),
        ("audit redirects --url https://a.example/ --timeout 0", "--timeout needs a number of seconds above 0"),
        ("audit redirects --url https://a.example/ --max-hops 3", "unknown option '--max-hops'"),
    ])
    func auditRedirectsRefusesMissingAndInvalidValues(line: String, message: String) {
        let error = usageError(line)
        #expect(error?.message.hasPrefix(message) == true, "\(error?.message ?? "no error")")
        #expect(error?.topic == .auditRedirects)
    }

    // MARK: - Unknown input, and never echoing a secret

    @Test func unknownCommandsAndOptionsAreNamed() {
        #expect(usageError("deploy")?.message == "unknown command 'deploy'")
        #expect(usageError("--verbose")?.message == "unknown option '--verbose'")
        #expect(usageError("demo --colour")?.message == "unknown option '--colour'")
        #expect(usageError("audit cookies")?.message == "unknown audit 'cookies'; use cache, logout or redirects")
        #expect(usageError("audit")?.topic == .audit)
        #expect(usageError("")?.message == "missing command")
    }

    @Test func aValueInTheWrongPlaceIsNeverEchoed() {
        let secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.sig"
        let lines = [
            "audit cache --url https://a.example/ --token A --token B \(secret)",
            "audit cache --url https://a.example/ --tokn=\(secret)",
            "audit cache --url https://a.example/ --\(secret)",
            "\(secret)",
            "audit logout --resource https://a.example/?access_token=\(secret) --client-id",
            "demo --seed \(secret)",
            "audit cache --url https://\(secret)@/ --token a --token b",
        ]
        for line in lines {
            let error = usageError(line)
            #expect(error != nil, "\(line)")
            #expect(error?.message.contains(secret) == false, "\(error?.message ?? "")")
            #expect(error?.message.contains("c2VjcmV0") == false)
        }
    }

    @Test func tokenSourcesNeverDescribeTheirValue() {
        #expect(!TokenSource.literal("s3cr3t-token").description.contains("s3cr3t"))
        #expect(TokenSource.literal("s3cr3t-token").description.contains(Redaction.redact("s3cr3t-token")))
        #expect(TokenSource.environment("MY_TOKEN").description == "environment variable MY_TOKEN")
    }

    @Test func tokenSourcesResolveFromEachPlaceAndRefuseEmptyOnes() throws {
        let environment = ["SET": " from-env \n", "EMPTY": ""]
        var lines = ["from-stdin"]
        let readLine = { lines.isEmpty ? nil : lines.removeFirst() }
        #expect(
            try TokenSource.literal("lit").resolve(environment: environment, readLine: readLine, role: "t") == "lit")
        #expect(
            try TokenSource.environment("SET").resolve(environment: environment, readLine: readLine, role: "t")
                == "from-env")
        #expect(
            try TokenSource.standardInput.resolve(environment: environment, readLine: readLine, role: "t")
                == "from-stdin")
        #expect(throws: UsageError.self) {
            try TokenSource.standardInput.resolve(environment: environment, readLine: readLine, role: "t")
        }
        #expect(throws: UsageError.self) {
            try TokenSource.environment("EMPTY").resolve(environment: environment, readLine: readLine, role: "t")
        }
        #expect(throws: UsageError.self) {
            try TokenSource.environment("UNSET").resolve(environment: environment, readLine: readLine, role: "t")
        }
        #expect(throws: UsageError.self) {
            try TokenSource.literal("two words").resolve(environment: environment, readLine: readLine, role: "t")
        }
    }

    // MARK: - Through the tool

    @Test func usageErrorsExitTwoWithOneLineAndAHintToHelp() async {
        let captured = CapturedConsole()
        #expect(await captured.run(["demo", "--bogus"]) == .usage)
        #expect(captured.output.isEmpty)
        #expect(
            captured.errors
                == "sessionkit: unknown option '--bogus'\nTry 'sessionkit demo --help' for more information.\n")

        let cache = CapturedConsole()
        #expect(await cache.run(["audit", "cache", "--timeout", "0"]) == .usage)
        #expect(cache.errors.split(separator: "\n").count == 2)
        #expect(cache.errors.hasSuffix("Try 'sessionkit audit cache --help' for more information.\n"))
    }

    @Test func versionPrintsTheVersion() async {
        for arguments in [["--version"], ["version"]] {
            let captured = CapturedConsole()
            #expect(await captured.run(arguments) == .ok)
            #expect(captured.output == "sessionkit \(SessionKitTool.version)\n")
        }
    }

    @Test func helpExitsZeroOnStandardOutput() async {
        let captured = CapturedConsole()
        #expect(await captured.run(["audit", "logout", "--help"]) == .ok)
        #expect(captured.output.contains("OWASP MASTG"))
        #expect(captured.errors.isEmpty)
    }

    @Test func tokenProblemsAreUsageErrorsThatNameTheVariableNotAValue() async {
        let captured = CapturedConsole(environment: ["SESSIONKIT_TOKEN_A": "only-one-token"])
        #expect(await captured.run(["audit", "cache", "--url", "http://127.0.0.1:9/"]) == .usage)
        #expect(captured.errors.contains("environment variable SESSIONKIT_TOKEN_B is not set or empty"))
        #expect(!captured.all.contains("only-one-token"))

        let same = CapturedConsole(input: ["same-token", "same-token"])
        #expect(
            await same.run(["audit", "cache", "--url", "http://127.0.0.1:9/", "--token", "-", "--token", "-"]) == .usage
        )
        #expect(same.errors.contains("the two tokens are the same"))
        #expect(!same.all.contains("same-token"))
    }
}

extension CommandLineParserTests {
    @Test func onlyWordsThatLookLikeNamesAreEchoed() {
        #expect(CommandLineParser.shown("--verbose", as: "option") == "'--verbose'")
        #expect(CommandLineParser.shown("--verbose=loud", as: "option") == "'--verbose'")
        for secret in ["ghp_16C7e42F292c6912E7710c838347Ae178B4a", "deadbeef1234", "--A1b2", "x.y.z", "--"] {
            #expect(CommandLineParser.shown(secret, as: "option") == "(not shown: it may be a secret)", "\(secret)")
        }
    }
}
