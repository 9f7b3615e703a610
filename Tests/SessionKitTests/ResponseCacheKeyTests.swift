import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct ResponseCacheKeyTests {
    /// The one-pass check may only accept what the careful rebuild leaves unchanged.
    @Test(arguments: [
        "http://127.0.0.1:8080/me", "http://127.0.0.1:80/me", "https://a.example:443/x", "http://a.example:443/x",
        "https://a.example:80/x", "http://a.example:080/x", "http://a.example:/x", "http://[::1]:8080/x",
        "http://user:pw@a.example:8080/x", "http://A.example:8080/x", "http://a.example:8080",
        "http://a.example:8080?q",
        "http://a.example:8080/x#f", "https://a.example:65535/", "https://a.example:123456/", "http://a.example/P?Q",
        "https://a.example", "HTTP://a.example/", "http://a.example:8x/",
    ])
    func theFastPathAgreesWithTheRebuild(_ uri: String) {
        if ResponseCacheKey.isNormalized(uri) {
            #expect(ResponseCacheKey.rebuilt(uri) == uri)
        }
    }

    @Test func explicitNonDefaultPortsTakeTheFastPath() {
        #expect(ResponseCacheKey.isNormalized("http://127.0.0.1:8080/me"))
        #expect(ResponseCacheKey.isNormalized("https://api.example:8443/v1/items?page=2"))
        #expect(ResponseCacheKey.isNormalized("http://a.example:443/x"))
        #expect(!ResponseCacheKey.isNormalized("http://a.example:80/x"))
        #expect(!ResponseCacheKey.isNormalized("https://a.example:443/x"))
        #expect(ResponseCacheKey.normalized(URL(string: "https://a.example:443/x")!) == "https://a.example/x")
        #expect(ResponseCacheKey.normalized(URL(string: "http://127.0.0.1:8080/me")!) == "http://127.0.0.1:8080/me")
    }
}
