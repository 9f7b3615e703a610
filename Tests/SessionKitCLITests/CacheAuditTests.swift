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

    @Test func sendsEachUsersTokenOnceInOrder() async throws {
        _ = try await audit(headers: []) { server, _ in
            #expect(server.requests.map { $0.bearerToken } == [Self.tokenA, Self.tokenB])
            #expect(server.requests.allSatisfy { $0.header("Cookie") == nil })
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
        #expect(captured.output.contains("The answers differ"))
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

    @Test func identicalBodiesAreSafeButNoted() async throws {
        let (status, captured) = try await audit(headers: [("Cache-Control", "public, max-age=60")], sameBody: true)
        #expect(status == .ok)
        #expect(captured.output.contains("Both users got the same status and body"))
        #expect(captured.output.contains("harmless only if this resource never depends on who asks"))
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

    @Test func aDifferentStatusCountsAsADifferentAnswer() {
        let assessment = CacheAssessment(
            first: exchange(["Cache-Control": "max-age=60"], status: 200, body: "x"),
            second: exchange(["Cache-Control": "max-age=60"], status: 404, body: "x")
        )
        #expect(assessment.bodiesDiffer)
        #expect(assessment.leakPossible)
    }
}
