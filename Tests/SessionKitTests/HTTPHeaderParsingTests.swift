import Foundation
import SessionKit
import Testing

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct HTTPHeaderParsingTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT
    private let rfcExample = Date(timeIntervalSince1970: 784_111_777)
    /// 2025-06-01T00:00:00Z, the "now" RFC 850 years are placed against.
    private let reference = Date(timeIntervalSince1970: 1_748_736_000)

    // MARK: - HTTPDate

    @Test func allThreeDateFormatsGiveTheSameInstant() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == rfcExample)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", referenceDate: reference) == rfcExample)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == rfcExample)
        #expect(HTTPDate.parse("  Sun, 06 Nov 1994 08:49:37 GMT\t") == rfcExample)
    }

    @Test func formatWritesIMFFixdate() {
        #expect(HTTPDate.format(rfcExample) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(rfcExample.addingTimeInterval(0.999)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1)) == "Wed, 31 Dec 1969 23:59:59 GMT")
    }

    @Test func formatClampsDatesOutsideFourDigitYearsAndStillParses() {
        for date in [
            Date.distantFuture, .distantPast, Date(timeIntervalSince1970: .infinity),
            Date(timeIntervalSince1970: -.infinity), Date(timeIntervalSince1970: .nan),
        ] {
            let text = HTTPDate.format(date)
            #expect(HTTPDate.parse(text) != nil, "\(text)")
        }
        #expect(HTTPDate.format(.distantFuture) == "Mon, 01 Jan 4001 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1e15)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(.distantPast) == "Mon, 01 Jan 0001 00:00:00 GMT")
    }

    @Test func impossibleDatesAndTimesAreRejected() {
        let invalid = [
            "Fri, 30 Feb 2024 00:00:00 GMT",  // no Feb 30
            "Thu, 29 Feb 1900 00:00:00 GMT",  // 1900 is not a leap year
            "Sun, 31 Apr 2024 00:00:00 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",  // hour 25
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:37 GMT",
            "Sun, 06 Nov 1994 08:49:61 GMT",
            "Sun, 06 Nov 0000 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",  // names are case-sensitive
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 +0000",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sunday, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-94 08:49:37 GMT",  // RFC 850 needs the long day name
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sunday, 31-Feb-94 08:49:37 GMT",
            "Sun Nov 31 08:49:37 1994",
            "Sun Nov  6 08:49:37 94",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "", "0", "-1", "GMT", "Sun, 06 Nov 1994",
        ]
        for text in invalid {
            #expect(HTTPDate.parse(text, referenceDate: reference) == nil, "\(text)")
        }
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") != nil)
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == HTTPDate.parse("Sun, 01 Jan 2017 00:00:00 GMT"))
    }

    @Test func rfc850TwoDigitYearsAreNeverMoreThanFiftyYearsAhead() {
        func year(_ twoDigits: String) -> String? {
            HTTPDate.parse("Monday, 01-Jan-\(twoDigits) 00:00:00 GMT", referenceDate: reference).map {
                String(HTTPDate.format($0).dropFirst(12).prefix(4))
            }
        }
        #expect(year("94") == "1994")
        #expect(year("25") == "2025")
        #expect(year("75") == "2075")  // exactly 50 years ahead is allowed
        #expect(year("76") == "1976")
        #expect(year("00") == "2000")
    }

    // MARK: - CacheControl

    @Test func cacheControlReadsEveryDirective() {
        let response = CacheControl(
            "max-age=60, s-maxage=30, no-store, no-cache, private, public, must-revalidate, proxy-revalidate, "
                + "immutable, stale-while-revalidate=5, stale-if-error=7, no-transform, must-understand")
        #expect(response.maxAge == 60)
        #expect(response.sharedMaxAge == 30)
        #expect(response.noStore && response.noCache && response.isPrivate && response.isPublic)
        #expect(response.mustRevalidate && response.proxyRevalidate && response.immutable)
        #expect(response.noTransform && response.mustUnderstand)
        #expect(response.staleWhileRevalidate == 5 && response.staleIfError == 7)
        #expect(response.noCacheFieldNames.isEmpty && response.privateFieldNames.isEmpty)
        #expect(!response.isMalformed)

        let request = CacheControl("max-stale=10, min-fresh=20, only-if-cached, max-age=0")
        #expect(request.maxStale == 10 && request.minFresh == 20 && request.onlyIfCached && request.maxAge == 0)
        #expect(CacheControl("max-stale").maxStale == CacheControl.maximumDeltaSeconds)
        #expect(CacheControl().maxAge == nil && !CacheControl().noStore)
    }

    @Test func directiveNamesAreCaseInsensitiveAndValuesMayBeQuoted() {
        let control = CacheControl("MAX-AGE=\"60\", No-Store")
        #expect(control.maxAge == 60)
        #expect(control.noStore)
        #expect(!control.isMalformed)
    }

    @Test func qualifiedNoCacheAndPrivateKeepTheirFieldNames() {
        let control = CacheControl(#"no-cache="Set-Cookie, X-Token", private="Authorization""#)
        #expect(control.noCache)
        #expect(control.noCacheFieldNames == ["set-cookie", "x-token"])
        #expect(control.isPrivate)
        #expect(control.privateFieldNames == ["authorization"])
        // The unqualified form is stricter and wins, in either order.
        #expect(CacheControl(#"no-cache="a", no-cache"#).noCacheFieldNames.isEmpty)
        #expect(CacheControl(#"no-cache, no-cache="a""#).noCacheFieldNames.isEmpty)
    }

    @Test func invalidFreshnessValuesBecomeStaleAndHugeOnesAreClamped() {
        #expect(CacheControl("max-age=abc").maxAge == 0)
        #expect(CacheControl("max-age=-1").maxAge == 0)
        #expect(CacheControl("max-age=").maxAge == 0)
        #expect(CacheControl("max-age").maxAge == 0)
        #expect(CacheControl("max-age=1.5").maxAge == 0)
        #expect(CacheControl("max-age=99999999999999999999").maxAge == 2_147_483_648)
        #expect(CacheControl("max-age=2147483648").maxAge == 2_147_483_648)
        #expect(CacheControl("min-fresh=abc").minFresh == CacheControl.maximumDeltaSeconds)
        #expect(CacheControl("max-stale=abc").maxStale == 0)
    }

    @Test func duplicateDirectivesKeepTheMostConservativeValue() {
        #expect(CacheControl("max-age=600, max-age=60").maxAge == 60)
        #expect(CacheControl("max-age=60, max-age=600").maxAge == 60)
        #expect(CacheControl("max-age=60, max-age=oops").maxAge == 0)
        #expect(CacheControl("min-fresh=5, min-fresh=50").minFresh == 50)
        #expect(CacheControl("max-stale, max-stale=3").maxStale == 3)
    }

    @Test func multipleFieldLinesCombineAndAreParsedApart() {
        let control = CacheControl(fieldValues: ["max-age=60", "no-store"])
        #expect(control.maxAge == 60 && control.noStore)
        // An unterminated quoted string on one line does not swallow the next line.
        let hostile = CacheControl(fieldValues: [#"foo="bar, max-age=60"#, "no-store"])
        #expect(hostile.noStore)
        #expect(hostile.isMalformed)
    }

    @Test func unknownDirectivesAreKeptAndBounded() {
        let control = CacheControl(#"community="UCI", x-thing, max-age=5"#)
        #expect(control.extensions == [.init(name: "community", value: "UCI"), .init(name: "x-thing")])
        #expect(control.maxAge == 5)
        let many = CacheControl((0..<1_000).map { "x\($0)" }.joined(separator: ","))
        #expect(many.extensions.count == CacheControl.maximumExtensionCount)
    }

    @Test func unparseableCacheControlIsToleratedAndFlagged() {
        #expect(CacheControl(",,,") == CacheControl())
        #expect(!CacheControl(" , ,max-age=5,, ").isMalformed)
        #expect(CacheControl(#""unterminated"#).isMalformed)
        #expect(CacheControl("max-age=\"60").maxAge == 0)
        #expect(CacheControl("max-age=5 6").maxAge == 0)
        #expect(CacheControl("no-store junk").noStore)
        #expect(CacheControl("no store").isMalformed)
        let junk = String(decoding: [0x00, 0xFF, 0x2C, 0x7F, 0x0A, 0x22, 0x5C], as: UTF8.self)
        #expect(CacheControl(junk).isMalformed)
        #expect(CacheControl("max-age=\"6\u{1}0\"").isMalformed)
    }

    // MARK: - Vary

    @Test func varyListsDistinctLowercasedFieldNames() {
        let vary = Vary(fieldValues: ["Accept-Encoding, authorization", "ACCEPT-encoding,, Accept-Language"])
        #expect(vary.fieldNames == ["accept-encoding", "authorization", "accept-language"])
        #expect(!vary.isWildcard && !vary.isMalformed)
        #expect(Vary("Accept, *").isWildcard)
        #expect(Vary("*").fieldNames.isEmpty)
        #expect(Vary("a b, c").isMalformed)
        #expect(Vary("a b, c").fieldNames == ["c"])
        #expect(Vary(fieldValues: []).fieldNames.isEmpty)
    }

    @Test func aHugeVaryListParsesInFull() {
        let value = (0..<10_000).map { "X-Field-\($0)" }.joined(separator: ", ")
        let vary = Vary(value + ", x-field-0")
        #expect(vary.fieldNames.count == 10_000)
        #expect(vary.fieldNames.first == "x-field-0")
    }

    // MARK: - RetryAfter and Age

    @Test func retryAfterReadsSecondsAndDates() {
        let now = rfcExample
        #expect(RetryAfter.parse("120", now: now) == .seconds(120))
        #expect(RetryAfter.parse(" 0 ", now: now) == .zero)
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:51:37 GMT", now: now) == .seconds(120))
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == .zero)
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:50:37 GMT", now: now) == .seconds(60))
    }

    @Test func retryAfterRejectsNegativePastAndGarbage() {
        let now = rfcExample
        for value in ["-1", "1.5", "", "soon", "Sun, 06 Nov 1994 08:49:36 GMT", "12 s", "0x10", "+5"] {
            #expect(RetryAfter.parse(value, now: now) == nil, "\(value)")
        }
    }

    @Test func retryAfterClampsAbsurdWaitsToOneDay() {
        #expect(RetryAfter.parse("99999999999999999999999", now: rfcExample) == RetryAfter.maximumDelay)
        #expect(RetryAfter.parse("86401", now: rfcExample) == .seconds(86_400))
        #expect(RetryAfter.parse("Fri, 31 Dec 9999 23:59:59 GMT", now: rfcExample) == RetryAfter.maximumDelay)
    }

    @Test func ageIsANonNegativeIntegerOrIgnored() {
        #expect(Age.parse("0") == 0)
        #expect(Age.parse(" 42 ") == 42)
        #expect(Age.parse("99999999999999999999") == 2_147_483_648)
        for value in ["-1", "1.0", "", "abc", "5, 10", "5 10"] {
            #expect(Age.parse(value) == nil, "\(value)")
        }
    }
}
