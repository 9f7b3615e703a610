import Testing

@testable import SessionKitTesting

@Suite(.timeLimit(.minutes(5))) struct HTTPParserTests {
    private static let limits = HTTPParser.Limits(maximumHeaderBytes: 256, maximumBodyBytes: 64)

    private struct Outcome {
        var messages: [HTTPParser.Message] = []
        var continues = 0
        var failure: HTTPParser.Failure?
        var parser: HTTPParser
    }

    /// Feeds `text` in pieces of `piece` bytes, calling `next()` after each until it needs more data.
    private func parse(_ text: String, piece: Int = .max, limits: HTTPParser.Limits = limits) -> Outcome {
        var outcome = Outcome(parser: HTTPParser(limits: limits))
        let bytes = Array(text.utf8)
        var offset = 0
        repeat {
            let end = min(bytes.count, offset + piece)
            outcome.parser.append(bytes[offset..<end])
            offset = end
            do {
                loop: while true {
                    switch try outcome.parser.next() {
                    case .needMoreData: break loop
                    case .expectsContinue: outcome.continues += 1
                    case .message(let message): outcome.messages.append(message)
                    }
                }
            } catch {
                outcome.failure = error
                return outcome
            }
        } while offset < bytes.count
        return outcome
    }

    @Test func parsesRequestLineAndHeadersInOrder() throws {
        let outcome = parse("GET /a/b%20c?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-B: 2\r\nx-a:  spaced value \t\r\n\r\n")
        let message = try #require(outcome.messages.first)
        #expect(outcome.messages.count == 1 && outcome.failure == nil)
        #expect(message.method == "GET")
        #expect(message.target == "/a/b%20c?x=1&y=2")
        #expect(message.version == HTTPParser.Version(major: 1, minor: 1))
        #expect(message.headers.map(\.name) == ["Host", "X-B", "x-a"])
        #expect(message.headers.map(\.value) == ["h", "2", "spaced value"])
        #expect(message.body.isEmpty && message.keepAlive)
        #expect(!outcome.parser.isMidRequest)
    }

    @Test(arguments: [1, 2, 3, 7])
    func sameResultWhateverHowBytesAreSplit(piece: Int) throws {
        let text = "POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world"
        let outcome = parse(text, piece: piece)
        let message = try #require(outcome.messages.first)
        #expect(outcome.messages.count == 1)
        #expect(String(decoding: message.body, as: UTF8.self) == "hello world")
    }

    @Test func keepAliveFollowsVersionAndConnectionHeader() {
        let close = parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n")
        let old = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        let plain = parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(close.messages.map(\.keepAlive) == [false])
        #expect(old.messages.map(\.keepAlive) == [false])
        #expect(plain.messages.map(\.keepAlive) == [true])
    }

    @Test func acceptsBareLineFeedsAndLeadingEmptyLines() throws {
        let outcome = parse("\r\n\nGET /x HTTP/1.1\nHost: h\n\n")
        #expect(try #require(outcome.messages.first).target == "/x")
    }

    @Test(arguments: [1, 5, 1000])
    func decodesChunkedBodyAndIgnoresExtensionsAndTrailers(piece: Int) throws {
        let text =
            "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
            + "GET /next HTTP/1.1\r\nHost: h\r\n\r\n"
        let outcome = parse(text, piece: piece)
        #expect(outcome.failure == nil)
        #expect(outcome.messages.map(\.target) == ["/c", "/next"])
        #expect(String(decoding: try #require(outcome.messages.first).body, as: UTF8.self) == "hello 0123456789")
    }

    @Test func parsesPipelinedRequestsInOrder() {
        let text = rawGET("/1") + "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc" + rawGET("/3")
        let outcome = parse(text)
        #expect(outcome.messages.map(\.target) == ["/1", "/2", "/3"])
        #expect(outcome.messages.map { String(decoding: $0.body, as: UTF8.self) } == ["", "abc", ""])
    }

    @Test func reportsPartialRequestAsMidRequest() {
        #expect(parse("GET / HTT").parser.isMidRequest)
        #expect(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab").parser.isMidRequest)
    }

    @Test func asksForContinueOnlyWhileTheBodyIsAwaited() {
        let waiting = parse("PUT /u HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        #expect(waiting.continues == 1 && waiting.messages.isEmpty)
        let sentAnyway = parse("PUT /u HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\nabc")
        #expect(sentAnyway.continues == 0 && sentAnyway.messages.count == 1)
    }

    @Test(arguments: [
        "GET\r\n\r\n",
        "GET /\r\nHost: h\r\n\r\n",
        "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1 extra\r\nHost: h\r\n\r\n",
        "G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/x.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.10\r\nHost: h\r\n\r\n",
        "GET nopath HTTP/1.1\r\nHost: h\r\n\r\n".replacingOccurrences(of: "nopath", with: "%2F"),
        "\u{1}\u{2}\u{3} garbage\r\n\r\n",
    ])
    func rejectsMalformedRequestLines(text: String) {
        #expect(parse(text).failure?.status == 400)
    }

    @Test(arguments: [
        "GET / HTTP/1.1\r\nHost: h\r\nNo-Colon\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nName : v\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nA: nul\u{0}byte\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nA: bare\rcr\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ])
    func rejectsMalformedHeaders(text: String) {
        #expect(parse(text).failure?.status == 400)
    }

    @Test(arguments: [
        "Content-Length: abc", "Content-Length: -1", "Content-Length: 1, 2", "Content-Length:",
        "Content-Length: 3\r\nTransfer-Encoding: chunked", "Transfer-Encoding: chunked, gzip",
    ])
    func rejectsAmbiguousFraming(header: String) {
        #expect(parse("POST / HTTP/1.1\r\nHost: h\r\n\(header)\r\n\r\nabc").failure?.status == 400)
    }

    @Test func acceptsRepeatedIdenticalContentLength() {
        let outcome = parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc")
        #expect(outcome.messages.count == 1)
    }

    @Test func rejectsUnknownTransferCodingVersionAndExpectation() {
        #expect(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").failure?.status == 501)
        #expect(parse("GET / HTTP/2.0\r\nHost: h\r\n\r\n").failure?.status == 505)
        #expect(parse("GET / HTTP/1.1\r\nHost: h\r\nExpect: teapot\r\n\r\n").failure?.status == 417)
    }

    @Test(arguments: [1, 300])
    func rejectsHeadsOverTheLimit(piece: Int) {
        // Without an end (the client keeps sending) and with one (the head arrives whole but too long).
        let endless = "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + String(repeating: "a", count: 400)
        let whole = endless + "\r\n\r\n"
        #expect(parse(endless, piece: piece).failure?.status == 431)
        #expect(parse(whole, piece: piece).failure?.status == 431)
    }

    @Test func acceptsAHeadExactlyAtTheLimit() {
        let prefix = "GET / HTTP/1.1\r\nHost: h\r\nX: "
        let text = prefix + String(repeating: "a", count: 256 - prefix.utf8.count - 4) + "\r\n\r\n"
        #expect(text.utf8.count == 256)
        #expect(parse(text).messages.count == 1)
    }

    @Test func rejectsBodiesOverTheLimit() {
        #expect(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n").failure?.status == 413)
        #expect(
            parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n").failure?.status
                == 413)
        let chunks =
            "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n\(String(repeating: "a", count: 32))\r\n21\r\n"
        #expect(parse(chunks).failure?.status == 413)
        #expect(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 64\r\n\r\n").failure == nil)
    }

    @Test(arguments: ["zz\r\n", "5\r\nhelloX\r\n", "\r\n", "5 x\r\nhello\r\n"])
    func rejectsMalformedChunks(chunk: String) {
        let text = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
        #expect(parse(text).failure?.status == 400)
    }

    @Test func staysFailedAfterAFailure() throws {
        var parser = HTTPParser(limits: Self.limits)
        parser.append(Array("BAD\r\n\r\n".utf8))
        #expect(throws: HTTPParser.Failure.self) { try parser.next() }
        parser.append(Array(rawGET("/").utf8))
        #expect(throws: HTTPParser.Failure.self) { try parser.next() }
    }
}
