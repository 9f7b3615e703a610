import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A private, in-memory HTTP cache for one user session (RFC 9111); what it stores and how it ages entries is
/// described in the Caching article of the documentation catalog.
///
/// - Important: Every method is safe to call from any thread or task. Each runs in one short critical section
///   under a lock and never suspends, so a call sees the effects of every call that returned before it.
///   The cache never logs.
package final class ResponseCache: Sendable {
    /// A stored response, ready to be used in place of a network answer.
    package struct CachedResponse: Sendable {
        /// The stored response, with its header fields as last updated by a validation.
        package let response: HTTPURLResponse
        /// The stored body (empty for HEAD and 204).
        package let body: Data
        /// The response's current age (RFC 9111 §4.2.3); an HTTP client that forwards the response sets `Age`
        /// from it. Zero for a response that a validation made unstorable.
        package let age: Duration
    }

    /// What the cache can do for a request.
    package enum Lookup: Sendable {
        /// A stored response that may be used without contacting the server.
        case fresh(CachedResponse)
        /// A stored response that may be used only after the server confirms it: send the request with
        /// `conditionalHeaders` added (`If-None-Match`, `If-Modified-Since`) and pass a 304 to
        /// ``ResponseCache/revalidated(_:for:requestSentAt:responseReceivedAt:)``.
        case needsValidation(CachedResponse, conditionalHeaders: [String: String])
        /// Nothing usable is stored: send the request as it is.
        case miss
    }

    /// The most request fields a stored response may vary on; a response with a longer `Vary` is not stored.
    package static let maximumVaryFieldCount = 64

    /// The bound on the bytes the cache holds: bodies, header fields and a fixed cost per entry.
    package let maximumBytes: Int

    private let clock: any SessionClock
    private let storage: Lock<ResponseCacheStorage>
    /// Salts the digests of selecting request fields, so the digests are meaningful only inside this instance.
    private let saltHigh: UInt64
    private let saltLow: UInt64

    /// Request fields that make the request conditional or partial: such a request is the caller's own
    /// validation (or range) and is sent as it is.
    private static let bypassingRequestFields = [
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range",
    ]

    /// Creates an empty cache.
    ///
    /// - Parameters:
    ///   - maximumBytes: The bound on the bytes held; zero or less caches nothing. A response costing more
    ///     than an eighth of it is not stored, so one response cannot flush everything else.
    ///   - clock: The clock entries age on; only its monotonic ``SessionClock/now`` decides freshness.
    package init(maximumBytes: Int = 4 * 1024 * 1024, clock: any SessionClock = SystemClock()) {
        self.maximumBytes = max(0, maximumBytes)
        self.clock = clock
        self.storage = Lock(ResponseCacheStorage(maximumBytes: maximumBytes))
        // The salt keeps credential digests unguessable, so it comes from the secure generator.
        let salt = PlatformCrypto.requiredRandomBytes(count: 16)
        self.saltHigh = salt[..<8].reduce(0) { $0 << 8 | UInt64($1) }
        self.saltLow = salt[8...].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The largest cost a single response may have and still be stored: an eighth of ``maximumBytes``.
    package var maximumEntryBytes: Int { maximumBytes / 8 }

    /// The number of stored responses (each variant of a URI counts once).
    package var count: Int { storage.withLock { $0.count } }

    /// The bytes the stored responses count against ``maximumBytes``.
    package var totalBytes: Int { storage.withLock { $0.totalBytes } }

    /// Finds what the cache can do for `request` (RFC 9111 §4).
    ///
    /// A request other than GET or HEAD, one with `no-store` or a malformed `Cache-Control`, and a conditional or
    /// range request always miss. Otherwise the most recently stored response whose `Vary` fields match the
    /// request's is chosen. It is fresh if its age is below its freshness lifetime and neither it nor the request
    /// says `no-cache`, within the request's `max-age` and `min-fresh`; a stale response is used only within the
    /// request's `max-stale`, and never when it says `must-revalidate`. An unusable response with validators
    /// needs validation; one without validators can never be used again and is removed.
    ///
    /// - Parameter request: The request about to be sent.
    /// - Returns: A fresh response, a response to validate with the conditional header fields to send, or a miss.
    package func lookup(for request: URLRequest) -> Lookup {
        prepare(request).map(lookup) ?? .miss
    }

    /// Whether the cache holds no response: then every lookup misses, and a store of a response that may not be
    /// stored has nothing to replace.
    var isEmpty: Bool { count == 0 }

    /// A request as the cache sees it, derived once for both its lookup and the store of its response: the
    /// primary key, the header fields (read from the request once) and its `Cache-Control`.
    struct Request {
        let key: ResponseCacheKey
        let fields: HTTPRequestFields
        let control: CacheControl
        /// A conditional or range request: the caller's own validation, never answered from the cache (its
        /// response is stored as any other).
        let bypassesLookup: Bool
    }

    /// The cache's view of `request`, or `nil` for a request the cache never answers and whose response it never
    /// stores: not GET or HEAD, no URL, or `no-store` (or a malformed `Cache-Control`) in the request.
    func prepare(_ request: URLRequest) -> Request? {
        let fields = HTTPRequestFields(request)
        guard let (key, control) = Self.cacheableRequest(request, fields: fields), !control.noStore else { return nil }
        let bypasses = !fields.isEmpty && Self.bypassingRequestFields.contains { fields.value($0) != nil }
        return Request(key: key, fields: fields, control: control, bypassesLookup: bypasses)
    }

    /// ``lookup(for:)`` of a prepared request.
    func lookup(_ request: Request) -> Lookup {
        guard !request.bypassesLookup else { return .miss }
        let (key, fields, requestControl) = (request.key, request.fields, request.control)
        let now = clock.now
        return storage.withLock { storage in
            guard let slot = selectVariant(in: storage, for: key, fields: fields),
                let entry = storage.entry(at: slot)
            else { return .miss }
            let age = entry.age(at: now)
            let cached = CachedResponse(response: entry.response, body: entry.body, age: age)
            if Self.isUsableWithoutValidation(entry, age: age, requestControl: requestControl) {
                storage.touch(slot)
                return .fresh(cached)
            }
            guard entry.hasValidator else {
                storage.remove(slot)
                return .miss
            }
            storage.touch(slot)
            return .needsValidation(cached, conditionalHeaders: entry.conditionalHeaders)
        }
    }

    /// Stores a response if RFC 9111 §3 and this cache's rules allow it (see the type's discussion).
    ///
    /// Whether or not it is stored, a response replaces the stored responses this request would have been
    /// answered with: a newer answer that may not be stored must not leave an older one to be served.
    /// A 304 is ignored here: pass it to ``revalidated(_:for:requestSentAt:responseReceivedAt:)``.
    ///
    /// - Parameters:
    ///   - response: The response as received.
    ///   - body: The complete body.
    ///   - request: The request that was sent, whose URL is the cache key.
    ///   - requestSentAt: The monotonic instant the request was sent (RFC 9111 `request_time`).
    ///   - responseReceivedAt: The monotonic instant the response was received (`response_time`).
    package func store(
        _ response: HTTPURLResponse,
        body: Data,
        for request: URLRequest,
        requestSentAt: ContinuousClock.Instant,
        responseReceivedAt: ContinuousClock.Instant
    ) {
        store(
            response, body: body, for: request, prepared: nil, requestSentAt: requestSentAt,
            responseReceivedAt: responseReceivedAt)
    }

    /// ``store(_:body:for:requestSentAt:responseReceivedAt:)`` with the request's view the lookup prepared, if it
    /// prepared one (`nil`: derived here, and only when needed), and ``mayStore(_:)``'s answer if the caller has it.
    func store(
        _ response: HTTPURLResponse,
        body: Data,
        for request: URLRequest,
        prepared: Request?,
        storable: Bool? = nil,
        requestSentAt: ContinuousClock.Instant,
        responseReceivedAt: ContinuousClock.Instant
    ) {
        guard response.statusCode != 304 else { return }
        let storable = storable ?? Self.mayStore(response)
        // A response that may not be stored only replaces what is stored for its request: with nothing stored,
        // it changes nothing, and the request need not even be read.
        guard storable || !isEmpty, let prepared = prepared ?? prepare(request) else { return }
        let (key, fields) = (prepared.key, prepared.fields)
        let now = clock.now
        var entry: ResponseCacheEntry?
        if storable {
            let wallClockAtReceipt = wallClock(at: responseReceivedAt, now: now)
            entry = ResponseCacheEntry(
                response: response,
                body: body,
                requestFields: fields,
                requestSentAt: requestSentAt,
                responseReceivedAt: responseReceivedAt,
                wallClockAtReceipt: wallClockAtReceipt,
                digest: digest
            )
        }
        if let candidate = entry {
            let isUseful =
                candidate.hasValidator
                || (!candidate.noCache && candidate.age(at: now) < candidate.freshnessLifetime)
            if !isUseful || candidate.cost > maximumEntryBytes { entry = nil }
        }
        storage.withLock { storage in
            for slot in matchingVariants(in: storage, for: key, fields: fields) {
                storage.remove(slot)
            }
            if let entry { storage.insert(entry, for: key) }
        }
    }

    /// Updates the stored response that a 304 (Not Modified) validated, and returns it (RFC 9111 §4.3.3, §4.3.4).
    ///
    /// The stored response is the one the 304 names by its `ETag` (strong comparison for a strong tag, weak
    /// otherwise), else by its `Last-Modified`; a 304 with neither validator updates the stored response whose
    /// validator the request sent in `If-None-Match` or `If-Modified-Since`. Its header fields are replaced by the
    /// 304's (RFC 9111 §3.2; not `Content-Length`, `Content-Encoding` or hop-by-hop fields) and its age restarts
    /// from this exchange, so it is fresh again for its freshness lifetime.
    ///
    /// - Parameters:
    ///   - response: The 304 response.
    ///   - request: The conditional request that was sent.
    ///   - requestSentAt: The monotonic instant the conditional request was sent.
    ///   - responseReceivedAt: The monotonic instant the 304 was received.
    /// - Returns: The updated response with its stored body; nil if `response` is not a 304 or no stored response
    ///   matches it (it was evicted or replaced meanwhile): send the request again without conditional fields.
    package func revalidated(
        _ response: HTTPURLResponse,
        for request: URLRequest,
        requestSentAt: ContinuousClock.Instant,
        responseReceivedAt: ContinuousClock.Instant
    ) -> CachedResponse? {
        let fields = HTTPRequestFields(request)
        guard response.statusCode == 304, let (key, _) = Self.cacheableRequest(request, fields: fields) else {
            return nil
        }
        let now = clock.now
        let wallClockAtReceipt = wallClock(at: responseReceivedAt, now: now)
        let notModified = ResponseCacheEntry.fields(of: response)
        return storage.withLock { storage -> CachedResponse? in
            let candidates = matchingVariants(in: storage, for: key, fields: fields).compactMap { slot in
                storage.entry(at: slot).map { (slot: slot, entry: $0) }
            }
            let selected: (slot: Int, entry: ResponseCacheEntry)?
            if let tag = notModified.first("etag").flatMap(ResponseCacheEntry.validEntityTag) {
                let strong = !tag.hasPrefix("W/")
                selected = candidates.first { candidate in
                    candidate.entry.entityTag.map { ResponseCacheEntry.entityTags($0, tag, matchStrongly: strong) }
                        ?? false
                }
            } else if let lastModified = notModified.first("last-modified") {
                selected = candidates.first { $0.entry.lastModified == lastModified }
            } else {
                let sentTag = fields.value("if-none-match")
                let sentDate = fields.value("if-modified-since")
                selected = candidates.first { candidate in
                    (sentTag != nil && candidate.entry.entityTag == sentTag)
                        || (sentDate != nil && candidate.entry.lastModified == sentDate)
                }
            }
            guard let (slot, stored) = selected,
                let merged = Self.merging(notModified, into: stored.response, url: request.url)
            else { return nil }
            let updated = ResponseCacheEntry(
                response: merged,
                body: stored.body,
                requestFields: fields,
                requestSentAt: requestSentAt,
                responseReceivedAt: responseReceivedAt,
                wallClockAtReceipt: wallClockAtReceipt,
                digest: digest
            )
            guard let updated, updated.cost <= maximumEntryBytes else {
                // The 304 made the response unstorable (say, it added no-store): use it this once.
                storage.remove(slot)
                return CachedResponse(response: merged, body: stored.body, age: .zero)
            }
            storage.replace(slot, with: updated)
            return CachedResponse(response: merged, body: stored.body, age: updated.age(at: now))
        }
    }

    /// Removes the stored GET and HEAD responses for the target URI of an unsafe request (RFC 9111 §4.4).
    ///
    /// Call it for every request with a method other than GET, HEAD, OPTIONS or TRACE that may have reached
    /// the server, whatever its outcome: removing an entry too many only costs a request. For a safe method it
    /// does nothing.
    ///
    /// - Parameter request: The unsafe request.
    package func invalidate(for request: URLRequest) {
        let method = request.httpMethod ?? "GET"
        guard !["GET", "HEAD", "OPTIONS", "TRACE"].contains(method), let url = request.url else { return }
        removeAll(for: url)
    }

    /// Removes the stored GET and HEAD responses for `url`, every variant of them.
    ///
    /// - Parameter url: The target URI.
    package func removeAll(for url: URL) {
        guard !isEmpty else { return }
        let uri = ResponseCacheKey.normalized(url)
        storage.withLock { storage in
            storage.removeAll(for: ResponseCacheKey(method: "GET", normalizedURI: uri))
            storage.removeAll(for: ResponseCacheKey(method: "HEAD", normalizedURI: uri))
        }
    }

    /// Removes every stored response.
    package func removeAll() {
        storage.withLock { $0.removeAll() }
    }

    // MARK: - Internals

    /// The stored GET and HEAD URIs from least to most recently used, for tests of the eviction order.
    var urisByRecency: [String] {
        storage.withLock { $0.keysByRecency.map(\.uri) }
    }

    /// The stored variants of `key` whose selecting fields match `request` (RFC 9111 §4.1), most recent first.
    private func matchingVariants(
        in storage: borrowing ResponseCacheStorage,
        for key: ResponseCacheKey,
        fields: HTTPRequestFields
    ) -> [Int] {
        storage.slots(for: key).filter { slot in
            storage.entry(at: slot).map { matches($0, fields) } ?? false
        }
    }

    private func selectVariant(
        in storage: borrowing ResponseCacheStorage,
        for key: ResponseCacheKey,
        fields: HTTPRequestFields
    ) -> Int? {
        storage.slots(for: key).first { slot in
            storage.entry(at: slot).map { matches($0, fields) } ?? false
        }
    }

    private func matches(_ entry: ResponseCacheEntry, _ fields: HTTPRequestFields) -> Bool {
        for (name, stored) in zip(entry.varyFieldNames, entry.varyDigests) where digest(fields.value(name)) != stored {
            return false
        }
        return true
    }

    /// The salted digest of a request field's value, normalized as a list: elements trimmed, one comma between.
    private func digest(_ value: String?) -> ResponseCacheEntry.FieldDigest? {
        guard let value else { return nil }
        let normalized = Array(value.utf8).split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
            .map { HTTPFieldSyntax.trimmed($0) }
        var high = Hasher()
        var low = Hasher()
        high.combine(saltHigh)
        low.combine(saltLow)
        for element in normalized {
            element.withUnsafeBytes { high.combine(bytes: $0) }
            element.withUnsafeBytes { low.combine(bytes: $0) }
            high.combine(UInt8(ascii: ","))
            low.combine(UInt8(ascii: ","))
        }
        return .init(high: UInt64(truncatingIfNeeded: high.finalize()), low: UInt64(truncatingIfNeeded: low.finalize()))
    }

    /// The wall-clock time at the monotonic instant `instant`, estimated from the clocks' current readings.
    private func wallClock(at instant: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Date {
        let elapsed = now - instant
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return clock.wallNow.addingTimeInterval(-seconds)
    }
}
