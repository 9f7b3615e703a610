import Foundation
import SessionKit
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A clock whose monotonic and wall-clock readings move only when a test moves them.
private final class TestClock: SessionClock {
    private let readings: Lock<(now: ContinuousClock.Instant, wall: Date)>

    init(wall: Date = Date(timeIntervalSince1970: 1_750_000_000)) {
        readings = Lock((ContinuousClock.now, wall))
    }

    var now: ContinuousClock.Instant { readings.withLock { $0.now } }
    var wallNow: Date { readings.withLock { $0.wall } }

    /// Moves both clocks forward, as time passing does.
    func advance(by duration: Duration) {
        readings.withLock {
            $0.now += duration
            $0.wall += Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        }
    }

    /// Moves the wall clock only, as a user or NTP setting the time does.
    func setWallClock(by seconds: TimeInterval) {
        readings.withLock { $0.wall += seconds }
    }

    /// The cache never sleeps; a call means a test used this clock for something it does not model.
    func sleep(until deadline: ContinuousClock.Instant) async throws {
        Issue.record("TestClock does not model sleeping")
        throw CancellationError()
    }
}

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ResponseCacheTests {
    private let clock = TestClock()

    private func makeCache(maximumBytes: Int = 4 * 1024 * 1024) -> ResponseCache {
        ResponseCache(maximumBytes: maximumBytes, clock: clock)
    }

    private func request(_ path: String, method: String = "GET", _ headers: [String: String] = [:]) -> URLRequest {
        var request = URLRequest(url: URL(string: "https://api.example\(path)")!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    private func response(_ path: String, status: Int = 200, _ headers: [String: String]) -> HTTPURLResponse {
        HTTPURLResponse(
            url: URL(string: "https://api.example\(path)")!,
            statusCode: status,
            httpVersion: "HTTP/1.1",
            headerFields: headers
        )!
    }

    /// Stores a response received just now, sent `delay` earlier.
    private func store(
        _ cache: ResponseCache,
        _ request: URLRequest,
        _ response: HTTPURLResponse,
        body: String = "body",
        delay: Duration = .zero
    ) {
        cache.store(
            response,
            body: Data(body.utf8),
            for: request,
            requestSentAt: clock.now - delay,
            responseReceivedAt: clock.now
        )
    }

    private var nowHTTPDate: String { HTTPDate.format(clock.wallNow) }

    // MARK: - Freshness

    @Test func maxAgeIsFreshForItsLifetimeOnly() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=60"]), body: "one")
        clock.advance(by: .seconds(59))
        guard case .fresh(let cached) = cache.lookup(for: request("/a")) else {
            Issue.record("expected a fresh hit")
            return
        }
        #expect(cached.body == Data("one".utf8))
        #expect(cached.age == .seconds(59))
        clock.advance(by: .seconds(1))
        // Stale without a validator: unusable, and removed.
        #expect(cache.lookup(for: request("/a")).isMiss)
        #expect(cache.count == 0)
    }

    @Test func expiresMinusDateGivesTheLifetime() {
        let cache = makeCache()
        let date = clock.wallNow
        let headers = ["Date": HTTPDate.format(date), "Expires": HTTPDate.format(date + 120)]
        store(cache, request("/a"), response("/a", headers))
        clock.advance(by: .seconds(119))
        #expect(cache.lookup(for: request("/a")).isFresh)
        clock.advance(by: .seconds(1))
        #expect(cache.lookup(for: request("/a")).isMiss)
    }

    @Test func aDateInThePastCountsAsApparentAge() {
        let cache = makeCache()
        let date = clock.wallNow - 30
        store(cache, request("/a"), response("/a", ["Date": HTTPDate.format(date), "Cache-Control": "max-age=60"]))
        clock.advance(by: .seconds(29))
        #expect(cache.lookup(for: request("/a")).isFresh)
        clock.advance(by: .seconds(1))
        #expect(cache.lookup(for: request("/a")).isMiss)
    }

    @Test func invalidExpiresIsAlreadyExpired() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Expires": "0", "ETag": #""v1""#]))
        #expect(cache.lookup(for: request("/a")).needsValidation)
        store(cache, request("/b"), response("/b", ["Expires": "0"]))
        #expect(cache.count == 1)
    }

    @Test func ageHeaderAndResponseDelayCountTowardsCurrentAge() {
        let cache = makeCache()
        store(cache, request("/age"), response("/age", ["Cache-Control": "max-age=60", "Age": "50"]))
        store(cache, request("/slow"), response("/slow", ["Cache-Control": "max-age=60"]), delay: .seconds(5))
        clock.advance(by: .seconds(9))
        #expect(cache.lookup(for: request("/age")).isFresh)
        clock.advance(by: .seconds(1))
        #expect(cache.lookup(for: request("/age")).isMiss)
        clock.advance(by: .seconds(44))
        #expect(cache.lookup(for: request("/slow")).isFresh)
        clock.advance(by: .seconds(1))
        #expect(cache.lookup(for: request("/slow")).isMiss)
    }

    @Test func aStaleResponseWithValidatorsNeedsValidation() throws {
        let cache = makeCache()
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        store(
            cache, request("/a"),
            response("/a", ["Cache-Control": "max-age=60", "ETag": #"W/"v1""#, "Last-Modified": lastModified]))
        clock.advance(by: .seconds(61))
        guard case .needsValidation(let cached, let conditional) = cache.lookup(for: request("/a")) else {
            Issue.record("expected validation")
            return
        }
        #expect(conditional == ["If-None-Match": #"W/"v1""#, "If-Modified-Since": lastModified])
        #expect(cached.body == Data("body".utf8))
    }

    @Test func noCacheIsStoredButAlwaysValidated() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "no-cache, max-age=600", "ETag": #""v1""#]))
        #expect(cache.lookup(for: request("/a")).needsValidation)
        // Without a validator it could never be used: not stored at all.
        store(cache, request("/b"), response("/b", ["Cache-Control": "no-cache, max-age=600"]))
        #expect(cache.count == 1)
        // A request's no-cache forces validation of a fresh entry.
        store(cache, request("/c"), response("/c", ["Cache-Control": "max-age=600", "ETag": #""v1""#]))
        #expect(cache.lookup(for: request("/c", ["Cache-Control": "no-cache"])).needsValidation)
        #expect(cache.lookup(for: request("/c")).isFresh)
    }

    @Test func requestDirectivesTightenOrLoosenFreshness() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=60", "ETag": #""v""#]))
        store(
            cache, request("/strict"),
            response("/strict", ["Cache-Control": "max-age=60, must-revalidate", "ETag": #""v""#]))
        clock.advance(by: .seconds(30))
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "max-age=10"])).needsValidation)
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "min-fresh=40"])).needsValidation)
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "min-fresh=20"])).isFresh)
        clock.advance(by: .seconds(40))
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "max-stale=20"])).isFresh)
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "max-stale=5"])).needsValidation)
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "max-stale"])).isFresh)
        // must-revalidate: a stale response is never used without validation.
        #expect(cache.lookup(for: request("/strict", ["Cache-Control": "max-stale"])).needsValidation)
    }

    @Test func noStoreInTheResponseIsNeverStoredAndReplacesAnOlderEntry() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "no-store, max-age=60", "ETag": #""v""#]))
        #expect(cache.count == 0)
        store(cache, request("/b"), response("/b", ["Cache-Control": "max-age=60"]))
        store(cache, request("/b"), response("/b", ["Cache-Control": "no-store"]))
        #expect(cache.count == 0)
        #expect(cache.lookup(for: request("/b")).isMiss)
    }

    @Test func noStoreInTheRequestIsNeitherStoredNorServed() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=60"]), body: "old")
        store(
            cache, request("/a", ["Cache-Control": "no-store"]), response("/a", ["Cache-Control": "max-age=60"]),
            body: "new")
        #expect(cache.lookup(for: request("/a", ["Cache-Control": "no-store"])).isMiss)
        // The existing entry is untouched and still serves ordinary requests.
        #expect(cache.lookup(for: request("/a")).freshBody == "old")
        store(cache, request("/b", ["Cache-Control": "no-store"]), response("/b", ["Cache-Control": "max-age=60"]))
        #expect(cache.count == 1)
    }

    @Test func onlyCacheableStatusesAreStored() {
        let cache = makeCache()
        for (index, status) in [200, 203, 204, 300, 301, 308, 404, 410].enumerated() {
            store(
                cache, request("/ok\(index)"), response("/ok\(index)", status: status, ["Cache-Control": "max-age=60"]))
        }
        for (index, status) in [201, 206, 302, 307, 401, 403, 429, 500, 503].enumerated() {
            store(
                cache, request("/no\(index)"), response("/no\(index)", status: status, ["Cache-Control": "max-age=60"]))
        }
        #expect(cache.count == 8)
        // Neither explicit freshness nor a validator: nothing to base reuse on.
        store(cache, request("/bare"), response("/bare", ["Content-Type": "text/plain"]))
        #expect(cache.count == 8)
    }

    // MARK: - The article's four header variants

    enum ArticleVariant: String, CaseIterable, Sendable {
        case maxAge = "max-age=60"
        case privateMaxAge = "private, max-age=60"
        case noStore = "no-store"
        case maxAgeVaryAuthorization = "max-age=60 + Vary: Authorization"

        var headers: [String: String] {
            switch self {
            case .maxAge: ["Cache-Control": "max-age=60"]
            case .privateMaxAge: ["Cache-Control": "private, max-age=60"]
            case .noStore: ["Cache-Control": "no-store"]
            case .maxAgeVaryAuthorization: ["Cache-Control": "max-age=60", "Vary": "Authorization"]
            }
        }
    }

    /// Within one session, a second request after a token refresh (a different `Authorization`) is served from
    /// the cache for `max-age=60` and `private, max-age=60`: correct for a single-user private cache. `no-store`
    /// and `Vary: Authorization` are never served. A second session's cache never holds the first's response.
    @Test(arguments: ArticleVariant.allCases)
    func articleHeaderVariants(_ variant: ArticleVariant) {
        let session = makeCache()
        let first = request("/me/profile", ["Authorization": "Bearer token-1"])
        store(session, first, response("/me/profile", variant.headers), body: #"{"name":"alice"}"#)

        let afterRefresh = request("/me/profile", ["Authorization": "Bearer token-2"])
        let second = session.lookup(for: afterRefresh)
        switch variant {
        case .maxAge, .privateMaxAge:
            #expect(second.freshBody == #"{"name":"alice"}"#)
        case .noStore, .maxAgeVaryAuthorization:
            #expect(second.isMiss)
        }
        let sameToken = session.lookup(for: first)
        #expect(sameToken.isFresh == (variant != .noStore))

        let nextSession = makeCache()
        #expect(nextSession.lookup(for: request("/me/profile", ["Authorization": "Bearer bob"])).isMiss)
    }

    // MARK: - Vary

    @Test func varySelectsByTheRequestsNormalizedFieldValues() {
        let cache = makeCache()
        let headers = ["Cache-Control": "max-age=60", "Vary": "Accept-Language"]
        store(cache, request("/a", ["Accept-Language": "en, fr"]), response("/a", headers), body: "en")
        #expect(cache.lookup(for: request("/a", ["Accept-Language": "en,fr"])).freshBody == "en")
        #expect(cache.lookup(for: request("/a", ["accept-language": " en ,  fr "])).freshBody == "en")
        #expect(cache.lookup(for: request("/a", ["Accept-Language": "fr, en"])).isMiss)
        #expect(cache.lookup(for: request("/a")).isMiss)

        // A response selected by an absent field matches only requests without it.
        store(cache, request("/b"), response("/b", headers))
        #expect(cache.lookup(for: request("/b")).isFresh)
        #expect(cache.lookup(for: request("/b", ["Accept-Language": ""])).isMiss)
    }

    @Test func severalVariantsOfOneURIAreKept() {
        let cache = makeCache()
        let headers = ["Cache-Control": "max-age=60", "Vary": "Authorization"]
        for user in ["alice", "bob"] {
            store(cache, request("/me", ["Authorization": "Bearer \(user)"]), response("/me", headers), body: user)
        }
        #expect(cache.count == 2)
        #expect(cache.lookup(for: request("/me", ["Authorization": "Bearer alice"])).freshBody == "alice")
        #expect(cache.lookup(for: request("/me", ["Authorization": "Bearer bob"])).freshBody == "bob")
        #expect(cache.lookup(for: request("/me", ["Authorization": "Bearer carol"])).isMiss)

        // A URI keeps a bounded number of variants; the least recently used goes first.
        for index in 0..<20 {
            store(cache, request("/me", ["Authorization": "Bearer t\(index)"]), response("/me", headers))
        }
        #expect(cache.count == 8)
        #expect(cache.lookup(for: request("/me", ["Authorization": "Bearer alice"])).isMiss)
        #expect(cache.lookup(for: request("/me", ["Authorization": "Bearer t19"])).isFresh)
    }

    @Test func varyStarAndHugeOrMalformedVaryAreNotStored() {
        let cache = makeCache()
        store(cache, request("/star"), response("/star", ["Cache-Control": "max-age=60", "Vary": "*"]))
        let huge = (0..<10_000).map { "X-Field-\($0)" }.joined(separator: ", ")
        store(cache, request("/huge"), response("/huge", ["Cache-Control": "max-age=60", "Vary": huge]))
        store(cache, request("/bad"), response("/bad", ["Cache-Control": "max-age=60", "Vary": "a b"]))
        #expect(cache.count == 0)
        #expect(cache.lookup(for: request("/star")).isMiss)
        #expect(cache.lookup(for: request("/huge")).isMiss)
        let largest = (0..<ResponseCache.maximumVaryFieldCount).map { "X-\($0)" }.joined(separator: ",")
        store(cache, request("/largest"), response("/largest", ["Cache-Control": "max-age=60", "Vary": largest]))
        #expect(cache.lookup(for: request("/largest")).isFresh)
    }

    // MARK: - Validation (304)

    @Test func aNotModifiedResponseUpdatesTheEntryAndMakesItFreshAgain() throws {
        let cache = makeCache()
        let original = response(
            "/a", ["Cache-Control": "max-age=60", "ETag": #""v1""#, "Content-Length": "3", "X-Old": "kept"])
        store(cache, request("/a"), original, body: "one")
        clock.advance(by: .seconds(61))
        guard case .needsValidation(_, let conditional) = cache.lookup(for: request("/a")) else {
            Issue.record("expected validation")
            return
        }
        let sentAt = clock.now
        clock.advance(by: .seconds(1))
        let notModified = response(
            "/a", status: 304,
            ["Cache-Control": "max-age=120", "ETag": #""v1""#, "Content-Length": "0", "X-New": "added"])
        let updated = try #require(
            cache.revalidated(
                notModified, for: request("/a", conditional), requestSentAt: sentAt, responseReceivedAt: clock.now))
        #expect(updated.body == Data("one".utf8))
        #expect(updated.response.statusCode == 200)
        #expect(updated.response.value(forHTTPHeaderField: "X-New") == "added")
        #expect(updated.response.value(forHTTPHeaderField: "X-Old") == "kept")
        #expect(updated.response.value(forHTTPHeaderField: "Content-Length") == "3")
        #expect(updated.response.value(forHTTPHeaderField: "Cache-Control") == "max-age=120")
        #expect(updated.age == .seconds(1))  // the exchange's own delay
        clock.advance(by: .seconds(118))
        #expect(cache.lookup(for: request("/a")).freshBody == "one")
        clock.advance(by: .seconds(1))
        #expect(cache.lookup(for: request("/a")).needsValidation)
    }

    @Test func aNotModifiedResponseForAnEvictedEntryReturnsNil() {
        // Room for about ten small entries.
        let cache = makeCache(maximumBytes: 8 * 2_000)
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=60", "ETag": #""v1""#]))
        clock.advance(by: .seconds(61))
        guard case .needsValidation(_, let conditional) = cache.lookup(for: request("/a")) else {
            Issue.record("expected validation")
            return
        }
        // While the validation is in flight, other responses push the entry out.
        for path in (0..<20).map({ "/other\($0)" }) {
            store(cache, request(path), response(path, ["Cache-Control": "max-age=60"]))
        }
        #expect(cache.lookup(for: request("/a")).isMiss)
        let notModified = response("/a", status: 304, ["ETag": #""v1""#])
        let result = cache.revalidated(
            notModified, for: request("/a", conditional), requestSentAt: clock.now, responseReceivedAt: clock.now)
        #expect(result == nil)
        #expect(cache.lookup(for: request("/a")).isMiss)
    }

    @Test func aNotModifiedResponseUpdatesOnlyTheResponseItNames() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=0", "ETag": #""v1""#]))
        let other = response("/a", status: 304, ["ETag": #""v2""#])
        #expect(
            cache.revalidated(other, for: request("/a"), requestSentAt: clock.now, responseReceivedAt: clock.now)
                == nil)
        // A strong 304 tag does not match a weak stored one; a weak one matches weakly.
        store(cache, request("/w"), response("/w", ["Cache-Control": "max-age=0", "ETag": #"W/"v1""#]))
        let strong = response("/w", status: 304, ["ETag": #""v1""#])
        #expect(
            cache.revalidated(strong, for: request("/w"), requestSentAt: clock.now, responseReceivedAt: clock.now)
                == nil)
        let weak = response("/w", status: 304, ["ETag": #"W/"v1""#])
        #expect(
            cache.revalidated(weak, for: request("/w"), requestSentAt: clock.now, responseReceivedAt: clock.now)
                != nil)
        // A 200 is not a validation.
        #expect(
            cache.revalidated(
                response("/a", ["ETag": #""v1""#]), for: request("/a"), requestSentAt: clock.now,
                responseReceivedAt: clock.now) == nil)
    }

    @Test func aBareNotModifiedUpdatesTheResponseTheRequestValidated() throws {
        let cache = makeCache()
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=10", "Last-Modified": lastModified]))
        clock.advance(by: .seconds(11))
        let conditional = request("/a", ["If-Modified-Since": lastModified])
        let updated = cache.revalidated(
            response("/a", status: 304, [:]), for: conditional, requestSentAt: clock.now,
            responseReceivedAt: clock.now)
        #expect(updated != nil)
        #expect(cache.lookup(for: request("/a")).isFresh)
    }

    @Test func aNotModifiedThatAddsNoStoreIsUsedOnceAndDropped() throws {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=0", "ETag": #""v1""#]), body: "x")
        let notModified = response("/a", status: 304, ["ETag": #""v1""#, "Cache-Control": "no-store"])
        let once = try #require(
            cache.revalidated(notModified, for: request("/a"), requestSentAt: clock.now, responseReceivedAt: clock.now))
        #expect(once.body == Data("x".utf8))
        #expect(cache.count == 0)
    }

    // MARK: - Bounds and eviction

    @Test func leastRecentlyUsedEntriesAreEvictedFirstWithinTheByteBound() {
        let cache = makeCache(maximumBytes: 24_000)
        let headers = ["Cache-Control": "max-age=600"]
        for path in ["/a", "/b", "/c"] {
            store(cache, request(path), response(path, headers), body: String(repeating: "x", count: 600))
        }
        #expect(cache.lookup(for: request("/a")).isFresh)  // a is now the most recently used
        #expect(cache.urisByRecency == ["https://api.example/b", "https://api.example/c", "https://api.example/a"])
        var evictionOrder: [String] = []
        for index in 0..<20 {
            let path = "/n\(index)"
            store(cache, request(path), response(path, headers), body: String(repeating: "x", count: 600))
            #expect(cache.totalBytes <= 24_000)
            let kept = cache.urisByRecency.map { String($0.dropFirst("https://api.example".count)) }
            evictionOrder += ["/b", "/c", "/a"].filter { !kept.contains($0) && !evictionOrder.contains($0) }
            // What survives is always the most recently used run, in order.
            let recency = ["/b", "/c", "/a"] + (0...index).map { "/n\($0)" }
            #expect(kept == Array(recency.suffix(kept.count)))
        }
        #expect(evictionOrder == ["/b", "/c", "/a"])
        #expect(cache.count >= 8)
        #expect(cache.lookup(for: request("/b")).isMiss)
    }

    @Test func aResponseLargerThanAnEighthOfTheBoundIsNotStored() {
        let cache = makeCache(maximumBytes: 80_000)
        let headers = ["Cache-Control": "max-age=60"]
        store(cache, request("/big"), response("/big", headers), body: String(repeating: "x", count: 10_000))
        #expect(cache.count == 0)
        store(cache, request("/small"), response("/small", headers), body: String(repeating: "x", count: 8_000))
        #expect(cache.count == 1)
        #expect(ResponseCache(maximumBytes: 0, clock: clock).maximumEntryBytes == 0)
    }

    @Test func removeAllEmptiesTheCache() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=60"]))
        #expect(cache.totalBytes > 0)
        cache.removeAll()
        #expect(cache.count == 0 && cache.totalBytes == 0)
        #expect(cache.lookup(for: request("/a")).isMiss)
    }

    // MARK: - Malformed Cache-Control

    /// A header value shown escaped in test names, so control characters never reach the log.
    struct FieldValue: CustomTestStringConvertible, Sendable {
        let value: String
        var testDescription: String { value.debugDescription }
    }

    @Test(
        arguments: ["max-age=", ",,,", #""unterminated"#, "max-age=\u{0}\u{FF}\u{7F}", "\u{1}\u{2}, no-stor\u{0}e"].map(
            FieldValue.init))
    func unparseableCacheControlNeverServesWithoutValidation(_ field: FieldValue) {
        let value = field.value
        let cache = makeCache()
        store(cache, request("/v"), response("/v", ["Cache-Control": value, "ETag": #""v1""#]))
        store(cache, request("/n"), response("/n", ["Cache-Control": value]))
        #expect(!cache.lookup(for: request("/v")).isFresh)
        #expect(cache.lookup(for: request("/n")).isMiss)
        #expect(cache.count <= 1)
        // And in a request: no crash, no use of the cache.
        store(cache, request("/ok"), response("/ok", ["Cache-Control": "max-age=60"]))
        let odd = request("/ok", ["Cache-Control": value])
        // Foundation may drop a field value holding control characters; judge what the request really carries.
        let carried = odd.value(forHTTPHeaderField: "Cache-Control").map(CacheControl.init) ?? CacheControl()
        #expect(cache.lookup(for: odd).isFresh == !carried.isMalformed)
    }

    @Test func malformedCacheControlWithAValidatorIsNotStored() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": #"x="y, max-age=60"#, "ETag": #""v1""#]))
        #expect(cache.count == 0)
        store(cache, request("/b"), response("/b", ["Cache-Control": "max-age=", "ETag": #""v1""#]))
        #expect(cache.lookup(for: request("/b")).needsValidation)
    }

    // MARK: - Methods and invalidation

    @Test func headAndGetAreStoredApartAndOtherMethodsNeverCached() {
        let cache = makeCache()
        let headers = ["Cache-Control": "max-age=60"]
        store(cache, request("/a"), response("/a", headers), body: "get")
        #expect(cache.lookup(for: request("/a", method: "HEAD")).isMiss)
        store(cache, request("/a", method: "HEAD"), response("/a", headers), body: "")
        #expect(cache.lookup(for: request("/a", method: "HEAD")).freshBody == "")
        #expect(cache.lookup(for: request("/a")).freshBody == "get")
        store(cache, request("/p", method: "POST"), response("/p", headers))
        #expect(cache.lookup(for: request("/p", method: "POST")).isMiss)
        #expect(cache.lookup(for: request("/a", method: "POST")).isMiss)
        #expect(cache.count == 2)
    }

    @Test func unsafeRequestsInvalidateEverySpellingOfTheTargetURI() {
        let cache = makeCache()
        let headers = ["Cache-Control": "max-age=60"]
        store(cache, request("/a?x=1"), response("/a?x=1", headers))
        store(cache, request("/a?x=1", method: "HEAD"), response("/a?x=1", headers))
        store(cache, request("/b"), response("/b", headers))
        cache.invalidate(for: request("/a?x=1", method: "GET"))
        #expect(cache.count == 3)
        var post = URLRequest(url: URL(string: "HTTPS://API.Example:443/a?x=1#top")!)
        post.httpMethod = "POST"
        cache.invalidate(for: post)
        #expect(cache.count == 1)
        #expect(cache.lookup(for: request("/b")).isFresh)
        for method in ["PUT", "DELETE", "PATCH"] {
            cache.invalidate(for: request("/b", method: method))
            #expect(cache.count == 0)
            store(cache, request("/b"), response("/b", headers))
        }
    }

    @Test func uriSpellingsShareOneKey() {
        #expect(
            ResponseCacheKey.normalized(URL(string: "HTTPS://Api.Example:443?q#f")!) == "https://api.example/?q")
        #expect(ResponseCacheKey.normalized(URL(string: "http://a.example:80/P")!) == "http://a.example/P")
        #expect(ResponseCacheKey.normalized(URL(string: "http://a.example:8080/")!) == "http://a.example:8080/")
        #expect(ResponseCacheKey.normalized(URL(string: "https://User@A.example/x")!) == "https://User@a.example/x")
        // Already-normal URIs take the fast path and come back unchanged; a fragment is still dropped.
        #expect(ResponseCacheKey.normalized(URL(string: "https://a.example/P?Q=1")!) == "https://a.example/P?Q=1")
        #expect(ResponseCacheKey.normalized(URL(string: "https://a.example/p#Top")!) == "https://a.example/p")
        #expect(ResponseCacheKey.normalized(URL(string: "https://a.example")!) == "https://a.example/")
    }

    @Test func conditionalAndRangeRequestsBypassTheCache() {
        let cache = makeCache()
        store(cache, request("/a"), response("/a", ["Cache-Control": "max-age=60", "ETag": #""v""#]))
        #expect(cache.lookup(for: request("/a", ["If-None-Match": #""v""#])).isMiss)
        #expect(cache.lookup(for: request("/a", ["Range": "bytes=0-1"])).isMiss)
        #expect(cache.lookup(for: request("/a")).isFresh)
    }

    // MARK: - Clocks

    /// Freshness runs on the monotonic clock once stored: setting the wall clock back or forward a day
    /// changes nothing.
    @Test(arguments: [-86_400.0, 86_400.0])
    func wallClockJumpsDoNotChangeFreshness(_ jump: TimeInterval) {
        let cache = makeCache()
        let headers = ["Cache-Control": "max-age=60", "Date": nowHTTPDate, "ETag": #""v""#]
        store(cache, request("/a"), response("/a", headers))
        let date = clock.wallNow
        store(
            cache, request("/e"),
            response("/e", ["Date": HTTPDate.format(date), "Expires": HTTPDate.format(date + 60)]))
        clock.setWallClock(by: jump)
        clock.advance(by: .seconds(30))
        #expect(cache.lookup(for: request("/a")).isFresh)
        #expect(cache.lookup(for: request("/e")).isFresh)
        clock.setWallClock(by: -2 * jump)
        clock.advance(by: .seconds(30))
        #expect(cache.lookup(for: request("/a")).needsValidation)
        #expect(cache.lookup(for: request("/e")).isMiss)
    }

    // MARK: - Concurrency

    @Test func concurrentUseKeepsTheBookkeepingConsistent() async {
        let cache = makeCache(maximumBytes: 40_000)
        let clock = self.clock
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<200 {
                        let path = "/w\((worker * 7 + index) % 40)"
                        var request = URLRequest(url: URL(string: "https://api.example\(path)")!)
                        if index % 9 == 0 { request.httpMethod = "DELETE" }
                        switch index % 3 {
                        case 0 where request.httpMethod == "GET":
                            let response = HTTPURLResponse(
                                url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                headerFields: ["Cache-Control": "max-age=60", "ETag": "\"\(index)\""])!
                            cache.store(
                                response, body: Data(count: index), for: request, requestSentAt: clock.now,
                                responseReceivedAt: clock.now)
                        case 1: _ = cache.lookup(for: request)
                        default: cache.invalidate(for: request)
                        }
                    }
                }
            }
        }
        #expect(cache.totalBytes <= 40_000)
        #expect(cache.urisByRecency.count == cache.count)
        #expect(Set(cache.urisByRecency).count == cache.count)
        cache.removeAll()
        #expect(cache.totalBytes == 0)
    }
}

extension ResponseCache.Lookup {
    fileprivate var isMiss: Bool {
        if case .miss = self { return true }
        return false
    }

    fileprivate var isFresh: Bool {
        if case .fresh = self { return true }
        return false
    }

    fileprivate var needsValidation: Bool {
        if case .needsValidation = self { return true }
        return false
    }

    fileprivate var freshBody: String? {
        if case .fresh(let cached) = self { return String(decoding: cached.body, as: UTF8.self) }
        return nil
    }
}
