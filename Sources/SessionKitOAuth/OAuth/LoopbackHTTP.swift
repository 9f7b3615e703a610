/// The little HTTP/1.1 a loopback redirect listener speaks: it reads one request head and sends one answer, then
/// closes the connection (RFC 9112). Pure functions over bytes, so every verdict is tested without a socket.
package enum LoopbackHTTP {
    /// The longest request head read, request line and header fields with their final empty line.
    package static let maximumHeadSize = 8192

    /// What the listener does with one request.
    package enum Verdict: Equatable {
        /// A `GET` of the callback path: the one callback, with its request target (path and query).
        case callback(target: String)
        /// Another path: 404, and the callback is still awaited.
        case notFound
        /// Another method than `GET`: 405.
        case methodNotAllowed
        /// A `Host` other than the listener's own (a DNS-rebinding page, for one): 421.
        case misdirected
        /// Not a well-formed HTTP/1.x request head: 400.
        case badRequest
    }

    /// The length of the request head at the start of `bytes`, through its terminating empty line, or `nil` when
    /// the head is not complete yet.
    ///
    /// A head that ends in two bare line feeds counts as complete too, so that ``verdict(head:path:authority:)``
    /// answers it 400 at once instead of the connection waiting for a CRLF that never comes.
    ///
    /// - Parameters:
    ///   - bytes: What the connection sent so far.
    ///   - searchFrom: Where the previous search stopped, to keep the search linear in the bytes read.
    /// - Returns: The head's length through its empty line, or `nil` while it is incomplete.
    package static func headLength(in bytes: [UInt8], searchFrom: Int = 0) -> Int? {
        var index = max(0, searchFrom - 3)
        while index + 1 < bytes.count {
            if bytes[index] == 10, bytes[index + 1] == 10 { return index + 2 }
            if index + 3 < bytes.count, bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13,
                bytes[index + 3] == 10
            {
                return index + 4
            }
            index += 1
        }
        return nil
    }

    /// Whether `bytes` can still become a request: a request line starts with a method token. A TLS handshake or
    /// other binary is refused with its first byte, not after the connection's time bound.
    package static func canBeRequest(_ bytes: [UInt8]) -> Bool {
        bytes.first.map(isTokenByte) ?? true
    }

    /// Classifies a complete request head.
    ///
    /// - Parameters:
    ///   - head: The head, through its empty line.
    ///   - path: The callback path.
    ///   - authority: `127.0.0.1:PORT`, which `Host` must equal.
    /// - Returns: What to do with the request.
    package static func verdict(head: ArraySlice<UInt8>, path: String, authority: String) -> Verdict {
        var lines = split(head)
        // The head ends with CRLF CRLF, so the split leaves two empty lines at the end.
        guard lines.count >= 3, lines.removeLast().isEmpty, lines.removeLast().isEmpty else { return .badRequest }
        let requestLine = lines.removeFirst()
        let parts = requestLine.split(separator: 32, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte),
            let target = String(validating: parts[1], as: UTF8.self), target.first == "/",
            parts[1].allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "#") }),
            let version = String(validating: parts[2], as: UTF8.self), version == "HTTP/1.1" || version == "HTTP/1.0"
        else { return .badRequest }

        var hosts: [String] = []
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[..<colon].allSatisfy(isTokenByte),
                line[(colon + 1)...].allSatisfy({ $0 == 9 || (0x20...0x7E).contains($0) || $0 >= 0x80 })
            else { return .badRequest }  // also an obs-fold line, which starts with a space (RFC 9112 §5.2)
            let name = String(decoding: line[..<colon], as: UTF8.self)
            if name.lowercased() == "host" {
                hosts.append(trimmingSpaces(String(decoding: line[(colon + 1)...], as: UTF8.self)))
            }
        }
        // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host; more than one is always an error.
        guard hosts.count <= 1, hosts.count == 1 || version == "HTTP/1.0" else { return .badRequest }
        if let host = hosts.first, host.lowercased() != authority { return .misdirected }
        guard parts[0].elementsEqual("GET".utf8) else { return .methodNotAllowed }
        let requestPath = target.prefix { $0 != "?" }
        return requestPath == path ? .callback(target: target) : .notFound
    }

    /// A complete answer that closes the connection.
    ///
    /// - Parameters:
    ///   - status: The status code; 200, 400, 404, 405, 409, 421 or 431.
    ///   - body: The body.
    ///   - isPage: Whether `body` is one of the listener's HTML pages (otherwise it is plain text).
    /// - Returns: The bytes to send.
    package static func response(status: Int, body: [UInt8], isPage: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reason(status))\r\n"
        head += "Content-Type: \(isPage ? "text/html" : "text/plain"); charset=utf-8\r\n"
        head += "Content-Length: \(body.count)\r\n"
        head += "Cache-Control: no-store\r\n"
        head += "Connection: close\r\n"
        // The page is shown at a URL that carries the code: no script may read it, no subresource or link may
        // carry it away in a Referer.
        head += "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"
        head += "Referrer-Policy: no-referrer\r\n"
        head += "X-Content-Type-Options: nosniff\r\n"
        if status == 405 { head += "Allow: GET\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }

    /// The plain-text body of an answer that is not a page.
    package static func plainBody(status: Int) -> [UInt8] {
        Array("\(reason(status))\n".utf8)
    }

    package static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 409: "Conflict"
        case 421: "Misdirected Request"
        case 431: "Request Header Fields Too Large"
        default: "Error"
        }
    }

    /// Whether `path` may be a callback path: `/`, then unreserved characters, `/`, `:`, `@`, `!`, `$`, `&`, `'`,
    /// `(`, `)`, `*`, `+`, `,`, `;`, `=` (RFC 3986 `pchar` without percent-encoding), at most 256 bytes.
    package static func isValidPath(_ path: String) -> Bool {
        let allowed = Set("/-._~:@!$&'()*+,;=".utf8)
        return path.first == "/" && path.utf8.count <= 256
            && path.utf8.allSatisfy { isAlphanumeric($0) || allowed.contains($0) }
    }

    /// The lines of `head`, split at CRLF; a bare CR or LF stays in its line, where the checks refuse it.
    private static func split(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var index = head.startIndex
        while index < head.endIndex {
            if head[index] == 13, index + 1 < head.endIndex, head[index + 1] == 10 {
                lines.append(head[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(head[start..<head.endIndex])
        return lines
    }

    private static func trimmingSpaces(_ text: String) -> String {
        var view = Substring(text)
        while let first = view.first, first == " " || first == "\t" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "\t" { view = view.dropLast() }
        return String(view)
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }
}
