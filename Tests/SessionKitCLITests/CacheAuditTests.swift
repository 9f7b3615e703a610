import Foundation
import SessionKit
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

@Suite(.timeLimit(.minutes(10))) struct CacheAuditTests {
    static let tokenA = "alice-opaque-token-0123456789"
    static let tokenB = "bob-opaque-token-9876543210"

    /// Runs `sessionkit audit cache` against a server whose `/me` answers with the token's user and `headers`.
    private func audit(
        headers: [(name: String, value: String)],
        sameBody: Bool = false,
        check: (LocalServer, CapturedConsole) -> Void = { _, _ in }
    ) async throws -> (ExitCode, CapturedConsole) {
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { request in
                let user = sameBody ? "everyone" : String((request.bearerToken ?? "nobody").prefix { $0 != "-" })
                return .json(#"{"user":"\#(user)"}"#, headers: headers)
            }
            let captured = CapturedConsole(environment: [
                "SESSIONKIT_TOKEN_A": Self.tokenA, "SESSIONKIT_TOKEN_B": Self.tokenB,
            ])
            let status = await captured.run(["audit", "cache", "--url", server.url("/me").absoluteString])
            check(server, captured)
            #expect(!captured.all.contains(Self.tokenA) && !captured.all.contains(Self.tokenB), "a token was printed")
            #expect(fitsEightyColumns(captured.output))
            return (status, captured)
        }
    }

    @Test func asksAsABThenTheOriginForBAndA() async throws {
        _ = try await audit(headers: []) { server, _ in
            let requests = server.requests
            #expect(requests.map { $0.bearerToken } == [Self.tokenA, Self.tokenB, Self.tokenB, Self.tokenA])
            #expect(requests.allSatisfy { $0.header("Cookie") == nil })
            // The two controls: a URL no cache holds, and no-cache.
            #expect(requests.prefix(2).allSatisfy { !($0.query ?? "").contains(CacheAudit.controlParameter) })
            #expect(requests.suffix(2).allSatisfy { ($0.query ?? "").contains(CacheAudit.controlParameter) })
            #expect(requests.suffix(2).allSatisfy { $0.header("Cache-Control") == "no-cache" })
            #expect(Set(requests.suffix(2).map { $0.query ?? "" }).count == 2, "each control URL is new")
        }
    }

    @Test(arguments: [
        [("Cache-Control", "private, no-store")],
        [("Cache-Control", "no-store")],
        [("Cache-Control", "private, max-age=60"), ("Vary", "Authorization")],
        [("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding, Authorization")],
        [("Cache-Control", "no-cache")],
        [("Cache-Control", "max-age=0")],
    ])
    func safeHeadersExitZero(headers: [(String, String)]) async throws {
        let (status, captured) = try await audit(headers: headers.map { (name: $0.0, value: $0.1) })
        #expect(status == .ok, "\(captured.output)")
        #expect(captured.output.contains("SAFE"))
        #expect(flattened(captured.output).contains("The origin answers the two users differently"))
    }

    @Test(arguments: [
        ([("Cache-Control", "max-age=60")], false),
        ([("Cache-Control", "private, max-age=60")], false),
        ([("Cache-Control", "public, max-age=60")], true),
        ([("Cache-Control", "s-maxage=60")], true),
        ([("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding")], false),
        ([], false),
    ])
    func leakyHeadersExitOneAndSayWhatFixesThem(headers: [(String, String)], shared: Bool) async throws {
        let (status, captured) = try await audit(headers: headers.map { (name: $0.0, value: $0.1) })
        #expect(status == .leak, "\(captured.output)")
        #expect(captured.output.contains("LEAK POSSIBLE"))
        #expect(captured.output.contains("Cache-Control: private, no-store"))
        #expect(captured.output.contains("Vary: Authorization"))
        #expect(captured.output.contains("remove public and s-maxage") == shared)
    }

    @Test func bodiesTheOriginGivesBothUsersAreSafeButNoted() async throws {
        let (status, captured) = try await audit(headers: [("Cache-Control", "public, max-age=60")], sameBody: true)
        #expect(status == .ok)
        #expect(flattened(captured.output).contains("The origin gives both users the same status and body"))
        #expect(flattened(captured.output).contains("harmless only if this resource never depends on who asks"))
    }

    /// A cache in front of the origin that keys on the URL only: the first user's answer is served to the second.
    @Test func aCacheServingAsAnswerToBIsLeakingNowWhateverTheHeaders() async throws {
        try await LocalServer.withRunning { server in
            let stored = Lock<Data?>(nil)
            server.route("GET", "/me") { request in
                let user = String((request.bearerToken ?? "nobody").prefix { $0 != "-" })
                let fresh = Data(#"{"user":"\#(user)"}"#.utf8)
                if (request.query ?? "").contains(CacheAudit.controlParameter) {
                    return LocalServer.Response(status: 200, headers: [("Cache-Control", "no-store")], body: fresh)
                }
                let (body, hit) = stored.withLock { cached in
                    if let cached { return (cached, true) }
                    cached = fresh
                    return (fresh, false)
                }
                return LocalServer.Response(
                    status: 200, headers: [("Cache-Control", "no-store"), ("X-Cache", hit ? "HIT" : "MISS")],
                    body: body)
            }
            let captured = CapturedConsole(environment: [
                "SESSIONKIT_TOKEN_A": Self.tokenA, "SESSIONKIT_TOKEN_B": Self.tokenB,
            ])
            let status = await captured.run(["audit", "cache", "--url", server.url("/me").absoluteString])
            #expect(status == .leak, "\(captured.output)")
            let output = flattened(captured.output)
            #expect(output.contains("LEAKING NOW: user B was answered with user A's response"))
            #expect(output.contains("(X-Cache: HIT)"))
            #expect(output.contains("proxy_no_cache $http_authorization"))
        }
    }

    @Test(arguments: [
        (401, "user B's token was refused (401)"),
        (403, "user B's token was refused (403)"),
        (404, "the resource was not found for user B (404): check --url"),
        (302, "user B was redirected (302) to https://login.example.com/signin?…: a login page?"),
        (500, "the server failed for user B (500)"),
        (204, ""),
    ])
    func onlyTwoXXAnswersForBothUsersCount(status code: Int, reason: String) async throws {
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { request in
                guard request.bearerToken == Self.tokenB else { return .json(#"{"user":"alice"}"#) }
                var response = LocalServer.Response.json(#"{"user":"bob"}"#, status: code)
                if code == 302 { response.headers.append(("Location", "https://login.example.com/signin?next=/me")) }
                return response
            }
            let captured = CapturedConsole(environment: [
                "SESSIONKIT_TOKEN_A": Self.tokenA, "SESSIONKIT_TOKEN_B": Self.tokenB,
            ])
            let status = await captured.run(["audit", "cache", "--url", server.url("/me").absoluteString])
            if code == 204 {
                #expect(status != .failure, "a 204 is a success")
                return
            }
            #expect(status == .failure, "\(captured.output)")
            #expect(flattened(captured.output).contains("INCONCLUSIVE: " + reason), "\(captured.output)")
            #expect(!captured.output.contains("SAFE"))
            #expect(server.requests.count == 2, "no controls after a refusal")
        }
    }

    @Test func jsonFollowsTheDocumentedSchema() async throws {
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { request in
                .json(#"{"user":"\#(request.bearerToken ?? "")"}"#, headers: [("Cache-Control", "max-age=60")])
            }
            let captured = CapturedConsole(environment: [
                "SESSIONKIT_TOKEN_A": Self.tokenA, "SESSIONKIT_TOKEN_B": Self.tokenB,
            ])
            let status = await captured.run(["audit", "cache", "--url", server.url("/me").absoluteString, "--json"])
            #expect(status == .leak)
            #expect(captured.output.hasSuffix("\n") && captured.output.split(separator: "\n").count == 1)
            let root = try #require(
                try JSONSerialization.jsonObject(with: Data(captured.output.utf8)) as? [String: Any])
            #expect(
                Set(root.keys) == [
                    "audit", "url", "verdict", "exitCode", "leakingNow", "leakEvidence", "couldLeak", "personal",
                    "answers", "originAnswers", "caches", "fixes", "notes",
                ])
            #expect(root["audit"] as? String == "cache")
            #expect(root["verdict"] as? String == "could-leak")
            #expect(root["exitCode"] as? Int == 1)
            #expect(root["leakingNow"] as? Bool == false)
            #expect(root["personal"] as? Bool == true)
            let answers = try #require(root["answers"] as? [String: [String: Any]])
            #expect(Set(answers.keys) == ["A", "B"])
            #expect(Set(answers["A"]?.keys.map { $0 } ?? []) == ["status", "headers", "bodyBytes", "cacheHit"])
            let caches = try #require(root["caches"] as? [[String: String]])
            #expect(caches.map { $0["reuse"] } == ["across-users", "across-users", "never", "never"])
            #expect(!captured.all.contains(Self.tokenA) && !captured.all.contains(Self.tokenB))
        }
    }

    @Test func noPieceOfATokenEchoedInAHeaderIsPrintedEvenWhenCut() async throws {
        let tokenA = "abcdefghijklmnopqrstuvwxyz0123"  // 30 characters, wider than a column
        let tokenB = "ZYXWVUTSRQPONMLKJIHGFEDCBA9876"
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { request in
                let token = request.bearerToken ?? ""
                return .json(
                    "{}",
                    headers: [
                        ("Cache-Control", "max-age=60"), ("Vary", token),
                        ("Expires", "x" + token.prefix(26)), ("Via", String(token.dropFirst(3).prefix(12))),
                    ])
            }
            for json in [false, true] {
                let captured = CapturedConsole(input: [tokenA, tokenB])
                _ = await captured.run(
                    ["audit", "cache", "--url", server.url("/me").absoluteString, "--token", "-", "--token", "-"]
                        + (json ? ["--json"] : []))
                for token in [tokenA, tokenB] {
                    let chars = Array(token)
                    for start in 0...(chars.count - 8) {
                        let piece = String(chars[start..<start + 8])
                        #expect(!captured.all.contains(piece), "a piece of a token was printed: \(piece)")
                    }
                }
                #expect(captured.all.contains("<redacted"))
            }
        }
    }

    @Test func aServerThatEchoesATokenIntoAHeaderIsStillRedacted() async throws {
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { request in
                .json("{}", headers: [("Cache-Control", "max-age=60"), ("Vary", request.bearerToken ?? "")])
            }
            let captured = CapturedConsole(input: [Self.tokenA, Self.tokenB])
            let status = await captured.run(
                ["audit", "cache", "--url", server.url("/me").absoluteString, "--token", "-", "--token", "-"])
            #expect(status == .ok)  // same bodies
            #expect(!captured.all.contains(Self.tokenA))
            #expect(captured.output.contains(Redaction.redact(Self.tokenA)))
        }
    }

    @Test func theQueryOfTheURLIsNotPrinted() async throws {
        try await LocalServer.withRunning { server in
            server.route("GET", "/me") { _ in .json("{}", headers: [("Cache-Control", "no-store")]) }
            let captured = CapturedConsole(environment: ["A": Self.tokenA, "B": Self.tokenB])
            let url = server.url("/me?api_key=query-secret").absoluteString
            #expect(
                await captured.run(["audit", "cache", "--url", url, "--token-env", "A", "--token-env", "B"]) == .ok)
            #expect(!captured.all.contains("query-secret"))
            #expect(captured.output.contains("/me?…"))
        }
    }

    // MARK: - The assessment alone

    private func exchange(_ headers: [String: String], status: Int = 200, body: String = "a") -> HTTPExchange {
        HTTPExchange(status: status, headers: headers, body: Data(body.utf8))
    }

    @Test func privateDoesNotStopAPrivateCacheButStopsASharedOne() {
        let answer = exchange(["Cache-Control": "private, max-age=60"])
        #expect(CacheAssessment.privateReuse(of: answer).isAcrossUsers)
        #expect(!CacheAssessment.sharedReuse(of: answer).isAcrossUsers)
    }

    @Test func sharedCachesNeedPublicSMaxageOrMustRevalidateForAuthorizedRequests() {
        #expect(!CacheAssessment.sharedReuse(of: exchange(["Cache-Control": "max-age=60"])).isAcrossUsers)
        for value in ["public, max-age=60", "s-maxage=60", "must-revalidate, max-age=60"] {
            #expect(CacheAssessment.sharedReuse(of: exchange(["Cache-Control": value])).isAcrossUsers, "\(value)")
        }
        #expect(CacheAssessment.sharedReuse(of: exchange(["Cache-Control": "public, s-maxage=0"])) != .never(""))
        #expect(!CacheAssessment.sharedReuse(of: exchange(["Cache-Control": "public, s-maxage=0"])).isAcrossUsers)
    }

    @Test func varyOnAuthorizationOrStarKeepsUsersApart() {
        for vary in ["Authorization", "accept, AUTHORIZATION", "*"] {
            let answer = exchange(["Cache-Control": "public, max-age=60", "Vary": vary])
            #expect(!CacheAssessment.privateReuse(of: answer).isAcrossUsers, "\(vary)")
            #expect(!CacheAssessment.sharedReuse(of: answer).isAcrossUsers, "\(vary)")
        }
    }

    @Test func freshnessComesFromMaxAgeExpiresAndAge() {
        let date = "Sun, 06 Nov 2044 08:49:37 GMT"
        let expires = "Sun, 06 Nov 2044 08:50:37 GMT"
        guard
            case .acrossUsers(let reason) = CacheAssessment.privateReuse(
                of: exchange(["Date": date, "Expires": expires]))
        else {
            Issue.record("Expires one minute after Date is fresh")
            return
        }
        #expect(reason.contains("fresh for 60 s"))
        #expect(
            !CacheAssessment.privateReuse(of: exchange(["Cache-Control": "max-age=60", "Age": "60"])).isAcrossUsers)
        #expect(!CacheAssessment.privateReuse(of: exchange(["Expires": "0"])).isAcrossUsers)
    }

    @Test func withoutHeadersOnlyHeuristicallyCacheableStatusesCanBeReused() {
        #expect(CacheAssessment.privateReuse(of: exchange([:], status: 200)).isAcrossUsers)
        #expect(!CacheAssessment.privateReuse(of: exchange([:], status: 401)).isAcrossUsers)
        #expect(!CacheAssessment.privateReuse(of: exchange([:], status: 500)).isAcrossUsers)
        #expect(!CacheAssessment.sharedReuse(of: exchange([:], status: 200)).isAcrossUsers)
    }

    @Test func theWorseOfTheTwoAnswersDecides() {
        let assessment = CacheAssessment(
            first: exchange(["Cache-Control": "no-store"], body: "alice"),
            second: exchange(["Cache-Control": "max-age=60"], body: "bob")
        )
        #expect(assessment.leakPossible)
        #expect(assessment.notes.contains { $0.contains("different Cache-Control or Vary") })
    }

    @Test func sameAnswersWithoutTheOriginAreUnobservableNotSafe() {
        let answer = exchange(["Cache-Control": "no-store", "X-Cache": "HIT"], body: "alice")
        let assessment = CacheAssessment(first: answer, second: answer)
        #expect(assessment.verdict == .unobservable)
        #expect(assessment.verdict.exitCode == .failure)
        let observed = CacheAssessment(
            first: answer, second: answer, originFirst: exchange([:], body: "alice"),
            originSecond: exchange([:], body: "bob"))
        #expect(observed.verdict == .leakingNow)
        #expect(observed.verdict.exitCode == .leak)
    }

    @Test func aDifferentStatusCountsAsADifferentAnswer() {
        let assessment = CacheAssessment(
            first: exchange(["Cache-Control": "max-age=60"], status: 200, body: "x"),
            second: exchange(["Cache-Control": "max-age=60"], status: 404, body: "x")
        )
        #expect(assessment.bodiesDiffer)
        #expect(assessment.leakPossible)
    }
}
