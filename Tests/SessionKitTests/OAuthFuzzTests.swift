import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// A seeded fuzz test over every OAuth parser: each must answer a value or a typed `SessionError` (or `nil` where
/// its API says so) for any input, never trap, never hang, and keep its invariants.
///
/// `SESSIONKIT_FUZZ_INPUTS` sets the number of inputs (5,000 by default, 100,000 under scripts/test), split evenly
/// across the targets; `SESSIONKIT_SEED` replays a run. The seed is printed on one line, and every failure names
/// the seed, the target and the input's index.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(30, by: "SESSIONKIT_FUZZ_INPUTS", reference: 100_000))))
struct OAuthFuzzTests {
    @Test func everyParserAnswersAValueOrATypedErrorForAnyInput() {
        let environment = ProcessInfo.processInfo.environment
        let total = environment["SESSIONKIT_FUZZ_INPUTS"].flatMap { Int($0) }.map { max($0, 0) } ?? 5_000
        let seed = environment["SESSIONKIT_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        print("fuzz: \(total) inputs, seed: \(seed)")

        var fuzzer = Fuzzer(seed: seed)
        let targets = Fuzzer.Target.allCases
        var counts: [Fuzzer.Target: Int] = [:]
        for index in 0..<total {
            let target = targets[index % targets.count]
            fuzzer.context = "fuzz seed \(seed), target \(target), input #\(index)"
            fuzzer.run(target)
            counts[target, default: 0] += 1
            if fuzzer.issues >= 20 { break }
        }
        // Every target ran, and with enough inputs every parser both accepted and refused some: the inputs reach
        // past the first check, so the invariants above were exercised on values, not only on errors.
        if total >= targets.count, fuzzer.issues < 20 {
            #expect(counts.count == targets.count)
        }
        if total >= 5_000 {
            for target in Fuzzer.Target.parsers {
                #expect(fuzzer.accepted[target, default: 0] > 0, "\(target) accepted nothing")
                #expect(fuzzer.refused[target, default: 0] > 0, "\(target) refused nothing")
            }
        }
    }

    @Test func mutationsAreReproducibleFromTheSeed() {
        var first = Fuzzer(seed: 42)
        var second = Fuzzer(seed: 42)
        let base = Array(#"{"access_token":"SECRET-1","token_type":"Bearer"}"#.utf8)
        for _ in 0..<100 { #expect(first.mutate(base) == second.mutate(base)) }
    }
}

/// SplitMix64: small, fast, and the same sequence on every platform for a seed (the fuzz suites share it).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private struct Fuzzer {
    enum Target: CaseIterable {
        case tokenResponse, errorResponse, bearerChallenge, deviceResponse, devicePolling, jwt, callback, pkce, json
        case base64URL, formEncoding, requestBuilders

        /// The targets that read untrusted input and so both accept and refuse.
        static let parsers: [Target] = [
            .tokenResponse, .errorResponse, .bearerChallenge, .deviceResponse, .jwt, .callback, .pkce, .json,
            .base64URL,
        ]
    }

    private var random: SplitMix64
    var context = ""
    private(set) var issues = 0
    private(set) var accepted: [Target: Int] = [:]
    private(set) var refused: [Target: Int] = [:]
    private var current = Target.tokenResponse

    private static let marker = "SECRET"
    private static let instant = ContinuousClock.now
    private static let wall = Date(timeIntervalSince1970: 1_700_000_000)

    init(seed: UInt64) {
        random = SplitMix64(state: seed)
    }

    // MARK: running

    mutating func run(_ target: Target) {
        current = target
        switch target {
        case .tokenResponse: fuzzTokenResponse()
        case .errorResponse: fuzzErrorResponse()
        case .bearerChallenge: fuzzBearerChallenge()
        case .deviceResponse: fuzzDeviceResponse()
        case .devicePolling: fuzzDevicePolling()
        case .jwt: fuzzJWT()
        case .callback: fuzzCallback()
        case .pkce: fuzzPKCE()
        case .json: fuzzJSON()
        case .base64URL: fuzzBase64URL()
        case .formEncoding: fuzzFormEncoding()
        case .requestBuilders: fuzzRequestBuilders()
        }
    }

    private mutating func fail(_ message: String, input: [UInt8]) {
        issues += 1
        let shown = input.prefix(200).map { String(format: "%02x", $0) }.joined()
        Issue.record("\(context): \(message); input (\(input.count) bytes, hex prefix): \(shown)")
    }

    private mutating func count(accepted isAccepted: Bool) {
        if isAccepted {
            accepted[current, default: 0] += 1
        } else {
            refused[current, default: 0] += 1
        }
    }

    /// Runs `body`, failing on any error that is not a `SessionError`.
    private mutating func typed<T>(_ input: [UInt8], _ body: () throws -> T) -> Result<T, SessionError>? {
        do {
            let value = try body()
            count(accepted: true)
            return .success(value)
        } catch let error as SessionError {
            count(accepted: false)
            return .failure(error)
        } catch {
            fail("threw \(type(of: error)), not a SessionError", input: input)
            return nil
        }
    }

    // MARK: inputs

    private mutating func chance(_ percent: Int) -> Bool {
        Int.random(in: 0..<100, using: &random) < percent
    }

    private mutating func pick<T>(_ options: [T]) -> T {
        options[Int.random(in: 0..<options.count, using: &random)]
    }

    private static let fragments: [[UInt8]] =
        [
            "\"", "\\", ",", "\u{0}", ":", "{", "}", "[", "]", "=", "%", "+", "&", ".", " ", "\t", "\r\n", "1e999",
            "-1",
            "99999999999999999999999999", "1e308", "0.5", "-0", "null", "true", "\"\"", "[]", "{}", "\\ud800",
            "\\u0000",
            "\\\"", "\"access_token\":\"SECRET-x\",", "%00", "%ZZ", "%C3", "Bearer ", "error=", "realm=\"", "é", "😀",
            "\u{202E}", "\"expires_in\":\"3600\",", "\"token_type\":\"bearer\",",
        ].map { Array($0.utf8) } + [[0xFF], [0xC3], [0xE2, 0x98], [0xED, 0xA0, 0x80]]

    /// A mutation of `input`: one to four byte flips, truncations, insertions, deletions or duplications.
    mutating func mutate(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0 where !bytes.isEmpty:
                let at = min(position, bytes.count - 1)
                bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1:
                bytes.removeSubrange(position...)
            case 2, 3:
                bytes.insert(contentsOf: pick(Self.fragments), at: position)
            case 4 where !bytes.isEmpty:
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &random))
                bytes.removeSubrange(min(position, end)..<end)
            case 5 where !bytes.isEmpty:
                let start = Int.random(in: 0..<bytes.count, using: &random)
                let end = min(bytes.count, start + Int.random(in: 1...32, using: &random))
                bytes.insert(contentsOf: bytes[start..<end], at: position)
            case 6:
                let depth =
                    chance(2) ? Int.random(in: 1_000...100_000, using: &random) : Int.random(in: 1...64, using: &random)
                bytes.insert(contentsOf: [UInt8](repeating: pick([0x5B, 0x7B]), count: depth), at: position)
            case 7:
                let length =
                    chance(2)
                    ? Int.random(in: 10_000...70_000, using: &random) : Int.random(in: 1...300, using: &random)
                bytes.insert(contentsOf: [UInt8](repeating: pick(Array("a\\\"9,= ".utf8)), count: length), at: position)
            case 8 where !bytes.isEmpty:
                let at = min(position, bytes.count - 1)
                bytes[at] = pick(Array("\"\\,{}[]:= \u{0}%+&.".utf8) + [0xFF, 0x80])
            default:
                bytes.insert(UInt8.random(in: 0...255, using: &random), at: position)
            }
        }
        return bytes
    }

    private mutating func randomBytes() -> [UInt8] {
        (0..<Int.random(in: 0...256, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
    }

    /// A random JSON value text, often of the wrong type for wherever it lands.
    private mutating func randomJSON(depth: Int = 0) -> String {
        switch Int.random(in: 0..<(depth > 3 ? 5 : 7), using: &random) {
        case 0: return pick(["0", "-1", "3600", "1.5", "-0", "1e3", "1e308", "99999999999999999999", "315360001"])
        case 1: return pick(["\"\"", "\"3600\"", "\"bearer\"", "\"SECRET-v\"", "\"a b\"", "\"\\u00e9\\n\"", "\" 1\""])
        case 2: return pick(["true", "false"])
        case 3: return "null"
        case 4: return "\"" + String(repeating: "x", count: Int.random(in: 0...40, using: &random)) + "\""
        case 5:
            return "["
                + (0..<Int.random(in: 0...3, using: &random)).map { _ in randomJSON(depth: depth + 1) }
                .joined(separator: ",") + "]"
        default:
            return "{"
                + (0..<Int.random(in: 0...3, using: &random)).map { index in
                    "\"k\(index)\":" + randomJSON(depth: depth + 1)
                }.joined(separator: ",") + "}"
        }
    }

    /// A JSON object with some of `fields`, each either one of its valid values or random JSON.
    private mutating func object(_ fields: [(String, [String])]) -> [UInt8] {
        var members: [String] = []
        for (name, valid) in fields where chance(85) {
            members.append("\"\(name)\":" + (chance(70) ? pick(valid) : randomJSON()))
        }
        if chance(10) { members.append("\"unknown\":" + randomJSON()) }
        return Array(("{" + members.shuffled(using: &random).joined(separator: ",") + "}").utf8)
    }

    /// A structured input, a mutation of a valid one, or random bytes.
    private mutating func input(valid: [[UInt8]], structured: (inout Fuzzer) -> [UInt8]) -> [UInt8] {
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<10: return randomBytes()
        case 10..<40: return structured(&self)
        case 40..<45: return pick(valid)
        default: return mutate(chance(50) ? pick(valid) : structured(&self))
        }
    }

    private static func count(_ needle: String, in bytes: [UInt8]) -> Int {
        String(decoding: bytes, as: UTF8.self).components(separatedBy: needle).count - 1
    }

    // MARK: targets

    private static let tokenResponses = [
        #"{"access_token":"SECRET-2YotnFZFEjr1zCsicMWpAA","token_type":"Bearer","expires_in":3600,"refresh_token":"SECRET-tGzv3JOkF0XG5Qx2TlKWIA","scope":"read write"}"#,
        #"{"access_token":"SECRET-a","token_type":"bearer","expires_in":"3599","id_token":"SECRET.b.c"}"#,
        #"{"access_token":"SECRET-a","token_type":"Bearer","scope":["a","b"],"expires_in":null,"refresh_token":""}"#,
    ].map { Array($0.utf8) }

    private mutating func tokenResponseInput() -> [UInt8] {
        input(valid: Self.tokenResponses) { fuzzer in
            fuzzer.object([
                (
                    "access_token",
                    ["\"SECRET-at\"", "\"SECRET-a+b/c=\"", "\"\"", "\"SECRET a\"", "\"SECRET\\u0000\"", "\"SECRET-é\""]
                ),
                ("token_type", ["\"Bearer\"", "\"bearer\"", "\"DPoP\""]),
                ("expires_in", ["3600", "\"3600\"", "0", "315360000", "1e300"]),
                ("refresh_token", ["\"SECRET-rt\"", "null"]),
                ("scope", ["\"openid profile\"", "[\"a\",\"b\"]"]),
                ("id_token", ["\"SECRET.jwt.sig\""]),
            ])
        }
    }

    private mutating func fuzzTokenResponse() {
        let bytes: [UInt8]
        if chance(1) {
            // Over the size limit: refused before parsing.
            bytes =
                Array(#"{"access_token":"SECRET-big","token_type":"Bearer","pad":""#.utf8)
                + [UInt8](repeating: 0x61, count: OAuthLimits.maximumBodyBytes) + Array(#""}"#.utf8)
        } else {
            bytes = tokenResponseInput()
        }
        let status = chance(85) ? 200 : pick([201, 204, 302, 400, 401, 404, 408, 429, 500, 503, -1, 0, 99, 999])
        let parse = {
            try TokenResponse.parse(
                data: Data(bytes), statusCode: status, receivedAt: Self.instant, receivedAtWall: Self.wall,
                retryAfter: .seconds(1))
        }
        guard let result = typed(bytes, parse) else { return }
        switch result {
        case .success(let tokens):
            if status != 200 { fail("a \(status) gave tokens", input: bytes) }
            if tokens.accessToken.isEmpty || !tokens.accessToken.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
                fail("an access token that is empty or not visible ASCII", input: bytes)
            }
            if tokens.tokenType != "Bearer" { fail("token type \(tokens.tokenType)", input: bytes) }
            if let lifetime = tokens.lifetime,
                lifetime < .seconds(1) || lifetime > .seconds(OAuthLimits.maximumLifetimeSeconds)
            {
                fail("lifetime \(lifetime) out of range", input: bytes)
            }
            if tokens.expiresAt != tokens.lifetime.map({ Self.instant.advanced(by: $0) }) {
                fail("expiry not measured from receipt", input: bytes)
            }
            if tokens.refreshToken == "" || tokens.idToken == "" || tokens.scope == "" {
                fail("an empty optional member was kept", input: bytes)
            }
            if let again = try? parse(), again != tokens { fail("re-parsing gave another token set", input: bytes) }
        case .failure(let error):
            if status == 200, error.code != .malformedTokenResponse {
                fail("200 failed with \(error.code)", input: bytes)
            }
            if status != 200, !(200..<300).contains(status),
                error != OAuthErrorResponse.classify(statusCode: status, body: Data(bytes), retryAfter: .seconds(1))
            {
                fail("a failure status was not classified", input: bytes)
            }
            // A mutation that copied a token elsewhere may legitimately put it in a shown token_type.
            let copied = Self.count(Self.marker, in: bytes) > 1
            if !copied, error.message.contains(Self.marker) || error.description.contains(Self.marker) {
                fail("a token reached an error message: \(error.message)", input: bytes)
            }
        }
    }

    private static let errorResponses = [
        #"{"error":"invalid_grant","error_description":"The refresh token expired","error_uri":"https://e.example/e"}"#,
        #"{"error":"slow_down"}"#, #"{"error":"invalid_client","error_description":"a\nb\u202Ec"}"#,
    ].map { Array($0.utf8) }

    private mutating func fuzzErrorResponse() {
        let bytes = input(valid: Self.errorResponses) { fuzzer in
            fuzzer.object([
                ("error", ["\"invalid_grant\"", "\"access_denied\"", "\"server_error\"", "\"x\\\"y\"", "\"\""]),
                ("error_description", ["\"Something went wrong\"", "\"a\\u0000b\\nc\""]),
                ("error_uri", ["\"https://e.example\""]),
            ])
        }
        let parsed = OAuthErrorResponse.parse(Data(bytes))
        count(accepted: parsed != nil)
        if let response = parsed {
            if !OAuthErrorResponse.isValidErrorCode(response.error) { fail("invalid error code kept", input: bytes) }
            for text in [response.errorDescription, response.errorURI].compactMap({ $0 }) {
                if text.isEmpty || text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                    fail("uncleaned server text", input: bytes)
                }
            }
            if (response.errorDescription?.count ?? 0) > OAuthLimits.maximumDescriptionLength + 1 {
                fail("description not truncated", input: bytes)
            }
            if OAuthErrorResponse.parse(Data(bytes)) != response { fail("re-parsing differs", input: bytes) }
        }
        let status = Int.random(in: -10...700, using: &random)
        let error = OAuthErrorResponse.classify(statusCode: status, body: Data(bytes), retryAfter: .seconds(2))
        if status == 429 || (500...599).contains(status) {
            if error.code != .providerOutage || error.retryAfter != .seconds(2) {
                fail("\(status) classified as \(error.code)", input: bytes)
            }
        } else if !(400...499).contains(status), error.code != .malformedResponse {
            fail("\(status) classified as \(error.code)", input: bytes)
        }
        if let code = error.oauthError, !OAuthErrorResponse.isValidErrorCode(code) {
            fail("invalid oauthError", input: bytes)
        }
        if error.message.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            fail("control character in a message", input: bytes)
        }
    }

    private static let challenges = [
        #"Bearer realm="example", error="invalid_token", error_description="The access token expired""#,
        #"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple", Bearer scope="a b""#,
        #"Basic dXNlcjpwYXNz==, Bearer error=insufficient_scope, resource_metadata="https://r.example/m""#,
    ].map { Array($0.utf8) }

    private mutating func fuzzBearerChallenge() {
        let bytes = input(valid: Self.challenges) { fuzzer in
            var header = ""
            for _ in 0..<Int.random(in: 1...3, using: &fuzzer.random) {
                header += fuzzer.pick(["Bearer", "bearer", "Basic", "Newauth", ""]) + fuzzer.pick([" ", "", "  "])
                for _ in 0..<Int.random(in: 0...3, using: &fuzzer.random) {
                    let name = fuzzer.pick(["realm", "error", "scope", "ERROR", "x", ""])
                    let value = fuzzer.pick(["invalid_token", "\"a \\\" b\"", "\"\"", "\"unterminated", "tok68=="])
                    header += name + fuzzer.pick(["=", " = ", ""]) + value + fuzzer.pick([", ", ",", " ", ""])
                }
                header += fuzzer.pick([", ", ",,", ""])
            }
            return Array(header.utf8)
        }
        let header = String(decoding: bytes, as: UTF8.self)
        let parsed = BearerChallenge.parse(header)
        count(accepted: parsed != nil)
        guard let challenge = parsed else { return }
        if BearerChallenge.parse(header) != challenge { fail("parsing is not deterministic", input: bytes) }
        for (name, value) in challenge.parameters {
            if name.isEmpty || name != name.lowercased() { fail("parameter name \(name)", input: bytes) }
            if value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) {
                fail("control character in a value", input: bytes)
            }
        }
        // Written back as quoted strings, the parameters read the same.
        let written =
            "Bearer "
            + challenge.parameters.map { name, value in
                let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
                    of: "\"", with: "\\\"")
                return "\(name)=\"\(escaped)\""
            }.joined(separator: ", ")
        if written.utf8.count <= OAuthLimits.maximumHeaderBytes, BearerChallenge.parse(written) != challenge {
            fail("re-parsing the written challenge differs", input: bytes)
        }
    }

    private static let deviceResponses = [
        #"{"device_code":"SECRET-GmRhmhcx","user_code":"WDJB-MJHT","verification_uri":"https://example.com/device","verification_uri_complete":"https://example.com/device?user_code=WDJB-MJHT","expires_in":1800,"interval":5}"#,
        #"{"device_code":"SECRET-d","user_code":"A","verification_url":"http://127.0.0.1/d","expires_in":"600"}"#,
    ].map { Array($0.utf8) }

    private mutating func deviceResponseInput() -> [UInt8] {
        input(valid: Self.deviceResponses) { fuzzer in
            fuzzer.object([
                ("device_code", ["\"SECRET-dc\""]), ("user_code", ["\"ABCD-EFGH\"", "\"a\\nb\""]),
                ("verification_uri", ["\"https://e.example/d\"", "\"javascript:x\"", "\"/rel\""]),
                ("verification_uri_complete", ["\"https://e.example/d?c=1\""]),
                ("expires_in", ["600", "\"600\"", "0"]), ("interval", ["5", "0", "\"7\""]),
            ])
        }
    }

    private mutating func fuzzDeviceResponse() {
        let bytes = deviceResponseInput()
        let status = chance(90) ? 200 : pick([201, 400, 401, 429, 503])
        let parse = { try DeviceAuthorizationResponse.parse(data: Data(bytes), statusCode: status) }
        guard let result = typed(bytes, parse) else { return }
        switch result {
        case .success(let response):
            if response.deviceCode.isEmpty || response.userCode.isEmpty { fail("empty code", input: bytes) }
            if response.interval < .seconds(1) || response.expiresIn < .seconds(1) { fail("timing", input: bytes) }
            for url in [response.verificationURI, response.verificationURIComplete].compactMap({ $0 }) {
                if !["http", "https"].contains(url.scheme?.lowercased() ?? "") { fail("unsafe URL", input: bytes) }
            }
            let shown = response.userCode + response.verificationURI.absoluteString
            if response.description.contains(response.deviceCode), !shown.contains(response.deviceCode),
                response.deviceCode.count >= 8
            {
                fail("device code in description", input: bytes)
            }
            if let again = try? parse(), again != response { fail("re-parsing differs", input: bytes) }
        case .failure(let error):
            if status == 200, error.code != .malformedResponse { fail("200 failed with \(error.code)", input: bytes) }
            if error.message.contains(Self.marker) { fail("a code reached a message", input: bytes) }
        }
    }

    private mutating func fuzzDevicePolling() {
        let authorization = DeviceAuthorizationResponse(
            deviceCode: "d", userCode: "u", verificationURI: URL(string: "https://e.example/d")!,
            expiresIn: .seconds(Int64.random(in: 1...2_000, using: &random)),
            interval: .seconds(Int64.random(in: 1...10, using: &random)))
        var state = DevicePollingState(authorization: authorization, receivedAt: Self.instant)
        var now = Duration.zero
        var previousInterval = state.interval
        var finished = false
        let polls = [#"{"error":"authorization_pending"}"#, #"{"error":"slow_down"}"#, #"{"error":"access_denied"}"#]
            .map { Array($0.utf8) }
        for _ in 0..<Int.random(in: 1...8, using: &random) {
            let body = chance(50) ? mutate(pick(polls)) : (chance(50) ? pick(polls) : tokenResponseInput())
            let next: DevicePollingState.Next
            if chance(10) {
                next = state.handleTransportFailure(at: Self.instant.advanced(by: now))
            } else {
                let status = pick([200, 400, 400, 400, 401, 429, 500, 503])
                let retryAfter = chance(20) ? Duration.seconds(Int64.random(in: 0...100, using: &random)) : nil
                next = state.handle(
                    statusCode: status, body: Data(body), receivedAt: Self.instant.advanced(by: now),
                    receivedAtWall: Self.wall, retryAfter: retryAfter)
            }
            if state.interval < previousInterval { fail("the interval shrank", input: body) }
            previousInterval = state.interval
            switch next {
            case .poll(let wait):
                if finished { fail("polling resumed after the end", input: body) }
                if wait < state.interval { fail("a wait shorter than the interval", input: body) }
                if Self.instant.advanced(by: now + wait) > state.deadline { fail("a poll after expiry", input: body) }
                now += wait
            case .finished(let tokens):
                if finished { fail("finished twice", input: body) }
                if tokens.accessToken.isEmpty { fail("empty access token", input: body) }
                finished = true
            case .failed(let error):
                if finished, error.code != .invalidInput { fail("a second result after the end", input: body) }
                finished = true
            }
            if state.isFinished != finished { fail("isFinished disagrees with the answers", input: body) }
        }
    }

    private static let jwts = [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        OAuthTestSupport.jwt(
            payload: #"{"iss":"https://id.example","sub":"42","name":"A\nB","nested":{"a":[1,2,{"b":null}]}}"#),
    ].map { Array($0.utf8) }

    private mutating func fuzzJWT() {
        let bytes = input(valid: Self.jwts) { fuzzer in
            let payload = fuzzer.object([
                ("iss", ["\"https://id.example\""]), ("sub", ["\"42\"", "\"\""]), ("name", ["\"Alice\""]),
                ("preferred_username", ["\"alice\""]), ("email", ["\"a@e\""]),
            ])
            let header = fuzzer.chance(90) ? Array(#"{"alg":"RS256"}"#.utf8) : fuzzer.randomBytes()
            return Array((Base64URL.encode(header) + "." + Base64URL.encode(payload) + ".c2ln").utf8)
        }
        let token = String(decoding: bytes, as: UTF8.self)
        guard let result = typed(bytes, { try JWT.claims(of: token) }) else { return }
        switch result {
        case .success(let claims):
            if (try? JWT.claims(of: token)) != claims { fail("re-parsing differs", input: bytes) }
            if let account = try? JWT.account(from: token) {
                if account.subject.isEmpty || account.issuer.isEmpty || account.displayName.isEmpty {
                    fail("an account with an empty part", input: bytes)
                }
            }
        case .failure(let error):
            if error.code != .malformedTokenResponse { fail("failed with \(error.code)", input: bytes) }
            if error.message.contains(String(token.prefix(12))), token.count >= 12 {
                fail("token text in a message", input: bytes)
            }
        }
        _ = typed(bytes) { try JWT.subject(of: token) }
        _ = typed(bytes) { try JWT.displayName(of: token) }
    }

    private static let callbacks = [
        "com.example.app:/cb?code=SECRET-SplxlOBeZQQYbYS6WxSbIA&state=xyz",
        "https://app.example/cb?error=access_denied&error_description=User+said+no&state=xyz&iss=https%3A%2F%2Fid.example",
        "app:/cb?state=xyz&code=a%2Bb&extra=%E2%98%83",
    ].map { Array($0.utf8) }

    private mutating func fuzzCallback() {
        let bytes = input(valid: Self.callbacks) { fuzzer in
            var query: [String] = []
            for _ in 0..<Int.random(in: 0...5, using: &fuzzer.random) {
                query.append(
                    fuzzer.pick(["code", "state", "error", "error_description", "iss", "x"]) + "="
                        + fuzzer.pick(["xyz", "SECRET-c", "", "access_denied", "server_error", "%ZZ", "a+b", "%0A"]))
            }
            return Array(("app:/cb?" + query.joined(separator: "&")).utf8)
        }
        guard let url = URL(string: String(decoding: bytes, as: UTF8.self)) else { return }
        let issuer = chance(50) ? "https://id.example" : nil
        guard
            let result = typed(
                bytes,
                { try AuthorizationResponse.parse(callbackURL: url, expectedState: "xyz", expectedIssuer: issuer) })
        else { return }
        if case .success(let code) = result, code.isEmpty { fail("an empty code", input: bytes) }
        if case .failure(let error) = result {
            // Only the server's own words (error, error_description) may appear in a message; never code or state.
            let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedQuery ?? ""
            let serverWords = (FormURLEncoding.decode(query) ?? []).filter {
                ["error", "error_description"].contains($0.name)
            }
            for secret in ["SECRET-c", "xyz"]
            where error.message.contains(secret) && !serverWords.contains(where: { $0.value.contains(secret) }) {
                fail("the code or the state reached a message: \(error.message)", input: bytes)
            }
        }
    }

    private mutating func fuzzPKCE() {
        let valid = [Array("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".utf8), Array(PKCE().verifier.utf8)]
        let bytes = input(valid: valid) { fuzzer in
            let alphabet = Array("ABCxyz019-._~+/= é".utf8)
            return (0..<Int.random(in: 0...140, using: &fuzzer.random)).map { _ in fuzzer.pick(alphabet) }
        }
        let verifier = String(decoding: bytes, as: UTF8.self)
        let expected =
            (43...128).contains(verifier.utf8.count)
            && verifier.utf8.allSatisfy { byte in
                byte < 0x80
                    && (Character(Unicode.Scalar(byte)).isLetter || Character(Unicode.Scalar(byte)).isNumber
                        || "-._~".utf8.contains(byte))
            }
        guard let result = typed(bytes, { try PKCE(verifier: verifier) }) else { return }
        switch result {
        case .success(let pkce):
            if !expected { fail("accepted an invalid verifier", input: bytes) }
            if pkce.challenge.count != 43 || pkce.method != "S256" { fail("bad challenge", input: bytes) }
        case .failure(let error):
            if expected { fail("refused a valid verifier", input: bytes) }
            if error.code != .invalidInput { fail("failed with \(error.code)", input: bytes) }
        }
    }

    private static let jsonDocuments = [
        #"{"a":[1,-2.5e3,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"],"b":{"c":{}}}"#, "[[[[1]]]]", #""s""#,
    ].map { Array($0.utf8) }

    private mutating func fuzzJSON() {
        let bytes = input(valid: Self.jsonDocuments) { fuzzer in Array(fuzzer.randomJSON().utf8) }
        let parsed = try? JSONParser.parse(bytes)
        count(accepted: parsed != nil)
        guard let value = parsed else { return }
        let written = OAuthTestSupport.serialize(value)
        if (try? JSONParser.parse(Array(written.utf8))) != value {
            fail("re-parsing the written value differs", input: bytes)
        }
    }

    private mutating func fuzzBase64URL() {
        let bytes = input(valid: [Array("SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c".utf8), Array("e30=".utf8)]) {
            fuzzer in Array(Base64URL.encode(fuzzer.randomBytes()).utf8)
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = Base64URL.decode(text)
        count(accepted: parsed != nil)
        guard let decoded = parsed else { return }
        let unpadded = text.hasSuffix("=") ? String(text.prefix { $0 != "=" }) : text
        if Base64URL.encode(decoded) != unpadded { fail("decoding is not canonical", input: bytes) }
    }

    private mutating func randomText() -> String {
        let scalars: [Unicode.Scalar] = [
            "a", "Z", "0", "+", "/", "=", "&", "%", " ", "~", "é", "☃", "😀", "\n", "\u{0}",
        ]
        return String(String.UnicodeScalarView((0..<Int.random(in: 0...20, using: &random)).map { _ in pick(scalars) }))
    }

    private mutating func fuzzFormEncoding() {
        let pairs = (0..<Int.random(in: 0...5, using: &random)).map { _ in (name: randomText(), value: randomText()) }
        let encoded = FormURLEncoding.encode(pairs)
        guard let decoded = FormURLEncoding.decode(encoded) else {
            fail("could not decode its own encoding", input: Array(encoded.utf8))
            return
        }
        if decoded.map(\.name) != pairs.map(\.name) || decoded.map(\.value) != pairs.map(\.value) {
            fail("round trip differs", input: Array(encoded.utf8))
        }
        _ = FormURLEncoding.decode(String(decoding: mutate(Array(encoded.utf8)), as: UTF8.self))
    }

    private mutating func fuzzRequestBuilders() {
        let token = randomText()
        let endpoint = URL(string: pick(["https://id.example/t", "http://127.0.0.1:1/t", "http://id.example/t"]))!
        let grant = pick([
            TokenRequest.Grant.refreshToken(token, scope: chance(50) ? randomText() : nil), .deviceCode(token),
            .authorizationCode(
                code: token, codeVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", redirectURI: "a:/b"),
            .password(username: token, password: randomText(), scope: nil),
        ])
        let input = Array(token.utf8)
        if let result = typed(
            input, { try TokenRequest(grant: grant, clientID: "c", additionalParameters: ["x": token]) }),
            case .success(let request) = result
        {
            let decoded = FormURLEncoding.decode(String(decoding: request.body, as: UTF8.self))
            if decoded?.map(\.name) != request.formParameters.map(\.name)
                || decoded?.map(\.value) != request.formParameters.map(\.value)
            {
                fail("the token request body does not decode to its parameters", input: input)
            }
            if case .success(let urlRequest)? = typed(input, { try request.urlRequest(endpoint: endpoint) }),
                endpoint.host == "id.example", endpoint.scheme == "http"
            {
                fail("built a plain-http request to \(urlRequest.url?.host ?? "")", input: input)
            }
        }
        if let result = typed(
            input, { try RevocationRequest(token: token, tokenTypeHint: .refreshToken, clientID: "c") }),
            case .success(let request) = result
        {
            let decoded = FormURLEncoding.decode(String(decoding: request.body, as: UTF8.self))
            if decoded?.first?.value != token { fail("the revocation body does not carry the token", input: input) }
            let status = Int.random(in: 100...599, using: &random)
            let body = mutate(Array(#"{"error":"unsupported_token_type"}"#.utf8))
            let outcome = RevocationRequest.classify(statusCode: status, body: Data(body), retryAfter: .seconds(1))
            switch (status, outcome) {
            case (200..<300, .revoked), (429, .retryable(.seconds(1))), (503, .retryable(.seconds(1))),
                (400, .unsupportedTokenType):
                break
            case (_, .failed) where !(200..<300).contains(status) && status != 429 && status != 503:
                break
            default:
                fail("revocation status \(status) gave \(outcome)", input: body)
            }
        }
    }
}
