import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One stored response and what the cache derived from it when it was stored.
///
/// Immutable, and a class so that handing an entry around under the cache's lock costs one retain.
///
/// Everything that needs the wall clock (the `Date` header against the time of receipt) is computed once,
/// here, into ``correctedInitialAge``. From then on the entry ages on the monotonic clock only, so a wall-clock
/// change cannot make a stale entry fresh again or a fresh one stale.
final class ResponseCacheEntry: Sendable {
    /// A digest of one request field's normalized value, so selecting fields (often `Authorization`) are
    /// compared without being kept in memory.
    struct FieldDigest: Hashable, Sendable {
        let high: UInt64
        let low: UInt64
    }

    let response: HTTPURLResponse
    let body: Data
    /// The response's `no-cache`: validate before every use.
    let noCache: Bool
    /// The response's `must-revalidate`: never use stale, even where the request would accept it.
    let mustRevalidate: Bool
    /// The lower-cased field names of the response's `Vary`, and the request's values for them (nil: absent).
    let varyFieldNames: [String]
    let varyDigests: [FieldDigest?]
    let entityTag: String?
    let lastModified: String?
    /// RFC 9111 §4.2.1, explicit only: `max-age`, else `Expires` − `Date`. Zero when neither is present.
    let freshnessLifetime: Duration
    /// RFC 9111 §4.2.3 `corrected_initial_age`, fixed when the response was received.
    let correctedInitialAge: Duration
    /// The monotonic instant the response was received: resident time is measured from here.
    let receivedAt: ContinuousClock.Instant
    /// What this entry counts against the cache's byte bound.
    let cost: Int

    /// The bytes counted for every entry on top of its body, header fields, URI and digests: the
    /// `HTTPURLResponse` object and its header dictionary, this object, the storage slot and the index.
    /// Chosen so that the accounted cost of an entry matches the heap's growth per entry (BENCHMARKS.md, "Figures
    /// behind the code's rules"): a cache bounded in bytes must count what an entry really costs.
    static let fixedCost = 1_216

    var hasValidator: Bool { entityTag != nil || lastModified != nil }

    /// The current age (RFC 9111 §4.2.3) at monotonic instant `now`.
    func age(at now: ContinuousClock.Instant) -> Duration {
        correctedInitialAge + max(.zero, now - receivedAt)
    }

    /// The request header fields a validation request carries (RFC 9111 §4.3.1).
    var conditionalHeaders: [String: String] {
        var headers: [String: String] = [:]
        if let entityTag { headers["If-None-Match"] = entityTag }
        if let lastModified { headers["If-Modified-Since"] = lastModified }
        return headers
    }

    /// Derives an entry from a response, or nil if the response's metadata forbids or defeats storing it.
    ///
    /// - Parameters:
    ///   - response: The response as received.
    ///   - body: Its body.
    ///   - requestFields: The header fields of the request it answered, whose `Vary`-selected values are recorded.
    ///   - requestSentAt: The monotonic `request_time`.
    ///   - responseReceivedAt: The monotonic `response_time`.
    ///   - wallClockAtReceipt: The wall-clock time when the response was received, for `Date` arithmetic.
    ///   - digest: Turns a request field value (nil: absent) into its digest.
    init?(
        response: HTTPURLResponse,
        body: Data,
        requestFields: HTTPRequestFields,
        requestSentAt: ContinuousClock.Instant,
        responseReceivedAt: ContinuousClock.Instant,
        wallClockAtReceipt: Date,
        digest: (String?) -> FieldDigest?
    ) {
        let fields = Self.fields(of: response)
        let cacheControl = CacheControl(fieldValues: fields.values(for: "cache-control"))
        let vary = Vary(fieldValues: fields.values(for: "vary"))
        guard !cacheControl.noStore, !cacheControl.isMalformed, !vary.isWildcard, !vary.isMalformed,
            vary.fieldNames.count <= ResponseCache.maximumVaryFieldCount
        else { return nil }
        self.response = response
        self.body = body
        self.noCache = cacheControl.noCache
        self.mustRevalidate = cacheControl.mustRevalidate
        self.varyFieldNames = vary.fieldNames
        self.varyDigests = vary.fieldNames.map { digest(requestFields.value($0)) }
        self.entityTag = fields.first("etag").flatMap(Self.validEntityTag)
        self.lastModified = fields.first("last-modified").flatMap { value in
            HTTPDate.parse(value, referenceDate: wallClockAtReceipt) == nil ? nil : value
        }
        self.receivedAt = responseReceivedAt
        (freshnessLifetime, correctedInitialAge) = Self.freshness(
            fields: fields,
            cacheControl: cacheControl,
            responseDelay: max(.zero, responseReceivedAt - requestSentAt),
            wallClockAtReceipt: wallClockAtReceipt
        )
        self.cost =
            Self.fixedCost + body.count + fields.byteCount + (response.url?.absoluteString.utf8.count ?? 0)
            + varyFieldNames.reduce(0) { $0 + $1.utf8.count + MemoryLayout<FieldDigest?>.stride }
    }

    // MARK: - Freshness (RFC 9111 §4.2)

    private static func freshness(
        fields: Fields,
        cacheControl: CacheControl,
        responseDelay: Duration,
        wallClockAtReceipt: Date
    ) -> (lifetime: Duration, correctedInitialAge: Duration) {
        let limit = Double(HTTPFieldSyntax.maximumDeltaSeconds)
        // A missing or invalid Date means the recipient's own time of receipt (RFC 9110 §6.6.1).
        let dateValue = fields.first("date").flatMap { HTTPDate.parse($0, referenceDate: wallClockAtReceipt) }
        let lifetime: Duration
        if let maxAge = cacheControl.maxAge {
            // s-maxage is for shared caches; this cache is private (RFC 9111 §5.2.2.10).
            lifetime = .seconds(maxAge)
        } else if let expires = fields.first("expires") {
            // An invalid Expires, notably "0", is a time in the past (RFC 9111 §5.3).
            let expiresValue = HTTPDate.parse(expires, referenceDate: wallClockAtReceipt)
            let seconds = expiresValue.map { $0.timeIntervalSince(dateValue ?? wallClockAtReceipt) } ?? 0
            lifetime = .seconds(min(max(seconds, 0), limit))
        } else {
            // No heuristic freshness: guessing a lifetime for personal data would serve it past what the
            // server allowed, and a wrong guess shows one moment's data as current.
            lifetime = .zero
        }
        let apparentAge = dateValue.map { min(max(wallClockAtReceipt.timeIntervalSince($0), 0), limit) } ?? 0
        let ageValue = fields.first("age").flatMap(Age.parse) ?? 0
        let correctedAgeValue = Duration.seconds(ageValue) + responseDelay
        return (lifetime, max(.seconds(apparentAge), correctedAgeValue))
    }

    // MARK: - Validators and header fields

    /// `"opaque"` or `W/"opaque"` (RFC 9110 §8.8.3); anything else is not a usable validator.
    static func validEntityTag(_ value: String) -> String? {
        let trimmed = HTTPFieldSyntax.trimmed(Array(value.utf8)[...])
        var tag = trimmed
        if tag.starts(with: "W/".utf8) { tag = tag.dropFirst(2) }
        guard tag.count >= 2, tag.first == UInt8(ascii: "\""), tag.last == UInt8(ascii: "\""),
            tag.dropFirst().dropLast().allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) })
        else { return nil }
        return String(decoding: trimmed, as: UTF8.self)
    }

    /// Whether two entity tags match: strongly if `strong`, else weakly (RFC 9110 §8.8.3.2).
    static func entityTags(_ a: String, _ b: String, matchStrongly strong: Bool) -> Bool {
        let aWeak = a.hasPrefix("W/")
        let bWeak = b.hasPrefix("W/")
        if strong { return !aWeak && !bWeak && a == b }
        return (aWeak ? a.dropFirst(2) : a[...]) == (bWeak ? b.dropFirst(2) : b[...])
    }

    /// A response's header fields with case-insensitive access.
    struct Fields {
        var pairs: [(name: String, lowercasedName: String, value: String)]

        func values(for lowercasedName: String) -> [String] {
            pairs.filter { $0.lowercasedName == lowercasedName }.map(\.value)
        }

        func first(_ lowercasedName: String) -> String? {
            pairs.first { $0.lowercasedName == lowercasedName }?.value
        }

        var byteCount: Int {
            pairs.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        }
    }

    static func fields(of response: HTTPURLResponse) -> Fields {
        Fields(
            pairs: response.allHeaderFields.compactMap { key, value in
                guard let name = key.base as? String else { return nil }
                return (name, name.lowercased(), value as? String ?? "\(value)")
            }
        )
    }
}
