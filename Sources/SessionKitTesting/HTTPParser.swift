/// An incremental parser for HTTP/1.x requests ([RFC 9112](https://www.rfc-editor.org/rfc/rfc9112)).
///
/// Feed it bytes as they arrive with ``append(_:)`` and call ``next()`` until it returns
/// ``Event/needMoreData``. It is a value type with no I/O and no clock, so every framing rule is unit-tested
/// by feeding bytes, one at a time if need be.
///
/// It accepts what real clients send and refuses, with the status the server should answer before closing,
/// what would make framing ambiguous: a malformed request line or header (400), a head over the limit (431),
/// a body over the limit (413), both `Content-Length` and `Transfer-Encoding` (400), an unknown transfer
/// coding (501), an HTTP version other than 1.x (505), an `Expect` other than `100-continue` (417).
/// After a failure every further call throws the same failure.
struct HTTPParser {
    /// The bounds the parser enforces.
    struct Limits: Sendable, Equatable {
        /// The most bytes a request line plus its header section (or a chunked trailer section) may take.
        var maximumHeaderBytes: Int
        /// The most bytes a decoded body may take.
        var maximumBodyBytes: Int
    }

    /// A protocol version, such as 1.1.
    struct Version: Sendable, Equatable, CustomStringConvertible {
        var major: Int
        var minor: Int

        var description: String { "HTTP/\(major).\(minor)" }
    }

    /// A complete request.
    struct Message: Sendable {
        var method: String
        /// The request target exactly as sent (origin form, absolute form, or `*`).
        var target: String
        var version: Version
        var headers: [(name: String, value: String)]
        /// The body with any chunked framing removed.
        var body: [UInt8]
        /// Whether the connection may carry another request after this one's response.
        var keepAlive: Bool
    }

    /// What the parser found.
    enum Event {
        /// Nothing complete yet.
        case needMoreData
        /// The client asked for `100 Continue` before it sends the body; reported once per request.
        case expectsContinue
        /// A complete request.
        case message(Message)
    }

    /// Why a request was refused: the status to answer with before closing the connection.
    struct Failure: Error, Equatable, CustomStringConvertible {
        var status: Int
        var reason: String

        var description: String { "\(status): \(reason)" }

        static func badRequest(_ reason: String) -> Failure { Failure(status: 400, reason: reason) }
    }

    private struct Head {
        var method: String
        var target: String
        var version: Version
        var headers: [(name: String, value: String)]
        var keepAlive: Bool
    }

    private enum Phase {
        case head
        case fixedBody(length: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers(bytes: Int)
        case failed(Failure)
    }

    private static let maximumChunkLineBytes = 1024

    let limits: Limits
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    private var phase = Phase.head
    private var head: Head?
    private var body: [UInt8] = []
    private var continuePending = false

    /// Creates a parser that enforces `limits`.
    ///
    /// - Parameter limits: The head and body bounds.
    init(limits: Limits) {
        self.limits = limits
    }

    /// How many received bytes have not been consumed by a complete request.
    var bufferedByteCount: Int { buffer.count - start }

    /// Whether part of a request has arrived: bytes are waiting, or a request's head has been read and its
    /// body has not finished.
    var isMidRequest: Bool {
        if case .head = phase { return bufferedByteCount > 0 }
        return true
    }

    /// Adds received bytes.
    ///
    /// - Parameter bytes: The bytes, in the order they arrived.
    mutating func append(_ bytes: some Collection<UInt8>) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeSubrange(0..<start)
            scanned = max(0, scanned - start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Parses as far as the bytes received so far allow.
    ///
    /// - Returns: A complete request, a request for `100 Continue`, or ``Event/needMoreData``.
    /// - Throws: `Failure` with the status to answer; the parser stays failed.
    mutating func next() throws(Failure) -> Event {
        if case .failed(let failure) = phase { throw failure }
        do {
            return try step()
        } catch {
            phase = .failed(error)
            throw error
        }
    }

    private mutating func step() throws(Failure) -> Event {
        while true {
            switch phase {
            case .failed(let failure):
                throw failure
            case .head:
                // RFC 9112 §2.2: empty lines before a request line are ignored.
                while start < buffer.count && (buffer[start] == .cr || buffer[start] == .lf) { start += 1 }
                guard let end = findEndOfHead() else {
                    if bufferedByteCount > limits.maximumHeaderBytes {
                        throw Failure(status: 431, reason: "request head over \(limits.maximumHeaderBytes) bytes")
                    }
                    return .needMoreData
                }
                guard end - start <= limits.maximumHeaderBytes else {
                    throw Failure(status: 431, reason: "request head over \(limits.maximumHeaderBytes) bytes")
                }
                let (head, framing, expectsContinue) = try parseHead(buffer[start..<end])
                start = end
                scanned = end
                self.head = head
                body = []
                switch framing {
                case .none:
                    return .message(finish())
                case .length(let length):
                    phase = .fixedBody(length: length)
                case .chunked:
                    phase = .chunkSize
                }
                continuePending = expectsContinue
            case .fixedBody(let length):
                guard bufferedByteCount >= length else { return waitForBody() }
                body = Array(buffer[start..<start + length])
                start += length
                return .message(finish())
            case .chunkSize:
                guard let lineEnd = buffer[start...].firstIndex(of: .lf) else {
                    if bufferedByteCount > Self.maximumChunkLineBytes { throw .badRequest("chunk size line too long") }
                    return waitForBody()
                }
                guard lineEnd - start <= Self.maximumChunkLineBytes else {
                    throw .badRequest("chunk size line too long")
                }
                let size = try parseChunkSize(buffer[start..<lineEnd])
                start = lineEnd + 1
                phase = size == 0 ? .trailers(bytes: 0) : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let available = min(remaining, bufferedByteCount)
                guard available > 0 else { return waitForBody() }
                body.append(contentsOf: buffer[start..<start + available])
                start += available
                phase = remaining == available ? .chunkDataEnd : .chunkData(remaining: remaining - available)
            case .chunkDataEnd:
                guard bufferedByteCount >= 1 else { return waitForBody() }
                if buffer[start] == .lf {
                    start += 1
                } else {
                    guard buffer[start] == .cr else { throw .badRequest("chunk data longer than its size") }
                    guard bufferedByteCount >= 2 else { return waitForBody() }
                    guard buffer[start + 1] == .lf else { throw .badRequest("chunk data longer than its size") }
                    start += 2
                }
                phase = .chunkSize
            case .trailers(let bytes):
                // Trailer fields are read and ignored: nothing in a test server depends on them.
                guard let lineEnd = buffer[start...].firstIndex(of: .lf) else {
                    if bytes + bufferedByteCount > limits.maximumHeaderBytes {
                        throw Failure(status: 431, reason: "trailer section over \(limits.maximumHeaderBytes) bytes")
                    }
                    return waitForBody()
                }
                let lineLength = lineEnd + 1 - start
                guard bytes + lineLength <= limits.maximumHeaderBytes else {
                    throw Failure(status: 431, reason: "trailer section over \(limits.maximumHeaderBytes) bytes")
                }
                let isEmpty = lineEnd == start || (lineEnd == start + 1 && buffer[start] == .cr)
                start = lineEnd + 1
                if isEmpty { return .message(finish()) }
                phase = .trailers(bytes: bytes + lineLength)
            }
        }
    }

    /// Reports `expectsContinue` the first time the body is awaited, if the client asked and sent none yet.
    private mutating func waitForBody() -> Event {
        guard continuePending else { return .needMoreData }
        continuePending = false
        return bufferedByteCount == 0 && body.isEmpty ? .expectsContinue : .needMoreData
    }

    private mutating func finish() -> Message {
        let head = self.head!
        let message = Message(
            method: head.method, target: head.target, version: head.version, headers: head.headers, body: body,
            keepAlive: head.keepAlive)
        self.head = nil
        body = []
        continuePending = false
        phase = .head
        return message
    }

    /// Finds the end of the head: the index just past the empty line that ends it (CRLF CRLF, or bare LFs).
    private mutating func findEndOfHead() -> Int? {
        let limit = min(buffer.count, start + limits.maximumHeaderBytes + 4)
        var index = max(start, scanned)
        while index < limit {
            if buffer[index] == .lf {
                if index + 1 >= buffer.count { break }
                if buffer[index + 1] == .lf { return index + 2 }
                if buffer[index + 1] == .cr {
                    if index + 2 >= buffer.count { break }
                    if buffer[index + 2] == .lf { return index + 3 }
                }
            }
            index += 1
        }
        scanned = index
        return nil
    }

    private enum Framing {
        case none
        case length(Int)
        case chunked
    }

    private func parseHead(_ bytes: ArraySlice<UInt8>) throws(Failure) -> (Head, Framing, Bool) {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = bytes.startIndex
        for index in bytes.indices where bytes[index] == .lf {
            var line = bytes[lineStart..<index]
            if line.last == .cr { line = line.dropLast() }
            if line.contains(.cr) { throw .badRequest("bare CR in the request head") }
            if !line.isEmpty { lines.append(line) }
            lineStart = index + 1
        }
        guard let requestLine = lines.first else { throw .badRequest("missing request line") }
        let (method, target, version) = try parseRequestLine(requestLine)

        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() {
            headers.append(try parseHeaderLine(line))
        }

        var keepAlive = version.minor >= 1
        var hosts = 0
        var contentLength: Int?
        var transferCodings: [String] = []
        var expectsContinue = false
        for (name, value) in headers {
            switch name.lowercased() {
            case "host":
                hosts += 1
            case "connection":
                if Self.tokens(value).contains("close") { keepAlive = false }
            case "content-length":
                for item in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let length = try parseContentLength(item)
                    if let contentLength, contentLength != length {
                        throw .badRequest("conflicting Content-Length values")
                    }
                    contentLength = length
                }
            case "transfer-encoding":
                transferCodings += Self.tokens(value)
            case "expect":
                guard value.lowercased() == "100-continue" else {
                    throw Failure(status: 417, reason: "unsupported expectation")
                }
                // RFC 9110 §10.1.1: a 1.0 client cannot have meant it.
                expectsContinue = version.minor >= 1
            default:
                break
            }
        }
        // RFC 9112 §3.2: a 1.1 request without exactly one Host is refused.
        if version.minor >= 1 && hosts != 1 { throw .badRequest("HTTP/1.1 request needs exactly one Host header") }
        // The brief for a test server: HTTP/1.0 connections close after the response.
        if version.minor == 0 { keepAlive = false }

        let framing: Framing
        if !transferCodings.isEmpty {
            // RFC 9112 §6.3: both headers at once is how requests are smuggled; refuse it.
            if contentLength != nil { throw .badRequest("both Content-Length and Transfer-Encoding") }
            guard transferCodings.last == "chunked" else { throw .badRequest("chunked is not the final coding") }
            guard transferCodings.count == 1 else {
                throw Failure(status: 501, reason: "unsupported transfer coding")
            }
            framing = .chunked
        } else if let contentLength, contentLength > 0 {
            framing = .length(contentLength)
        } else {
            framing = .none
        }
        let head = Head(method: method, target: target, version: version, headers: headers, keepAlive: keepAlive)
        return (head, framing, expectsContinue)
    }

    private func parseRequestLine(_ line: ArraySlice<UInt8>) throws(Failure) -> (String, String, Version) {
        guard let firstSpace = line.firstIndex(of: .space), let lastSpace = line.lastIndex(of: .space),
            firstSpace < lastSpace
        else { throw .badRequest("malformed request line") }
        let method = line[line.startIndex..<firstSpace]
        let target = line[(firstSpace + 1)..<lastSpace]
        let version = line[(lastSpace + 1)...]
        guard !method.isEmpty, method.allSatisfy(\.isTokenCharacter) else { throw .badRequest("malformed method") }
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .badRequest("malformed request target")
        }
        guard version.count == 8, version.starts(with: Array("HTTP/".utf8)),
            let major = version[version.startIndex + 5].digitValue, version[version.startIndex + 6] == .dot,
            let minor = version[version.startIndex + 7].digitValue
        else { throw .badRequest("malformed HTTP version") }
        guard major == 1 else { throw Failure(status: 505, reason: "HTTP version not supported") }
        guard target.first == .slash || target.elementsEqual([.asterisk]) || target.first?.isLetter == true else {
            throw .badRequest("malformed request target")
        }
        return (
            String(decoding: method, as: UTF8.self), String(decoding: target, as: UTF8.self),
            Version(major: major, minor: minor)
        )
    }

    private func parseHeaderLine(_ line: ArraySlice<UInt8>) throws(Failure) -> (name: String, value: String) {
        // RFC 9112 §5.2: obsolete line folding is refused.
        guard let first = line.first, first != .space, first != .tab else {
            throw .badRequest("obsolete header line folding")
        }
        guard let colon = line.firstIndex(of: .colon) else { throw .badRequest("header line without a colon") }
        let name = line[line.startIndex..<colon]
        guard !name.isEmpty, name.allSatisfy(\.isTokenCharacter) else { throw .badRequest("malformed header name") }
        var value = line[(colon + 1)...]
        while let byte = value.first, byte == .space || byte == .tab { value = value.dropFirst() }
        while let byte = value.last, byte == .space || byte == .tab { value = value.dropLast() }
        guard value.allSatisfy({ $0 == .tab || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw .badRequest("control character in a header value")
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    private func parseContentLength(_ item: Substring) throws(Failure) -> Int {
        let digits = item.trimmingSpaces().utf8
        guard !digits.isEmpty, digits.allSatisfy({ $0.digitValue != nil }) else {
            throw .badRequest("malformed Content-Length")
        }
        var length = 0
        for digit in digits {
            length = length * 10 + digit.digitValue!
            if length > limits.maximumBodyBytes {
                throw Failure(status: 413, reason: "body over \(limits.maximumBodyBytes) bytes")
            }
        }
        return length
    }

    private func parseChunkSize(_ line: ArraySlice<UInt8>) throws(Failure) -> Int {
        var size = 0
        var digits = 0
        var index = line.startIndex
        while index < line.endIndex, let digit = line[index].hexDigitValue {
            size = size * 16 + digit
            digits += 1
            if size > limits.maximumBodyBytes - body.count {
                throw Failure(status: 413, reason: "body over \(limits.maximumBodyBytes) bytes")
            }
            index += 1
        }
        guard digits > 0 else { throw .badRequest("malformed chunk size") }
        // What may follow the size: whitespace, chunk extensions (ignored), the CR of the CRLF.
        let rest = line[index...]
        let trimmed = rest.drop(while: { $0 == .space || $0 == .tab })
        guard trimmed.isEmpty || trimmed.first == .semicolon || trimmed.elementsEqual([.cr]) else {
            throw .badRequest("malformed chunk size")
        }
        return size
    }

    /// The comma-separated, lowercased, trimmed tokens of a list header value.
    private static func tokens(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingSpaces().lowercased() }.filter { !$0.isEmpty }
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        var trimmed = self
        while let first = trimmed.first, first == " " || first == "\t" { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, last == " " || last == "\t" { trimmed = trimmed.dropLast() }
        return trimmed
    }
}

extension UInt8 {
    fileprivate static let lf = UInt8(ascii: "\n")
    fileprivate static let cr = UInt8(ascii: "\r")
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let tab = UInt8(ascii: "\t")
    fileprivate static let colon = UInt8(ascii: ":")
    fileprivate static let semicolon = UInt8(ascii: ";")
    fileprivate static let dot = UInt8(ascii: ".")
    fileprivate static let slash = UInt8(ascii: "/")
    fileprivate static let asterisk = UInt8(ascii: "*")

    fileprivate var digitValue: Int? { self >= 0x30 && self <= 0x39 ? Int(self - 0x30) : nil }

    fileprivate var hexDigitValue: Int? {
        switch self {
        case 0x30...0x39: Int(self - 0x30)
        case 0x41...0x46: Int(self - 0x41 + 10)
        case 0x61...0x66: Int(self - 0x61 + 10)
        default: nil
        }
    }

    fileprivate var isLetter: Bool { (self | 0x20) >= 0x61 && (self | 0x20) <= 0x7A }

    /// RFC 9110 §5.6.2 `tchar`.
    fileprivate var isTokenCharacter: Bool {
        switch self {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
