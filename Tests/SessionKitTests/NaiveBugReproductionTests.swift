import Foundation
import SessionKit
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The "before" picture: the three privacy bugs, reproduced with the naive code patterns apps write.
/// Each test passes *because the bug happens*; the suites after it show SessionKit preventing each one.
@Suite(.timeLimit(.minutes(TimeLimit.heavy))) struct NaiveBugReproductionTests {
    /// The naive store: one place for the current user's data, loaded with a plain async method.
    final class NaiveStore: Sendable {
        private let state = Lock<(user: String?, loans: [String])>((nil, []))
        var user: String? { state.withLock { $0.user } }
        var loans: [String] { state.withLock { $0.loans } }

        func login(_ user: String) { state.withLock { $0.user = user } }
        func logout() { state.withLock { $0 = (nil, []) } }

        func loadLoans(from server: LocalServer, session: URLSession) async throws {
            guard let user else { return }
            var request = URLRequest(url: server.url("/me/loans"))
            request.setValue("Bearer token-\(user)", forHTTPHeaderField: "Authorization")
            let (data, _) = try await session.data(for: request)
            let loans = try JSONDecoder().decode([String].self, from: data)
            state.withLock { $0.loans = loans }  // no check of who the user is now
        }
    }

    @Test func bug1LateResponseWritesIntoTheNextUsersState() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("/me/loans") { request in
                await gate.wait()
                return .json(#"["\#(user(of: request))'s loan"]"#)
            }
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.invalidateAndCancel() }
            let store = NaiveStore()
            store.login("alice")
            let load = Task { try await store.loadLoans(from: server, session: urlSession) }
            await gate.waitForArrivals(1)  // Alice's request is on the wire
            store.logout()
            store.login("bob")
            gate.open()
            try await load.value
            #expect(store.user == "bob")
            #expect(store.loans == ["alice's loan"], "the bug: Bob now sees Alice's loans")
        }
    }

    /// What a naive cache keyed by URL returns to Bob after Alice's response was stored, per header variant.
    struct CacheVariant: Sendable, CustomTestStringConvertible {
        let id: String
        let headers: [(name: String, value: String)]
        /// Whether Bob gets Alice's profile from the naive cache on this platform.
        let leaks: Bool
        var testDescription: String { id }
    }

    static let variants: [CacheVariant] = [
        CacheVariant(id: "max-age", headers: [("Cache-Control", "max-age=60")], leaks: true),
        CacheVariant(id: "private", headers: [("Cache-Control", "private, max-age=60")], leaks: true),
        CacheVariant(id: "no-store", headers: [("Cache-Control", "no-store")], leaks: false),
        // FoundationNetworking's URLCache ignores Vary in `cachedResponse(for:)` (measured here), so on Linux even
        // `Vary: Authorization` does not protect a cache the app fills by hand. Apple's URLCache checks it.
        CacheVariant(
            id: "vary-authorization",
            headers: [("Cache-Control", "max-age=60"), ("Vary", "Authorization")],
            leaks: true
        ),
    ]

    /// The pattern apps write on Linux, where Foundation caches nothing by itself: their own cache layer over
    /// `URLCache.storeCachedResponse` / `cachedResponse(for:)`, skipping `no-store` as the header says.
    @Test(arguments: variants)
    func bug2CacheKeyedByURLAnswersTheWrongUser(variant: CacheVariant) async throws {
        try await LocalServer.withRunning { server in
            server.route("/me/profile") { request in
                .json(#"{"name":"\#(user(of: request))"}"#, headers: variant.headers)
            }
            let cache = URLCache(memoryCapacity: 1_000_000, diskCapacity: 0, diskPath: nil)
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.invalidateAndCancel() }
            func naiveGet(as user: String) async throws -> String {
                var request = URLRequest(url: server.url("/me/profile"))
                request.setValue("Bearer token-\(user)", forHTTPHeaderField: "Authorization")
                if let cached = cache.cachedResponse(for: request) { return text(cached.data) }
                let (data, response) = try await urlSession.data(for: request)
                let cacheControl = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Control") ?? ""
                if !cacheControl.contains("no-store") {
                    cache.storeCachedResponse(CachedURLResponse(response: response, data: data), for: request)
                }
                return text(data)
            }
            let aliceProfile = try await naiveGet(as: "alice")
            // ... Alice signs out, Bob signs in; the app keeps its cache ...
            let bobProfile = try await naiveGet(as: "bob")
            #expect(aliceProfile == #"{"name":"alice"}"#)
            #if os(Linux)
                #expect((bobProfile == aliceProfile) == variant.leaks, "\(variant.id): Bob got \(bobProfile)")
                #expect(server.requests.count == (variant.leaks ? 1 : 2))
            #else
                if variant.id != "vary-authorization" {
                    #expect((bobProfile == aliceProfile) == variant.leaks, "\(variant.id): Bob got \(bobProfile)")
                }
            #endif
        }
    }

    /// Foundation on Linux stores nothing by itself: a URLSession with a URLCache does not show bug 2 alone.
    @Test func foundationOnLinuxCachesNothingByItself() async throws {
        try await LocalServer.withRunning { server in
            server.route("/me/profile") { request in
                .json(#"{"name":"\#(user(of: request))"}"#, headers: [("Cache-Control", "max-age=60")])
            }
            let configuration = URLSessionConfiguration.default
            configuration.urlCache = URLCache(memoryCapacity: 1_000_000, diskCapacity: 0, diskPath: nil)
            let urlSession = URLSession(configuration: configuration)
            defer { urlSession.invalidateAndCancel() }
            for user in ["alice", "bob"] {
                var request = URLRequest(url: server.url("/me/profile"))
                request.setValue("Bearer token-\(user)", forHTTPHeaderField: "Authorization")
                let (data, _) = try await urlSession.data(for: request)
                #expect(text(data) == #"{"name":"\#(user)"}"#)
            }
            #if os(Linux)
                #expect(server.requests.count == 2)
            #endif
        }
    }

    /// The naive token manager: one global "current token", refreshed in place.
    final class NaiveTokenManager: Sendable {
        let current = Lock<String?>(nil)

        func refresh(using server: LocalServer, session: URLSession) async throws {
            let (data, _) = try await session.data(for: URLRequest(url: server.url("/token")))
            current.withLock { $0 = text(data) }  // stored whoever is signed in now
        }

        func logout() { current.withLock { $0 = nil } }
    }

    @Test func bug3RefreshCompletingAfterLogoutSignsTheOldUserBackIn() async throws {
        let gate = Gate()
        try await LocalServer.withRunning { server in
            server.route("/token") { _ in
                await gate.wait()
                return .text("token-alice-refreshed")
            }
            server.route("/me") { request in .json(#"{"name":"\#(user(of: request))"}"#) }
            let urlSession = URLSession(configuration: .ephemeral)
            defer { urlSession.invalidateAndCancel() }
            let tokens = NaiveTokenManager()
            tokens.current.withLock { $0 = "token-alice" }
            let refresh = Task { try await tokens.refresh(using: server, session: urlSession) }
            await gate.waitForArrivals(1)
            tokens.logout()
            gate.open()
            try await refresh.value
            #expect(tokens.current.withLock { $0 } == "token-alice-refreshed", "the bug: a valid token is back")
            // The next request goes out as the old user.
            var request = URLRequest(url: server.url("/me"))
            if let token = tokens.current.withLock({ $0 }) {
                request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            }
            let (data, _) = try await urlSession.data(for: request)
            #expect(text(data) == #"{"name":"alice"}"#)
            #expect(server.requests.last?.bearerToken == "token-alice-refreshed")
        }
    }
}
