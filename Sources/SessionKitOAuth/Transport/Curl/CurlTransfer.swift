#if os(Linux)
    import CSessionKitCurl
    import Foundation
    import FoundationNetworking

    /// One request on libcurl: its easy handle, configured from a `URLRequest`, and the answer it collects.
    ///
    /// Made on any thread; from ``CurlEventLoop/add(_:)`` on, touched only on the loop's thread, where libcurl calls
    /// its header and body callbacks and where it completes, once.
    final class CurlTransfer: @unchecked Sendable {
        let easy: UnsafeMutableRawPointer
        let url: URL
        /// When the loop fails the transfer with `timedOut` if no byte of an answer has come (monotonic nanoseconds).
        let firstByteDeadline: UInt64?
        /// The client whose share handle the transfer uses, held until it completes.
        var client: CurlClient?
        /// Whether the client's ``CurlClient/close()`` lets the transfer run to its end; set before it starts.
        var outlivesClose = false

        /// What the transfer answers, once; set before the loop sees the transfer.
        var completion: ((Result<CurlAnswer, URLError>) -> Void)?
        /// Whether it was cancelled (on the loop's thread), so that a start that comes after does not add it.
        var cancelled = false

        private var fields: UnsafeMutablePointer<curl_slist>?
        /// Whether the easy handle was cleaned up (on the loop's thread, when the transfer completed).
        private var cleaned = false
        private var status = 0
        private var version = "HTTP/1.1"
        private var headers = [(name: String, value: String)]()
        private var body = Data()
        /// Whether the head of an answer has begun to arrive.
        private(set) var answered = false
        /// Where the answer goes as it arrives, for a streaming transfer; set before the loop sees the transfer.
        private var streaming: CurlStreamEvents?
        /// Whether `streaming` was told the final head.
        private var headTold = false
        /// An upload's body: the bytes and how far they were read, or the file's descriptor.
        private var uploadData: Data?
        private var uploadOffset = 0
        private var uploadFile: Int32 = -1
        /// The request body's bytes reported sent so far.
        private var reportedSent: Int64 = 0

        /// Configures an easy handle for `request`.
        ///
        /// - Throws: `CurlRequestRefusal` for a request libcurl must not send as it is (a scheme other than http or
        ///   https, a field with a line break, a body stream).
        init(
            _ request: URLRequest, deadlines: CurlDeadlines, trusting trustedCertificates: String? = nil,
            proxies: CurlProxies = .none, upload: CurlUpload? = nil
        ) throws(CurlRequestRefusal) {
            guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https"
            else { throw .unsupportedScheme }
            guard request.httpBodyStream == nil else { throw .bodyStream }
            let method = request.httpMethod?.uppercased() ?? "GET"
            let fieldLines = try Self.fieldLines(
                of: request, hasBody: upload != nil || request.httpBody != nil, method: method)
            var uploadSize: Int64?
            switch upload {
            case .file(let file):
                let descriptor = open(file.path, O_RDONLY | O_CLOEXEC)
                var status = stat()
                guard descriptor >= 0 else { throw .unreadableFile }
                guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
                    close(descriptor)
                    throw .unreadableFile
                }
                uploadFile = descriptor
                uploadSize = Int64(status.st_size)
            case .data(let data):
                uploadData = data
                uploadSize = Int64(data.count)
            case nil: break
            }
            guard let easy = curl_easy_init() else {
                if uploadFile >= 0 { close(uploadFile) }
                throw .unavailable
            }
            self.easy = easy
            self.url = url
            firstByteDeadline = deadlines.firstByte.map { CurlEventLoop.now() + $0.nanoseconds }

            let me = Unmanaged.passUnretained(self).toOpaque()
            sk_curl_easy_setopt_pointer(easy, CURLOPT_URL, url.absoluteString)
            // Only HTTP, on the first request and (were redirects followed) after: never file:, ftp: or the rest.
            sk_curl_easy_setopt_pointer(easy, CURLOPT_PROTOCOLS_STR, "http,https")
            sk_curl_easy_setopt_pointer(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
            // Redirects are SessionKit's to judge, hop by hop, with the credential rules of the request pipeline.
            sk_curl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0)
            sk_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
            sk_curl_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
            // HTTP/2 when the server offers it in the TLS handshake (ALPN), HTTP/1.1 otherwise and in the clear.
            sk_curl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            // Servers are verified (libcurl's default, stated): the certificate chain and the host name.
            sk_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, 1)
            sk_curl_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, 2)
            if let trustedCertificates { sk_curl_easy_setopt_pointer(easy, CURLOPT_CAINFO, trustedCertificates) }
            sk_curl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, me)
            if request.value(forHTTPHeaderField: "Accept-Encoding") == nil {
                // Every encoding libcurl decodes, decoded before the body is handed over, as URLSession does.
                sk_curl_easy_setopt_pointer(easy, CURLOPT_ACCEPT_ENCODING, "")
            }
            if let connect = deadlines.connect {
                sk_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(connect.milliseconds)))
            }
            if let whole = deadlines.whole {
                sk_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, Int(whole.milliseconds)))
            }
            if let idle = deadlines.idle {
                sk_curl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
                sk_curl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, Int((idle.milliseconds + 999) / 1000)))
            }
            // The client's proxy for the scheme, or none: an empty value also keeps libcurl from reading the
            // environment itself, so that the client's proxies are the only ones.
            sk_curl_easy_setopt_pointer(easy, CURLOPT_PROXY, proxies.proxy(for: url) ?? "")
            if let noProxy = proxies.noProxy { sk_curl_easy_setopt_pointer(easy, CURLOPT_NOPROXY, noProxy) }
            // An https request is tunnelled (CONNECT) even through a proxy spoken to in the clear, and the proxy's
            // answer to CONNECT is the proxy's, not the server's: never read as the answer's head.
            sk_curl_easy_setopt_long(easy, CURLOPT_HTTPPROXYTUNNEL, url.scheme?.lowercased() == "https" ? 1 : 0)
            sk_curl_easy_setopt_long(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)

            let body = request.httpBody
            if let uploadSize {
                // POST's body machinery under the request's own method, fed by the read callback.
                sk_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
                if method != "POST" { sk_curl_easy_setopt_pointer(easy, CURLOPT_CUSTOMREQUEST, method) }
                sk_curl_easy_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(uploadSize))
                sk_curl_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION) { bytes, size, count, me in
                    guard let bytes, let me else { return Int(CURL_READFUNC_ABORT) }
                    return Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue()
                        .readUpload(into: UnsafeMutableRawBufferPointer(start: bytes, count: size * count))
                }
                sk_curl_easy_setopt_pointer(easy, CURLOPT_READDATA, me)
            } else {
                switch method {
                case "GET" where body == nil:
                    sk_curl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
                case "HEAD":
                    sk_curl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
                default:
                    if method != "POST" { sk_curl_easy_setopt_pointer(easy, CURLOPT_CUSTOMREQUEST, method) }
                    if method == "POST" || body != nil {
                        let bytes = body ?? Data()
                        sk_curl_easy_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count))
                        bytes.withUnsafeBytes { raw in
                            // Copied by libcurl: the request's Data need not outlive this call.
                            _ = sk_curl_easy_setopt_pointer(
                                easy, CURLOPT_COPYPOSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                        }
                    }
                }
            }
            for line in fieldLines { fields = curl_slist_append(fields, line) }
            sk_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, fields)

            sk_curl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION) { bytes, size, count, me in
                guard let bytes, let me else { return 0 }
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue()
                transfer.received(headerLine: UnsafeRawBufferPointer(start: bytes, count: size * count))
                return size * count
            }
            sk_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, me)
            sk_curl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { bytes, size, count, me in
                guard let bytes, let me else { return 0 }
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue()
                let start = UnsafeRawPointer(bytes).assumingMemoryBound(to: UInt8.self)
                if let streaming = transfer.streaming {
                    transfer.tellHead()
                    streaming.data(Data(bytes: start, count: size * count))
                } else {
                    transfer.body.append(start, count: size * count)
                }
                return size * count
            }
            sk_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, me)
        }

        /// Sends the answer to `events` as it arrives instead of collecting it; before the loop sees the transfer.
        func stream(to events: CurlStreamEvents) {
            streaming = events
            guard events.sent != nil else { return }
            sk_curl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)
            sk_curl_easy_setopt_xferinfo_callback(easy) { me, _, _, total, sent in
                guard let me else { return 0 }
                Unmanaged<CurlTransfer>.fromOpaque(me).takeUnretainedValue().progressed(sent: sent, of: total)
                return 0
            }
            sk_curl_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, Unmanaged.passUnretained(self).toOpaque())
        }

        /// Joins the client's share handle; on the loop's thread, since joining changes the share.
        func use(_ share: UnsafeMutableRawPointer) {
            sk_curl_easy_setopt_pointer(easy, CURLOPT_SHARE, share)
        }

        deinit {
            // Cleaned on the loop's thread when the transfer completed (it touches the share handle): here only a
            // transfer that never reached the loop.
            if !cleaned { curl_easy_cleanup(easy) }
            curl_slist_free_all(fields)
            if uploadFile >= 0 { close(uploadFile) }
        }

        /// Fills `buffer` with the upload's next bytes; 0 at its end. A file that cannot be read aborts the transfer.
        private func readUpload(into buffer: UnsafeMutableRawBufferPointer) -> Int {
            if let uploadData {
                let count = min(buffer.count, uploadData.count - uploadOffset)
                guard count > 0 else { return 0 }
                let start = uploadData.startIndex + uploadOffset
                uploadData.copyBytes(
                    to: buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), from: start..<(start + count))
                uploadOffset += count
                return count
            }
            while true {
                let count = read(uploadFile, buffer.baseAddress, buffer.count)
                if count >= 0 { return count }
                if errno != EINTR { return Int(CURL_READFUNC_ABORT) }
            }
        }

        /// Reports the request body's progress when it moved.
        private func progressed(sent: curl_off_t, of total: curl_off_t) {
            guard let report = streaming?.sent, sent > reportedSent else { return }
            reportedSent = Int64(sent)
            report(Int64(sent), Int64(total))
        }

        /// Tells `streaming` the final head, once, before any byte of the body.
        private func tellHead() {
            guard let streaming, !headTold, let response = answer().response() else { return }
            headTold = true
            streaming.head(response)
        }

        /// The request's fields as libcurl takes them, `Expect:` added so that no body waits for `100 Continue`, and
        /// for a body under a method other than POST, `Content-Type:` so that libcurl adds no form type of its own
        /// (FoundationNetworking adds that type to POST only).
        private static func fieldLines(
            of request: URLRequest, hasBody: Bool, method: String
        ) throws(CurlRequestRefusal) -> [String] {
            var lines = [String]()
            for (name, value) in request.allHTTPHeaderFields ?? [:] {
                // A line break would end the field and begin another the caller never wrote.
                guard !name.isEmpty, HTTPFieldText.isSendable(name, isName: true),
                    HTTPFieldText.isSendable(value, isName: false)
                else {
                    throw .malformedField
                }
                // libcurl sends `Name;` as a field with an empty value, and drops `Name:`.
                lines.append(value.isEmpty ? "\(name);" : "\(name): \(value)")
            }
            if request.value(forHTTPHeaderField: "Expect") == nil { lines.append("Expect:") }
            if hasBody, method != "POST", request.value(forHTTPHeaderField: "Content-Type") == nil {
                lines.append("Content-Type:")
            }
            return lines
        }

        /// Reads one line of an answer's head, as libcurl hands it over (its line break included), byte by byte:
        /// Foundation's string trimming cost more than the rest of a request's handling together.
        private func received(headerLine raw: UnsafeRawBufferPointer) {
            answered = true
            var end = raw.count
            while end > 0, raw[end - 1] == UInt8(ascii: "\n") || raw[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            // The blank line that ends a head: a final one (not `1xx`) is the answer's, told before its body.
            if end == 0, status >= 200 { tellHead() }
            let line = raw[0..<end]
            if line.starts(with: "HTTP/".utf8) {
                // A new head (after a 100 Continue, or a proxy's CONNECT answer): only the last one is the answer's.
                headers = []
                let space = line.firstIndex(of: UInt8(ascii: " ")) ?? end
                version = String(decoding: line[..<space], as: UTF8.self)
                var code = 0
                var index = space + 1
                while index < end, index < space + 4, (48...57).contains(line[index]) {
                    code = code * 10 + Int(line[index] - 48)
                    index += 1
                }
                status = index == space + 4 ? code : 0
            } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                func isBlank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
                var first = colon + 1
                while first < end, isBlank(line[first]) { first += 1 }
                var last = end
                while last > first, isBlank(line[last - 1]) { last -= 1 }
                headers.append(
                    (
                        String(decoding: line[..<colon], as: UTF8.self),
                        String(decoding: line[first..<last], as: UTF8.self)
                    ))
            }
        }

        /// Completes the transfer, once, on the loop's thread; its handle has left the multi handle.
        func finish(with error: URLError?, loop: CurlEventLoop) {
            guard !cleaned else { return }
            // On the loop's thread, before the client may clean its share handle up: the handle uses it until now.
            cleaned = true
            curl_easy_cleanup(easy)
            // The events let go with the completion: they may hold the transfer's own handle (to stop it), and a
            // transfer that kept them would keep itself.
            streaming = nil
            guard let completion else { return }
            self.completion = nil
            client?.forget(self)
            client = nil
            if let error {
                completion(.failure(error))
                return
            }
            guard status >= 100 else {
                completion(.failure(URLError(.badServerResponse)))
                return
            }
            completion(.success(answer()))
        }

        /// The answer as collected so far: the body, and the head of the last response that began.
        private func answer() -> CurlAnswer {
            CurlAnswer(data: body, url: url, status: status, version: version, fields: headers)
        }
    }

    extension CurlProxies {
        /// The proxy for `url`, or `nil` to go directly (before `noProxy` is applied, which libcurl does). Here, beside
        /// its one caller, since it runs for every request.
        package func proxy(for url: URL) -> String? {
            switch url.scheme?.lowercased() {
            case "http": http
            case "https": https
            default: nil
            }
        }
    }

    /// What a transfer answers: its body, decoded, and its head as it arrived.
    ///
    /// The head becomes an `HTTPURLResponse` when its reader asks (``response()``), on the reader's thread: Foundation
    /// builds one at some 10 µs on Linux (it capitalizes every field name and parses `Content-Type` character by
    /// character), more than the rest of a request's work on the transport's loop, whose one thread runs every
    /// transfer of the process (BENCHMARKS.md, "The libcurl transport's floor").
    package struct CurlAnswer: Sendable {
        /// The body, decoded; empty for a streaming transfer.
        package let data: Data
        let url: URL
        let status: Int
        let version: String
        let fields: [(name: String, value: String)]

        /// An answer as the loop collects one (for the bench's measure of what making its response costs).
        package init(data: Data, url: URL, status: Int, version: String, fields: [(name: String, value: String)]) {
            self.data = data
            self.url = url
            self.status = status
            self.version = version
            self.fields = fields
        }

        /// The head as a response, or `nil` when none with a status arrived.
        package func response() -> HTTPURLResponse? {
            guard status >= 100 else { return nil }
            // Fields of one name are joined in order with ", " (RFC 9110 §5.3), under the first one's spelling.
            var joined = [String: String](minimumCapacity: fields.count)
            var spelling = [String: String]()
            for (name, value) in fields {
                let key = name.lowercased()
                if let first = spelling[key] {
                    joined[first, default: ""] += ", " + value
                } else {
                    spelling[key] = name
                    joined[name] = value
                }
            }
            return HTTPURLResponse(url: url, statusCode: status, httpVersion: version, headerFields: joined)
        }
    }

    /// Why the libcurl transport refused to send a request.
    package enum CurlRequestRefusal: Error, Equatable, Sendable {
        /// The URL is not `http` or `https`.
        case unsupportedScheme
        /// A field name or value holds a line break or a NUL, or is not a name.
        case malformedField
        /// The body is a stream; the transport sends bodies it holds.
        case bodyStream
        /// libcurl could not make a handle.
        case unavailable
        /// An upload's file is not a readable regular file.
        case unreadableFile
    }

    extension Duration {
        var nanoseconds: UInt64 {
            let (seconds, attoseconds) = components
            return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
        }

        var milliseconds: Int64 { Int64(nanoseconds / 1_000_000) }
    }
#endif
