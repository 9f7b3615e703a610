import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Feeds the header parsers (and a cache) random, grammar-shaped and mutated input, checking properties that
/// must hold for any input. `SESSIONKIT_FUZZ_INPUTS` sets the count (default 5,000), `SESSIONKIT_SEED` replays
/// a run: every failure message names the seed.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(30, by: "SESSIONKIT_FUZZ_INPUTS", reference: 100_000))))
struct HeaderFuzzTests {
    private static let fragments = [
        "max-age", "s-maxage", "no-store", "no-cache", "private", "public", "must-revalidate", "immutable",
        "max-stale", "min-fresh", "stale-while-revalidate", "=", "=", "\"", "\"", "\\", ",", ",", " ", "\t", "*",
        "0", "1", "60", "-1", "99999999999999999999", "abc", "W/", "GMT", "Sun", "Sunday", "Nov", "Feb", "06", "29",
        "30", "1994", "94", ":", "08:49:37", "25:00:00", "-", "\u{0}", "\u{7F}", "\u{FF}", "é", "\r\n", ";",
        "Authorization",
        "Accept-Language", "\u{1F600}",
    ]
    private static let samples = [
        "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
        "max-age=60, private", #"no-cache="Set-Cookie", max-stale"#, "Accept-Encoding, Authorization", "120", "0",
        #"community="UCI", must-revalidate"#,
    ]
    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    private let inputCount: Int
    private let seed: UInt64

    init() {
        let environment = ProcessInfo.processInfo.environment
        inputCount = environment["SESSIONKIT_FUZZ_INPUTS"].flatMap(Int.init).map { max(1, $0) } ?? 5_000
        seed = environment["SESSIONKIT_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
    }

    @Test func parsersHoldTheirPropertiesOnAnyInput() {
        print("fuzz: \(inputCount) inputs, seed: \(seed)")
        var random = SeededGenerator(seed: seed)
        let now = Date(timeIntervalSince1970: 1_750_000_000)
        let cache = ResponseCache(maximumBytes: 256 * 1024)
        var failures = 0
        for index in 0..<inputCount where failures < 10 {
            let input = Self.makeInput(&random)
            let context = "seed \(seed), input \(index): \(input.debugDescription)"
            var ok = true
            ok = checkDate(input, context: context) && ok
            ok = checkCacheControl(input, context: context) && ok
            ok = checkVary(input, context: context) && ok
            if let delay = RetryAfter.parse(input, now: now) {
                ok =
                    expectOK(delay >= .zero && delay <= RetryAfter.maximumDelay, "RetryAfter out of range", context)
                    && ok
            }
            if let age = Age.parse(input) {
                ok = expectOK((0...2_147_483_648).contains(age), "Age out of range", context) && ok
            }
            if index % 16 == 0 { exerciseCache(cache, with: input, index: index) }
            if !ok { failures += 1 }
        }
        #expect(cache.totalBytes <= cache.maximumBytes)
    }

    /// Valid dates built from random components parse back, in all three formats, to the instant they name.
    @Test func validDatesRoundTripInEveryFormat() {
        var random = SeededGenerator(seed: seed ^ 0x5A5A)
        let reference = Date(timeIntervalSince1970: 1_750_000_000)  // 2025: RFC 850 years 1976...2075
        for _ in 0..<min(inputCount, 20_000) {
            let seconds = Int64.random(in: 189_302_400...3_345_062_399, using: &random)  // 1976...2075
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let fixdate = HTTPDate.format(date)
            let parts = fixdate.split(separator: " ")  // Sun, 06 Nov 1994 08:49:37 GMT
            let weekday = Self.dayNames.firstIndex(of: String(parts[0].dropLast()))!
            let day = Int(parts[1])!
            let rfc850 = "\(Self.longDayNames[weekday]), \(parts[1])-\(parts[2])-\(parts[3].suffix(2)) \(parts[4]) GMT"
            let asctime =
                "\(parts[0].dropLast()) \(parts[2]) \(day < 10 ? " \(day)" : "\(day)") \(parts[4]) \(parts[3])"
            #expect(HTTPDate.parse(fixdate) == date, "seed \(seed): \(fixdate)")
            #expect(HTTPDate.parse(rfc850, referenceDate: reference) == date, "seed \(seed): \(rfc850)")
            #expect(HTTPDate.parse(asctime) == date, "seed \(seed): \(asctime)")
            #expect(Self.monthNames.contains(String(parts[2])))
        }
    }

    // MARK: - Properties

    private func checkDate(_ input: String, context: String) -> Bool {
        guard let date = HTTPDate.parse(input) else { return true }
        let formatted = HTTPDate.format(date)
        return expectOK(
            formatted.utf8.count == 29 && HTTPDate.parse(formatted) == date
                && date.timeIntervalSince1970.rounded(.down) == date.timeIntervalSince1970,
            "HTTPDate round trip", context)
    }

    private func checkCacheControl(_ input: String, context: String) -> Bool {
        let control = CacheControl(input)
        let bound = 0...CacheControl.maximumDeltaSeconds
        let values = [
            control.maxAge, control.sharedMaxAge, control.maxStale, control.minFresh,
            control.staleWhileRevalidate, control.staleIfError,
        ].compactMap { $0 }
        let namesAreLowercase = (control.extensions.map(\.name) + control.noCacheFieldNames + control.privateFieldNames)
            .allSatisfy { !$0.isEmpty && $0 == $0.lowercased() }
        return expectOK(
            values.allSatisfy(bound.contains) && control.extensions.count <= CacheControl.maximumExtensionCount
                && namesAreLowercase && CacheControl(fieldValues: [input, input]).noStore == control.noStore,
            "CacheControl invariants", context)
    }

    private func checkVary(_ input: String, context: String) -> Bool {
        let vary = Vary(input)
        return expectOK(
            Set(vary.fieldNames).count == vary.fieldNames.count
                && vary.fieldNames.allSatisfy { !$0.isEmpty && $0 != "*" && $0 == $0.lowercased() }
                && vary.isWildcard == Self.hasWildcardElement(input),
            "Vary invariants", context)
    }

    /// Whether a list element is `*` with optional whitespace around it, judged on bytes as the parser reads them.
    private static func hasWildcardElement(_ input: String) -> Bool {
        Array(input.utf8).split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).contains { element in
            element.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") } == [UInt8(ascii: "*")]
        }
    }

    /// Stores a response carrying the input in its caching fields, then looks it up: nothing may trap, and a
    /// response whose Cache-Control says no-store or is malformed is never served.
    private func exerciseCache(_ cache: ResponseCache, with input: String, index: Int) {
        let url = URL(string: "https://fuzz.example/\(index % 64)")!
        var request = URLRequest(url: url)
        request.setValue(input, forHTTPHeaderField: "Authorization")
        guard
            let response = HTTPURLResponse(
                url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                headerFields: ["Cache-Control": input, "Vary": input, "Expires": input, "Age": input, "ETag": input])
        else { return }
        let now = ContinuousClock.now
        cache.store(response, body: Data(input.utf8), for: request, requestSentAt: now, responseReceivedAt: now)
        let carried = CacheControl(response.value(forHTTPHeaderField: "Cache-Control") ?? "")
        if case .fresh = cache.lookup(for: request) {
            #expect(!carried.noStore && !carried.isMalformed, "seed \(seed), input \(index)")
        }
    }

    private func expectOK(_ condition: Bool, _ what: String, _ context: String) -> Bool {
        if !condition { Issue.record("\(what) failed for \(context)") }
        return condition
    }

    // MARK: - Inputs

    private static func makeInput(_ random: inout SeededGenerator) -> String {
        switch Int.random(in: 0..<4, using: &random) {
        case 0:
            // Raw bytes, most of them printable.
            let bytes = (0..<Int.random(in: 0...48, using: &random)).map { _ in
                Bool.random(using: &random)
                    ? UInt8.random(in: 0x20...0x7E, using: &random) : UInt8.random(in: 0...255, using: &random)
            }
            return String(decoding: bytes, as: UTF8.self)
        case 1:
            // Grammar-shaped: fragments of the real syntax in random order.
            return (0..<Int.random(in: 1...16, using: &random)).map { _ in fragments.randomElement(using: &random)! }
                .joined()
        default:
            // A valid sample, mutated a few times.
            var bytes = Array(samples.randomElement(using: &random)!.utf8)
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0 where !bytes.isEmpty: bytes[position] = UInt8.random(in: 0...255, using: &random)
                case 1 where !bytes.isEmpty: bytes.remove(at: position)
                case 2: bytes.insert(contentsOf: fragments.randomElement(using: &random)!.utf8, at: position)
                default: bytes.insert(UInt8.random(in: 0x20...0x7E, using: &random), at: position)
                }
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
