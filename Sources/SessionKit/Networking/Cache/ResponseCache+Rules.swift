import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// RFC 9111's rules as the cache applies them: which requests and responses it may store, when a stored response
// may be used without validation, and how a 304 updates one. Static and stateless: they read only their arguments.
extension ResponseCache {
    /// Whether a response with `status` may be stored: the statuses this cache stores (a switch, not a set: asked
    /// of every answer to a GET, where hashing the status cost more than the rest of the decision).
    static func isCacheable(status: Int) -> Bool {
        switch status {
        case 200, 203, 204, 300, 301, 308, 404, 410: return true
        default: return false
        }
    }

    /// Fields a 304 must not overwrite in the stored response (RFC 9111 §3.1, §3.2): hop-by-hop fields,
    /// and the ones that describe the stored body's encoding and length.
    static let fieldsNotUpdatedByValidation: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "trailer",
        "content-length", "content-encoding", "content-range",
    ]

    static func cacheableRequest(
        _ request: URLRequest,
        fields: HTTPRequestFields
    ) -> (ResponseCacheKey, CacheControl)? {
        let method = request.httpMethod ?? "GET"
        guard method == "GET" || method == "HEAD", let url = request.url else { return nil }
        var control = CacheControl()
        if let value = fields.value("cache-control") {
            control = CacheControl(value)
            // A request whose directives cannot all be read might have said no-store: keep out of it.
            if control.isMalformed { control.noStore = true }
        }
        return (ResponseCacheKey(method: method, url: url), control)
    }

    /// Whether the cache may store `response` at all: a status it stores, and no `no-store`. `false` decides (the
    /// response only replaces what is stored for its request); `true` leaves the rest to the entry's own reading
    /// of every field.
    static func mayStore(_ response: HTTPURLResponse) -> Bool {
        isCacheable(status: response.statusCode) && !saysNoStore(response)
    }

    /// Whether the response's `Cache-Control` says `no-store`, read from that one field.
    ///
    /// Deriving an entry reads every header field (on Linux mostly the cost of bridging `allHeaderFields`) only to
    /// find that a `no-store` response may not be stored; this answers the common case for a fraction of that. A `no` here decides nothing: the entry's own parse of every field does.
    static func saysNoStore(_ response: HTTPURLResponse) -> Bool {
        guard let value = response.value(forHTTPHeaderField: "Cache-Control") else { return false }
        // The usual answer of an API that must not be cached, recognised without parsing; any other value
        // (another case, more directives) is parsed.
        return value == "no-store" || CacheControl(value).noStore
    }

    static func isUsableWithoutValidation(
        _ entry: ResponseCacheEntry,
        age: Duration,
        requestControl: CacheControl
    ) -> Bool {
        if entry.noCache || requestControl.noCache { return false }
        let lifetime = entry.freshnessLifetime
        if let maxAge = requestControl.maxAge, age > .seconds(maxAge) { return false }
        if let minFresh = requestControl.minFresh, lifetime - age < .seconds(minFresh) { return false }
        if age < lifetime { return true }
        guard let maxStale = requestControl.maxStale, !entry.mustRevalidate else { return false }
        return age - lifetime <= .seconds(maxStale)
    }

    /// The stored response with the 304's header fields applied (RFC 9111 §3.2).
    static func merging(
        _ notModified: ResponseCacheEntry.Fields,
        into stored: HTTPURLResponse,
        url: URL?
    ) -> HTTPURLResponse? {
        var fields = ResponseCacheEntry.fields(of: stored).pairs
        for (name, lowercasedName, value) in notModified.pairs
        where !fieldsNotUpdatedByValidation.contains(lowercasedName) {
            fields.removeAll { $0.lowercasedName == lowercasedName }
            fields.append((name, lowercasedName, value))
        }
        guard let url = stored.url ?? url else { return nil }
        return HTTPURLResponse(
            url: url,
            statusCode: stored.statusCode,
            httpVersion: "HTTP/1.1",
            headerFields: Dictionary(fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        )
    }
}
