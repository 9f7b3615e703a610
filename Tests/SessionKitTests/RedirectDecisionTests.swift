import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The rules behind every hop, without sockets: what an origin is, which URLs a scope sends the token to, and what
/// follows a redirect. The `https` to `http` rule is proven here: FoundationNetworking on Linux trusts only the
/// system's certificate store, so no loopback TLS server can be trusted by a test without changing the machine.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RedirectDecisionTests {
    private static func origin(_ string: String) -> Origin? { Origin(string) }

    private static func response(_ status: Int, location: String?, for url: URL) -> HTTPURLResponse {
        HTTPURLResponse(
            url: url, statusCode: status, httpVersion: "HTTP/1.1",
            headerFields: location.map { ["Location": $0] } ?? [:])!
    }

    private static func request(_ url: String, method: String = "GET", body: String? = nil) -> URLRequest {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        request.setValue("Bearer token-alice", forHTTPHeaderField: "Authorization")
        request.setValue("a=1", forHTTPHeaderField: "Cookie")
        request.setValue("Basic eA==", forHTTPHeaderField: "Proxy-Authorization")
        request.setValue("proof", forHTTPHeaderField: "DPoP")
        request.setValue("key", forHTTPHeaderField: "X-Api-Key")
        request.setValue("kept", forHTTPHeaderField: "Accept-Language")
        return request
    }

    private static func decide(
        _ status: Int, _ location: String?, after request: URLRequest, carries: Bool = true, hops: Int = 0,
        scope: UserSession.CredentialScope = .init(credentialHeaderFields: ["x-api-key"])
    ) -> RedirectDecision {
        RedirectDecision.after(
            response(status, location: location, for: request.url!), to: request, carriesCredentials: carries,
            hops: hops, scope: scope)
    }

    // MARK: - Origins

    @Test(arguments: [
        ("https://api.example.com", "https://API.example.com:443/v1?q=1"),
        ("http://api.example.com", "http://api.example.com:80/"),
        ("https://api.example.com", "wss://api.example.com/socket"),
        ("http://api.example.com", "ws://api.example.com:80/socket"),
        ("http://[::1]:8080", "http://[::1]:8080/x"),
    ])
    func urlsOfOneOriginCompareEqual(_ left: String, _ right: String) throws {
        #expect(try #require(Self.origin(left)) == (try #require(Self.origin(right))))
    }

    @Test(arguments: [
        ("https://api.example.com", "http://api.example.com"),
        ("https://api.example.com", "https://api.example.com:8443"),
        ("https://api.example.com", "https://cdn.example.com"),
        ("http://127.0.0.1:8080", "http://localhost:8080"),
        ("https://example.com", "https://example.com."),
    ])
    func urlsThatDifferInSchemeHostOrPortAreTwoOrigins(_ left: String, _ right: String) throws {
        #expect(try #require(Self.origin(left)) != (try #require(Self.origin(right))))
    }

    @Test(arguments: ["mailto:alice@example.com", "file:///etc/passwd", "ftp://example.com/", "https://", "/relative"])
    func urlsWithoutAnOriginHaveNone(_ string: String) {
        #expect(Self.origin(string) == nil)
    }

    @Test func originsFromPartsRefuseWhatIsNotAnOrigin() {
        #expect(Origin(scheme: "gopher", host: "example.com") == nil)
        #expect(Origin(scheme: "https", host: "") == nil)
        #expect(Origin(scheme: "https", host: "example.com", port: 0) == nil)
        #expect(Origin(scheme: "https", host: "example.com", port: 65536) == nil)
        #expect(Origin(scheme: "HTTPS", host: "Example.COM", port: 443)?.description == "https://example.com")
        // Every capital is lowered, the last letter's too (a host whose only capital is Z).
        #expect(
            Origin(scheme: "https", host: "Zz.example", port: 443)
                == Origin(scheme: "https", host: "zz.example", port: 443))
        #expect(Origin(scheme: "http", host: "[::1]", port: 8080)?.description == "http://[::1]:8080")
        // Only the scheme's own default port goes unwritten: a port below it or above it is another origin, and its
        // name (which keys the DPoP nonces an origin gave and names it in diagnostics) says so.
        for (scheme, port, shown) in [
            ("https", 442, "https://example.com:442"), ("https", 80, "https://example.com:80"),
            ("https", 444, "https://example.com:444"), ("http", 79, "http://example.com:79"),
            ("http", 80, "http://example.com"), ("https", 443, "https://example.com"),
        ] {
            #expect(Origin(scheme: scheme, host: "example.com", port: port)?.description == shown)
        }
    }

    @Test(arguments: [
        ("http://localhost:1", true), ("http://127.0.0.1", true), ("http://127.255.3.4:9", true),
        ("http://[::1]/", true), ("http://128.0.0.1", false), ("http://127.0.0.1.example.com", false),
        ("http://localhost.example.com", false), ("http://127.0.0", false), ("http://127.0.0.256", false),
        ("http://10.0.0.1", false), ("http://127.0.0.", false), ("http://127..0.1", false),
        ("http://127.0.0.1.", false), ("http://127.0.0.1a", false), ("http://127.0.0.0001", false),
        ("http://127.x.0.1", false),
    ])
    func loopbackIsTheLocalHostNameAndTheLoopbackAddressesOnly(_ url: String, _ expected: Bool) throws {
        #expect(try #require(Self.origin(url)).isLoopback == expected)
    }

    // MARK: - Which URLs receive the token

    @Test func byDefaultEveryHTTPSOriginAndLoopbackReceiveTheTokenAndPlainHTTPElsewhereIsRefused() {
        let scope = UserSession.CredentialScope()
        #expect(scope.refusal(of: URL(string: "https://api.example.com/me")) == nil)
        #expect(scope.refusal(of: URL(string: "wss://api.example.com/events")) == nil)
        #expect(scope.refusal(of: URL(string: "http://127.0.0.1:8080/me")) == nil)
        #expect(scope.refusal(of: URL(string: "http://localhost/me")) == nil)
        #expect(scope.refusal(of: URL(string: "http://api.example.com/me"))?.code == .insecureTransport)
        #expect(scope.refusal(of: URL(string: "ws://api.example.com/events"))?.code == .insecureTransport)
        #expect(scope.refusal(of: URL(string: "file:///tmp/x"))?.code == .invalidInput)
        #expect(scope.refusal(of: nil)?.code == .invalidInput)
    }

    @Test func thePlainHTTPErrorSaysWhyAndHowToAllowIt() throws {
        let error = try #require(UserSession.CredentialScope().refusal(of: URL(string: "http://api.example.com/")))
        #expect(error.message.contains("http://api.example.com is plain HTTP"))
        #expect(error.message.contains("plainHTTPOrigins"))
    }

    @Test func aNamedPlainHTTPOriginReceivesTheTokenAndNoOtherDoes() throws {
        let staging = try #require(Origin("http://staging.example.com:8080"))
        let scope = UserSession.CredentialScope(plainHTTPOrigins: [staging])
        #expect(scope.refusal(of: URL(string: "http://staging.example.com:8080/me")) == nil)
        #expect(scope.refusal(of: URL(string: "http://staging.example.com/me"))?.code == .insecureTransport)
        // Named alongside a list of origins, it is served too.
        let listed = UserSession.CredentialScope(
            origins: [try #require(Origin("https://api.example.com"))], plainHTTPOrigins: [staging])
        #expect(listed.refusal(of: URL(string: "http://staging.example.com:8080/me")) == nil)
    }

    @Test func namedOriginsAreTheOnlyOnesThatReceiveTheToken() throws {
        let scope = UserSession.CredentialScope.only([
            try #require(Origin("https://api.example.com")), try #require(Origin("https://upload.example.com")),
        ])
        #expect(scope.refusal(of: URL(string: "https://api.example.com/me")) == nil)
        #expect(scope.refusal(of: URL(string: "https://upload.example.com:443/put")) == nil)
        #expect(scope.refusal(of: URL(string: "https://cdn.example.com/a.png"))?.code == .originNotServed)
        #expect(scope.refusal(of: URL(string: "https://api.example.com:8443/me"))?.code == .originNotServed)
        // Loopback is served only when named.
        #expect(scope.refusal(of: URL(string: "http://127.0.0.1:8080/me"))?.code == .originNotServed)
        // Plain HTTP is refused for what it is, listed or not.
        #expect(scope.refusal(of: URL(string: "http://api.example.com/me"))?.code == .insecureTransport)
    }

    // MARK: - Redirects

    @Test func aCrossOriginRedirectDropsEveryCredentialFieldAndKeepsTheRest() {
        let decision = Self.decide(
            302, "https://cdn.example.com/file", after: Self.request("https://api.example.com/f"))
        guard case .follow(let next, let carries) = decision else {
            Issue.record("not followed: \(decision)")
            return
        }
        #expect(!carries)
        #expect(next.url?.absoluteString == "https://cdn.example.com/file")
        for field in ["Authorization", "Cookie", "Proxy-Authorization", "DPoP", "X-Api-Key"] {
            #expect(next.value(forHTTPHeaderField: field) == nil, "\(field)")
        }
        #expect(next.value(forHTTPHeaderField: "Accept-Language") == "kept")
    }

    @Test(arguments: [301, 302, 303, 307, 308])
    func aSameOriginRedirectKeepsTheCredentialsAndIsResolvedAgainstTheRequest(_ status: Int) {
        let decision = Self.decide(status, "/v2/me?x=1", after: Self.request("https://api.example.com/v1/me"))
        guard case .follow(let next, let carries) = decision else {
            Issue.record("not followed: \(decision)")
            return
        }
        #expect(carries)
        #expect(next.url?.absoluteString == "https://api.example.com/v2/me?x=1")
        #expect(next.value(forHTTPHeaderField: "Cookie") == "a=1")
        #expect(next.value(forHTTPHeaderField: "X-Api-Key") == "key")
    }

    /// Another port is another origin (RFC 6454 §4), on one host as much as on two: a redirect from `https://h` to
    /// `https://h:8443`, or from one loopback port to another, is followed without any credential field, whatever the
    /// status. Another service can listen on another port of the same host.
    @Test(arguments: [
        ("https://api.example.com/a", "https://api.example.com:8443/b"),
        ("https://api.example.com:8443/a", "https://api.example.com/b"),
        ("https://api.example.com:8443/a", "//api.example.com:9443/b"),
        ("http://127.0.0.1:8080/a", "http://127.0.0.1:8081/b"),
        ("http://localhost:8080/a", "http://localhost/b"),
        ("http://[::1]:8080/a", "http://[::1]:8081/b"),
    ])
    func aRedirectToAnotherPortOfTheSameHostDropsEveryCredentialField(_ from: String, _ location: String) {
        for status in [301, 302, 303, 307, 308] {
            let decision = Self.decide(status, location, after: Self.request(from))
            guard case .follow(let next, let carries) = decision else {
                Issue.record("\(status) \(from) → \(location) not followed: \(decision)")
                continue
            }
            #expect(!carries, "\(status) \(from) → \(location)")
            #expect(next.url.flatMap(Origin.init) != Origin(from), "\(status) \(from) → \(location)")
            for field in ["Authorization", "Cookie", "Proxy-Authorization", "DPoP", "X-Api-Key"] {
                #expect(next.value(forHTTPHeaderField: field) == nil, "\(status) \(from) → \(location): \(field)")
            }
            #expect(next.value(forHTTPHeaderField: "Accept-Language") == "kept")
        }
    }

    /// The scheme's default port written out is the same origin: the port rule compares ports, not their spelling.
    @Test(arguments: [
        ("https://api.example.com/a", "https://api.example.com:443/b"),
        ("http://127.0.0.1:80/a", "http://127.0.0.1/b"),
    ])
    func theDefaultPortWrittenOutIsTheSameOrigin(_ from: String, _ location: String) {
        guard case .follow(let next, let carries) = Self.decide(307, location, after: Self.request(from)) else {
            Issue.record("not followed")
            return
        }
        #expect(carries)
        #expect(next.value(forHTTPHeaderField: "Authorization") == "Bearer token-alice")
    }

    @Test func aChainThatLeftItsOriginStaysBareOnItsWayBack() {
        let decision = Self.decide(
            302, "https://api.example.com/land", after: Self.request("https://api.example.com/x"), carries: false)
        guard case .follow(let next, let carries) = decision else {
            Issue.record("not followed: \(decision)")
            return
        }
        #expect(!carries)
        #expect(next.value(forHTTPHeaderField: "Authorization") == nil)
    }

    @Test(arguments: [
        (301, "POST", "GET"), (302, "POST", "GET"), (303, "POST", "GET"), (303, "PUT", "GET"), (303, "HEAD", "HEAD"),
        (307, "POST", "POST"), (308, "PUT", "PUT"), (301, "PUT", "PUT"), (302, "DELETE", "DELETE"),
    ])
    func theMethodAndBodyFollowRFC9110(_ status: Int, _ method: String, _ expected: String) {
        let request = Self.request("https://api.example.com/a", method: method, body: #"{"n":1}"#)
        guard case .follow(let next, _) = Self.decide(status, "/b", after: request) else {
            Issue.record("not followed")
            return
        }
        #expect(next.httpMethod == expected)
        let keepsBody = expected == method && expected != "HEAD"
        #expect((next.httpBody != nil) == keepsBody)
        // Every field that describes the body (RFC 9110 §8.3–8.7) goes with it, and stays with a body kept.
        var described = Self.request("https://api.example.com/a", method: method, body: #"{"n":1}"#)
        let bodyFields = ["Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location"]
        for field in bodyFields { described.setValue(field == "Content-Length" ? "7" : "x", forHTTPHeaderField: field) }
        guard case .follow(let described, _) = Self.decide(status, "/b", after: described) else {
            Issue.record("not followed")
            return
        }
        for field in bodyFields {
            #expect((described.value(forHTTPHeaderField: field) != nil) == keepsBody, "\(field)")
        }
    }

    @Test func anHTTPSRedirectToPlainHTTPIsRefusedSameHostOrNot() {
        for location in ["http://api.example.com/a", "http://127.0.0.1:8080/a"] {
            let decision = Self.decide(302, location, after: Self.request("https://api.example.com/x"))
            guard case .refuse(let error) = decision else {
                Issue.record("\(location): \(decision)")
                continue
            }
            #expect(error.code == .insecureTransport)
            #expect(error.statusCode == 302)
        }
    }

    @Test func anHTTPSRedirectToPlainHTTPTheAppOptedIntoIsFollowedBare() {
        let scope = UserSession.CredentialScope(followsInsecureRedirects: true)
        let decision = Self.decide(
            307, "http://api.example.com/a", after: Self.request("https://api.example.com/x"), scope: scope)
        guard case .follow(let next, let carries) = decision else {
            Issue.record("not followed: \(decision)")
            return
        }
        #expect(!carries)
        #expect(next.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(next.value(forHTTPHeaderField: "Cookie") == nil)
    }

    @Test func plainHTTPToHTTPSIsAnotherOriginAndGoesBare() {
        let decision = Self.decide(301, "https://127.0.0.1/a", after: Self.request("http://127.0.0.1/a"))
        guard case .follow(let next, let carries) = decision else {
            Issue.record("not followed: \(decision)")
            return
        }
        #expect(!carries)
        #expect(next.value(forHTTPHeaderField: "Authorization") == nil)
    }

    @Test(
        arguments: [
            (200, "/b"), (304, "/b"), (300, "/b"), (305, "/b"), (302, nil), (302, ""), (302, "mailto:a@example.com"),
            (307, "ftp://example.com/a"), (302, "https://"),
        ] as [(Int, String?)])
    func answersThatAreNotARedirectToFollowAreHandedOver(_ status: Int, _ location: String?) {
        #expect(Self.decide(status, location, after: Self.request("https://api.example.com/a")) == .deliver)
    }

    @Test func theTwentyFirstRedirectIsRefused() {
        let request = Self.request("https://api.example.com/a")
        #expect(Self.decide(302, "/a", after: request, hops: RedirectDecision.maximumHops - 1) != .deliver)
        guard case .refuse(let error) = Self.decide(302, "/a", after: request, hops: RedirectDecision.maximumHops)
        else {
            Issue.record("followed past the limit")
            return
        }
        #expect(error.code == .malformedResponse)
    }
}
