import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The loopback listener's HTTP verdicts, byte by byte, without a socket.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct LoopbackHTTPTests {
    static let authority = "127.0.0.1:4321"

    static func verdict(_ head: String, path: String = "/callback") -> LoopbackHTTP.Verdict? {
        let bytes = Array(head.utf8)
        guard let length = LoopbackHTTP.headLength(in: bytes) else { return nil }
        return LoopbackHTTP.verdict(head: bytes[..<length], path: path, authority: authority)
    }

    static let host = "Host: 127.0.0.1:4321\r\n"

    @Test(arguments: [
        (
            "GET /callback?code=c&state=s HTTP/1.1\r\n\(host)\r\n",
            LoopbackHTTP.Verdict.callback(target: "/callback?code=c&state=s")
        ),
        ("GET /callback HTTP/1.1\r\nhOsT:   127.0.0.1:4321  \r\nAccept: */*\r\n\r\n", .callback(target: "/callback")),
        ("GET /callback?x HTTP/1.0\r\n\r\n", .callback(target: "/callback?x")),
        ("GET /favicon.ico HTTP/1.1\r\n\(host)\r\n", .notFound),
        ("GET / HTTP/1.1\r\n\(host)\r\n", .notFound),
        ("GET /callback/ HTTP/1.1\r\n\(host)\r\n", .notFound),
        ("GET /%63allback HTTP/1.1\r\n\(host)\r\n", .notFound),
        ("GET /callbackx?code=c HTTP/1.1\r\n\(host)\r\n", .notFound),
        ("POST /callback?code=c HTTP/1.1\r\n\(host)Content-Length: 0\r\n\r\n", .methodNotAllowed),
        ("HEAD /callback HTTP/1.1\r\n\(host)\r\n", .methodNotAllowed),
        ("get /callback HTTP/1.1\r\n\(host)\r\n", .methodNotAllowed),
        ("GET /callback HTTP/1.1\r\nHost: evil.example:4321\r\n\r\n", .misdirected),
        ("GET /callback HTTP/1.1\r\nHost: localhost:4321\r\n\r\n", .misdirected),
        ("GET /callback HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", .misdirected),
        ("GET /callback HTTP/1.1\r\n\r\n", .badRequest),  // no Host
        ("GET /callback HTTP/1.1\r\n\(host)\(host)\r\n", .badRequest),
        ("GET /callback HTTP/2.0\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1 extra\r\n\(host)\r\n", .badRequest),
        ("GET  /callback HTTP/1.1\r\n\(host)\r\n", .badRequest),
        ("GET callback HTTP/1.1\r\n\(host)\r\n", .badRequest),
        ("GET http://127.0.0.1:4321/callback?code=c HTTP/1.1\r\n\(host)\r\n", .badRequest),
        ("GET /callback#frag HTTP/1.1\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1\r\n\(host) folded\r\n\r\n", .badRequest),
        ("GET /callback HTTP/1.1\r\nNo-Colon\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1\r\n: empty-name\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1\r\nBad Name: x\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1\r\nX: a\u{0}b\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1\r\nX: a\rb\r\n\(host)\r\n", .badRequest),
        ("GET /callback HTTP/1.1\n\(host)\n", .badRequest),  // bare line feeds
        ("GET /callbäck HTTP/1.1\r\n\(host)\r\n", .badRequest),
        ("\r\n\r\n", .badRequest),
        (" GET /callback HTTP/1.1\r\n\(host)\r\n", .badRequest),
    ])
    func verdicts(_ head: String, _ expected: LoopbackHTTP.Verdict) {
        #expect(Self.verdict(head) == expected, "\(head.debugDescription)")
    }

    @Test func aHeadIsCompleteOnlyAtItsEmptyLine() {
        #expect(LoopbackHTTP.headLength(in: Array("GET / HTTP/1.1\r\nHost: a\r\n".utf8)) == nil)
        #expect(LoopbackHTTP.headLength(in: Array("GET / HTTP/1.1\r\n\r\nbody".utf8)) == 18)
        // The search resumes where it stopped, also when the terminator straddles two reads.
        let bytes = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        #expect(LoopbackHTTP.headLength(in: bytes, searchFrom: 16) == 18)
        #expect(LoopbackHTTP.canBeRequest(Array("G".utf8)))
        #expect(!LoopbackHTTP.canBeRequest([0x16, 0x03, 0x01]))  // a TLS ClientHello
        #expect(LoopbackHTTP.canBeRequest([]))
    }

    @Test func everyAnswerClosesTheConnectionAndIsNeverCached() {
        let answer = String(
            decoding: LoopbackHTTP.response(status: 405, body: Array("x".utf8), isPage: false), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"))
        for field in [
            "Content-Type: text/plain; charset=utf-8", "Content-Length: 1", "Cache-Control: no-store",
            "Connection: close", "Allow: GET", "Referrer-Policy: no-referrer",
        ] {
            #expect(answer.contains("\r\n\(field)\r\n"), "\(field)")
        }
        #expect(answer.hasSuffix("\r\n\r\nx"))
        let page = String(decoding: LoopbackHTTP.response(status: 200, body: [], isPage: true), as: UTF8.self)
        #expect(page.contains("\r\nContent-Type: text/html; charset=utf-8\r\n"))
        #expect(!page.contains("Allow:"))
    }

    @Test(arguments: ["/callback", "/", "/oauth2/done", "/a-b.c_d~e:f@g!$&'()*+,;="])
    func acceptablePaths(_ path: String) {
        #expect(LoopbackHTTP.isValidPath(path))
    }

    @Test(arguments: [
        "", "callback", "/call back", "/callback?x", "/callback#x", "/%63", "/ä", String(repeating: "/a", count: 200),
    ])
    func unacceptablePaths(_ path: String) {
        #expect(!LoopbackHTTP.isValidPath(path))
    }
}
