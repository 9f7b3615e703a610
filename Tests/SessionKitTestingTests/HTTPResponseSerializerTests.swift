import Foundation
import Testing

@testable import SessionKitTesting

@Suite(.timeLimit(.minutes(5))) struct HTTPResponseSerializerTests {
    private func text(_ output: HTTPResponseSerializer.Output) -> String {
        String(decoding: output.bytes, as: UTF8.self)
    }

    @Test func serverOwnsContentLengthAndFraming() {
        let response = LocalServer.Response.json(
            #"{"a":1}"#, status: 201,
            headers: [("Content-Length", "999"), ("Transfer-Encoding", "chunked"), ("X-Id", "7")])
        let output = HTTPResponseSerializer.serialize(response, requestMethod: "POST", keepAlive: true)
        #expect(
            text(output)
                == "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Id: 7\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
        )
        #expect(!output.closeAfterwards)
    }

    @Test func closesWhenTheRequestOrTheHandlerSaysSo() {
        let byRequest = HTTPResponseSerializer.serialize(.status(200), requestMethod: "GET", keepAlive: false)
        #expect(byRequest.closeAfterwards && text(byRequest).contains("\r\nConnection: close\r\n"))
        let byHandler = HTTPResponseSerializer.serialize(
            .text("x", headers: [("connection", "Close")]), requestMethod: "GET", keepAlive: true)
        #expect(byHandler.closeAfterwards && text(byHandler).contains("\r\nConnection: close\r\n"))
    }

    @Test func headGetsTheLengthButNoBody() {
        let output = HTTPResponseSerializer.serialize(.text("hello"), requestMethod: "HEAD", keepAlive: true)
        #expect(text(output).hasSuffix("Content-Length: 5\r\n\r\n"))
    }

    @Test func noContentAndNotModifiedHaveNoBody() {
        let noContent = HTTPResponseSerializer.serialize(
            LocalServer.Response(status: 204, body: Data("x".utf8)), requestMethod: "GET", keepAlive: true)
        #expect(text(noContent) == "HTTP/1.1 204 No Content\r\n\r\n")
        let notModified = HTTPResponseSerializer.serialize(
            LocalServer.Response(status: 304, headers: [("ETag", "\"v1\"")], body: Data("x".utf8)),
            requestMethod: "GET", keepAlive: true)
        #expect(text(notModified) == "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n")
    }

    @Test func headerValuesCannotInjectLines() {
        let output = HTTPResponseSerializer.serialize(
            .status(200).withHeaders([("X-A", "1\r\nSet-Cookie: evil"), ("Bad Name", "v")]), requestMethod: "GET",
            keepAlive: true)
        #expect(text(output) == "HTTP/1.1 200 OK\r\nX-A: 1  Set-Cookie: evil\r\nContent-Length: 0\r\n\r\n")
    }

    @Test func truncatedBodyAnnouncesAllAndSendsHalf() {
        let output = HTTPResponseSerializer.serialize(
            LocalServer.Response(body: Data("0123456789".utf8), fault: .truncatedBody), requestMethod: "GET",
            keepAlive: true)
        #expect(text(output).hasSuffix("Content-Length: 10\r\nConnection: close\r\n\r\n01234"))
        #expect(output.closeAfterwards)
        let empty = HTTPResponseSerializer.serialize(
            LocalServer.Response(fault: .truncatedBody), requestMethod: "GET", keepAlive: true)
        #expect(text(empty).hasSuffix("Content-Length: 1\r\nConnection: close\r\n\r\n"))
    }

    @Test func otherFaultsSendNoHTTPAndClose() {
        let closed = HTTPResponseSerializer.serialize(
            .text("x").failing(with: .closeBeforeResponding), requestMethod: "GET", keepAlive: true)
        #expect(closed.bytes.isEmpty && closed.closeAfterwards)
        let garbage = HTTPResponseSerializer.serialize(
            .text("x").failing(with: .garbage), requestMethod: "GET", keepAlive: true)
        #expect(!garbage.bytes.starts(with: Array("HTTP/".utf8)) && !garbage.bytes.isEmpty && garbage.closeAfterwards)
    }

    @Test func errorResponsesCloseTheConnection() {
        let text = String(
            decoding: HTTPResponseSerializer.serializeError(status: 431, reason: "too big"), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"))
        #expect(text.contains("\r\nConnection: close\r\n"))
    }
}

extension LocalServer.Response {
    fileprivate func withHeaders(_ headers: [(name: String, value: String)]) -> LocalServer.Response {
        var response = self
        response.headers = headers
        return response
    }
}
