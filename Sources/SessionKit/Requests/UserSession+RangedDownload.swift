import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Downloads `request`'s response in ranges of ``Configuration/downloadSegmentBytes``, each range a request
    /// under ``sendAuthorized(_:attempt:discard:)``'s rules, into one file: the chunks waiting in memory for the
    /// disk never exceed one range, because the next range is asked for only once the previous one is on disk.
    ///
    /// - Returns: The file and the response, or `nil` when the download must be one request instead: ranges are
    ///   off, the request is not a plain GET, or the server's first range gave no validator to join ranges safely
    ///   (a strong `ETag` or `Last-Modified`), no complete length, an encoded body, or a 416 (an empty resource).
    ///   Then no file is left behind.
    /// - Throws: What ``download(for:progress:)`` throws; `malformedResponse` when the server answers a range
    ///   request with another range than the one asked for.
    func downloadInRanges(
        _ request: URLRequest,
        progress: (@Sendable (TransferProgress) -> Void)?
    ) async throws -> (URL, HTTPURLResponse)? {
        let segment = Int64(configuration.downloadSegmentBytes)
        guard segment > 0, HTTPMethod.of(request) == "GET",
            request.value(forHTTPHeaderField: "Range") == nil, request.value(forHTTPHeaderField: "If-Range") == nil
        else { return nil }
        var base = request
        if base.value(forHTTPHeaderField: "Accept-Encoding") == nil {
            // Ranges of an encoded representation cannot be decoded one by one.
            base.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        let body = try TransferBody.file(in: self, extension: request.url?.pathExtension ?? "")
        do {
            var offset: Int64 = 0
            var first: (response: HTTPURLResponse, validator: String, length: Int64)?
            while true {
                var ranged = base
                ranged.setValue("bytes=\(offset)-\(offset + segment - 1)", forHTTPHeaderField: "Range")
                if let first { ranged.setValue(first.validator, forHTTPHeaderField: "If-Range") }
                let start = offset
                let (response, _) = try await sendAuthorized(ranged) { outgoing in
                    try body.rewind(to: start)
                    let response = try await transfer(outgoing, into: body, progress: progress, sending: .none)
                    return .answer(response, response)
                }
                if response.statusCode == 416 && first == nil {
                    body.discard()
                    return nil
                }
                guard response.statusCode == 206 else {
                    // A 200 is the whole body (ranges ignored, or the resource changed since the first range); any
                    // other status ends the download, its body the file's content, as for a single request.
                    try body.keepHeldAnswer()
                    return (try body.finish(), response)
                }
                guard let range = ContentRange(response), range.first == offset, body.written == range.last + 1
                else {
                    throw SessionError(
                        .malformedResponse, "the server answered a range request with another range",
                        statusCode: response.statusCode)
                }
                if let first {
                    let etag = response.value(forHTTPHeaderField: "ETag")
                    guard range.completeLength == first.length,
                        etag == first.response.value(forHTTPHeaderField: "ETag")
                    else {
                        // The resource changed and the server did not honour If-Range: start again, whole.
                        body.discard()
                        return nil
                    }
                } else {
                    guard let length = range.completeLength, let validator = Self.rangeValidator(of: response),
                        Self.isIdentityEncoded(response)
                    else {
                        body.discard()
                        return nil
                    }
                    first = (response, validator, length)
                }
                offset = range.last + 1
                if let first, offset == first.length {
                    return (try body.finish(), Self.assembled(first.response, length: first.length))
                }
            }
        } catch {
            body.discard()
            throw error
        }
    }

    /// What `If-Range` can carry to keep the ranges of one version together (RFC 9110 §13.1.5): a strong entity
    /// tag, else the `Last-Modified` date.
    static func rangeValidator(of response: HTTPURLResponse) -> String? {
        if let etag = response.value(forHTTPHeaderField: "ETag"), etag.hasPrefix("\"") { return etag }
        return response.value(forHTTPHeaderField: "Last-Modified")
    }

    static func isIdentityEncoded(_ response: HTTPURLResponse) -> Bool {
        let encoding = response.value(forHTTPHeaderField: "Content-Encoding")?.trimmingCharacters(in: .whitespaces)
        return encoding == nil || encoding?.isEmpty == true || encoding?.lowercased() == "identity"
    }

    /// The response a download assembled from ranges returns: the first range's, as a 200 of the whole body.
    static func assembled(_ first: HTTPURLResponse, length: Int64) -> HTTPURLResponse {
        var fields: [String: String] = [:]
        for case (let name as String, let value as String) in first.allHeaderFields
        where name.caseInsensitiveCompare("Content-Range") != .orderedSame
            && name.caseInsensitiveCompare("Content-Length") != .orderedSame
        {
            fields[name] = value
        }
        fields["Content-Length"] = String(length)
        let url = first.url ?? URL(fileURLWithPath: "/")
        return HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields) ?? first
    }
}
