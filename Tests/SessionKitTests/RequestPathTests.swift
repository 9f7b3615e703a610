import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The shortcuts of `data(for:)`'s request path keep the cache's behaviour: an empty cache is not consulted but
/// still stores what it may, an answer that may not be stored still replaces what was stored, and the one
/// outgoing request an exchange builds sends an attempt's validators with that attempt only.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct RequestPathTests {
    /// The first answer lands in an empty cache (the lookup was skipped): it is stored all the same, and answers
    /// the second request without the server.
    @Test func aStorableAnswerIsStoredWhenTheCacheWasEmpty() async throws {
        try await LocalServer.withRunning { server in
            server.route("/profile") { _ in .json(#"{"n":1}"#, headers: [("Cache-Control", "private, max-age=3600")]) }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            #expect(session.cache.count == 0)
            let (first, _) = try await session.data(for: get(server, "/profile"))
            let (second, response) = try await session.data(for: get(server, "/profile"))
            #expect(first == second)
            #expect(response.statusCode == 200)
            #expect(server.requests.count == 1, "the second request went to the server: nothing was stored")
        }
    }

    /// The app removes what the session cached for one URL (it learned of a change by a push): the next request
    /// for that URL asks the server, another URL is still answered from the cache; emptying the cache sends both.
    @Test func removingCachedResponsesForAURLSendsItsNextRequestAndKeepsTheOthers() async throws {
        try await LocalServer.withRunning { server in
            for path in ["/profile", "/settings"] {
                server.route(path) { _ in .json("{}", headers: [("Cache-Control", "private, max-age=3600")]) }
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            _ = try await session.data(for: get(server, "/profile"))
            _ = try await session.data(for: get(server, "/settings"))
            #expect(session.cachedResponseCount == 2)

            session.removeCachedResponses(for: try #require(get(server, "/profile#top").url))
            #expect(session.cachedResponseCount == 1)
            _ = try await session.data(for: get(server, "/profile"))
            _ = try await session.data(for: get(server, "/settings"))
            #expect(server.requests.map(\.path) == ["/profile", "/settings", "/profile"])

            session.removeAllCachedResponses()
            #expect(session.cachedResponseCount == 0)
            _ = try await session.data(for: get(server, "/profile"))
            _ = try await session.data(for: get(server, "/settings"))
            #expect(server.requests.count == 5)
        }
    }

    /// A stored response that needs validation is validated once; the server's `no-store` answer to that request
    /// replaces it, so the next request is sent without validators (nothing is left to validate).
    @Test func aNoStoreAnswerReplacesTheStoredResponse() async throws {
        let answers = Lock(0)
        try await LocalServer.withRunning { server in
            server.route("/profile") { _ in
                let answer = answers.withLock { count -> Int in
                    count += 1
                    return count
                }
                let control = answer == 1 ? "private, no-cache" : "no-store"
                return .json(#"{"n":\#(answer)}"#, headers: [("Cache-Control", control), ("ETag", "\"v1\"")])
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            _ = try await session.data(for: get(server, "/profile"))
            #expect(session.cache.count == 1)
            _ = try await session.data(for: get(server, "/profile"))
            _ = try await session.data(for: get(server, "/profile"))
            let validators = server.requests.map { $0.header("If-None-Match") }
            #expect(validators == [nil, "\"v1\"", nil])
            #expect(session.cache.count == 0)
        }
    }

    /// A 304 answers with the stored body.
    @Test func aNotModifiedAnswerIsServedFromTheCache() async throws {
        try await LocalServer.withRunning { server in
            server.route("/profile") { request in
                if request.header("If-None-Match") == "\"v1\"" { return LocalServer.Response(status: 304) }
                return .json(#"{"n":1}"#, headers: [("Cache-Control", "private, no-cache"), ("ETag", "\"v1\"")])
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            defer { session.end() }
            let (first, _) = try await session.data(for: get(server, "/profile"))
            let (second, response) = try await session.data(for: get(server, "/profile"))
            #expect(response.statusCode == 200)
            #expect(second == first)
            #expect(server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\""])
        }
    }

    /// The entry a validation was for is evicted while the request is in flight: the 304 cannot be used, and the
    /// request is sent again without the validators the first attempt carried.
    @Test func theRetryAfterAnUnusableNotModifiedCarriesNoValidators() async throws {
        let sessionBox = Lock<UserSession?>(nil)
        try await LocalServer.withRunning { server in
            server.route("/profile") { request in
                if request.header("If-None-Match") != nil {
                    sessionBox.withLock { $0 }?.cache.removeAll()
                    return LocalServer.Response(status: 304)
                }
                return .json(#"{"n":1}"#, headers: [("Cache-Control", "private, no-cache"), ("ETag", "\"v1\"")])
            }
            let session = UserSession(account: alice, tokens: tokens("alice"))
            sessionBox.withLock { $0 = session }
            defer { session.end() }
            _ = try await session.data(for: get(server, "/profile"))
            let (body, response) = try await session.data(for: get(server, "/profile"))
            #expect(response.statusCode == 200)
            #expect(String(decoding: body, as: UTF8.self) == #"{"n":1}"#)
            #expect(server.requests.map { $0.header("If-None-Match") } == [nil, "\"v1\"", nil])
        }
    }
}
