import Foundation

/// Turns a ``LocalServer/Response`` into the bytes the server writes: pure, so framing is unit-tested.
enum HTTPResponseSerializer {
    /// What to write, and whether the connection closes once it is written.
    struct Output: Sendable {
        var bytes: [UInt8]
        var closeAfterwards: Bool
    }

    /// The interim response that lets a client waiting on `Expect: 100-continue` send its body.
    static let continueBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// What ``LocalServer/Fault/garbage`` sends: no status line, so no HTTP client can take it for a response.
    static let garbageBytes: [UInt8] = [0x00, 0xFF, 0x1B] + Array("NOT-HTTP garbage\r\n\r\n".utf8)

    /// Serializes a handler's response to a request.
    ///
    /// - Parameters:
    ///   - response: What the handler answered.
    ///   - requestMethod: The request's method (`HEAD` gets no body).
    ///   - keepAlive: Whether the request allows another one on the same connection.
    /// - Returns: The bytes and whether to close afterwards.
    static func serialize(_ response: LocalServer.Response, requestMethod: String, keepAlive: Bool) -> Output {
        let closeRequested = response.headers.contains { field in
            field.name.lowercased() == "connection"
                && field.value.split(separator: ",").contains {
                    $0.trimmingCharacters(in: .whitespaces).lowercased() == "close"
                }
        }
        switch response.fault {
        case .closeBeforeResponding:
            return Output(bytes: [], closeAfterwards: true)
        case .garbage:
            return Output(bytes: garbageBytes, closeAfterwards: true)
        case .truncatedBody:
            let announced = max(response.body.count, 1)
            var bytes = head(status: response.status, headers: response.headers, contentLength: announced, close: true)
            bytes.append(contentsOf: response.body.prefix(response.body.count / 2))
            return Output(bytes: bytes, closeAfterwards: true)
        case .trickle:
            // Only the head: the body follows byte by byte (`trickleBody`), and the answer never ends.
            return Output(
                bytes: head(
                    status: response.status, headers: response.headers, contentLength: trickleAnnouncedLength,
                    close: true),
                closeAfterwards: true)
        case nil:
            break
        }
        let status = (100...999).contains(response.status) ? response.status : 500
        let close = !keepAlive || closeRequested
        // RFC 9110 §6.4.1: 1xx, 204 and 304 never have content; 1xx and 204 never have Content-Length.
        let hasContent = !(100..<200).contains(status) && status != 204 && status != 304
        var bytes = head(
            status: status, headers: response.headers, contentLength: hasContent ? response.body.count : nil,
            close: close, extraCapacity: response.body.count)
        if hasContent && requestMethod != "HEAD" {
            bytes.append(contentsOf: response.body)
        }
        return Output(bytes: bytes, closeAfterwards: close)
    }

    /// The body length the head of ``LocalServer/Fault/trickle(every:)`` announces: 1 GiB, more than any test waits
    /// for.
    static let trickleAnnouncedLength = 1 << 30

    /// The bytes ``LocalServer/Fault/trickle(every:)`` sends one at a time after the head: the body, or a space.
    static func trickleBody(of response: LocalServer.Response) -> [UInt8] {
        response.body.isEmpty ? [0x20] : Array(response.body)
    }

    /// Serializes the response the server sends on its own before closing: to bad input or a timeout.
    ///
    /// - Parameters:
    ///   - status: The status code.
    ///   - reason: A short explanation for the body.
    /// - Returns: The bytes, with `Connection: close`.
    static func serializeError(status: Int, reason: String) -> [UInt8] {
        let body = Array("\(reasonPhrase(status)): \(reason)\n".utf8)
        var bytes = head(
            status: status, headers: [("Content-Type", "text/plain; charset=utf-8")], contentLength: body.count,
            close: true)
        bytes.append(contentsOf: body)
        return bytes
    }

    /// The standard reason phrase for a status, or `Status` for one without.
    ///
    /// - Parameter status: The status code.
    /// - Returns: The phrase.
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 428: "Precondition Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status"
        }
    }

    private static func head(
        status: Int,
        headers: [(name: String, value: String)],
        contentLength: Int?,
        close: Bool,
        extraCapacity: Int = 0
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + headers.count * 48 + extraCapacity)
        bytes.append(contentsOf: "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n".utf8)
        for (name, value) in headers {
            // The server owns framing; and a name that is not a token would corrupt the head.
            switch name.lowercased() {
            case "content-length", "transfer-encoding", "connection": continue
            default: break
            }
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenCharacter) else { continue }
            bytes.append(contentsOf: name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            // A line break in a value would let it inject header lines.
            for byte in value.utf8 {
                bytes.append(byte == 0x0D || byte == 0x0A || byte == 0x00 ? 0x20 : byte)
            }
            bytes.append(contentsOf: "\r\n".utf8)
        }
        if let contentLength {
            bytes.append(contentsOf: "Content-Length: \(contentLength)\r\n".utf8)
        }
        if close {
            bytes.append(contentsOf: "Connection: close\r\n".utf8)
        }
        bytes.append(contentsOf: "\r\n".utf8)
        return bytes
    }

    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
