import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Bug 2: Alice's cached profile answers Bob's first request, for each of the article's four header variants.
enum CacheLeakScenario {
    /// One way the server marks the profile response.
    struct Variant: Sendable {
        let name: String
        let headers: [(name: String, value: String)]
    }

    static let variants = [
        Variant(name: "max-age", headers: [("Cache-Control", "max-age=60")]),
        Variant(name: "private", headers: [("Cache-Control", "private, max-age=60")]),
        Variant(name: "no-store", headers: [("Cache-Control", "no-store")]),
        Variant(name: "vary-authorization", headers: [("Cache-Control", "max-age=60"), ("Vary", "Authorization")]),
    ]

    static let scenarios = variants.map { variant in
        DemoScenario(id: "cache-leak/\(variant.name)") { _ in
            ScenarioResult(
                id: "cache-leak/\(variant.name)",
                naive: try await naive(variant),
                sessionKit: try await withSessionKit(variant)
            )
        }
    }

    private static func install(_ variant: Variant, on server: LocalServer) {
        server.route("GET", "/me/profile") { request in
            .json(#"{"name":"\#(DemoSupport.user(of: request))"}"#, headers: variant.headers)
        }
    }

    private static func headerText(_ variant: Variant) -> String {
        variant.headers.map { "\($0.name): \($0.value)" }.joined(separator: ", ")
    }

    /// The app's own cache layer, keyed by URL, over `URLCache.storeCachedResponse` and `cachedResponse(for:)`:
    /// what apps write on Linux, where Foundation caches nothing by itself. It honours `no-store`, as the header
    /// asks, and nothing else.
    static func naive(_ variant: Variant) async throws -> Verdict {
        try await LocalServer.withRunning { server in
            install(variant, on: server)
            let cache = URLCache(memoryCapacity: 1_000_000, diskCapacity: 0, diskPath: nil)
            let urlSession = DemoSupport.appURLSession()
            defer { urlSession.invalidateAndCancel() }
            func profile(as user: String) async throws -> String {
                let request = DemoSupport.get(server, "/me/profile", token: "token-\(user)")
                if let cached = cache.cachedResponse(for: request) { return DemoSupport.text(cached.data) }
                let (data, response) = try await urlSession.data(for: request)
                let cacheControl = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Control") ?? ""
                if !cacheControl.contains("no-store") {
                    cache.storeCachedResponse(CachedURLResponse(response: response, data: data), for: request)
                }
                return DemoSupport.text(data)
            }
            _ = try await profile(as: "alice")
            // Alice signs out, Bob signs in; the app keeps its cache.
            let bobSees = try await profile(as: "bob")
            let leaked = bobSees.contains("alice")
            let hits = DemoSupport.count(server.requests.count, "server request")
            var detail =
                leaked
                ? "Bob was shown Alice's profile from the app's URL-keyed cache (\(hits))"
                : "Bob got his own profile (\(hits))"
            if leaked && variant.headers.contains(where: { $0.name == "Vary" }) {
                #if canImport(FoundationNetworking)
                    detail += "; on Linux, FoundationNetworking's URLCache ignores Vary in cachedResponse(for:)"
                #else
                    detail += "; URLCache did not apply Vary to this lookup"
                #endif
            }
            return Verdict(leaked: leaked, detail: "\(headerText(variant)): \(detail)")
        }
    }

    /// Each session has its own ``ResponseCache``; Alice reads her profile twice, signs out, Bob reads his.
    static func withSessionKit(_ variant: Variant) async throws -> Verdict {
        try await LocalServer.withRunning { server in
            install(variant, on: server)
            let manager = DemoSupport.manager()
            let aliceSession = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice"))
            for _ in 0..<2 { _ = try await aliceSession.data(for: DemoSupport.get(server, "/me/profile")) }
            await manager.signOut(options: .localOnly)
            let bobSession = try await manager.signIn(DemoSupport.bob, tokens: DemoSupport.tokens("bob"))
            let (data, _) = try await bobSession.data(for: DemoSupport.get(server, "/me/profile"))
            await manager.signOut(options: .localOnly)
            let bobSees = DemoSupport.text(data)
            let aliceHits = server.requests.filter { DemoSupport.user(of: $0) == "alice" }.count
            let leaked = bobSees.contains("alice")
            let cacheNote =
                aliceHits == 1
                ? "Alice's second read came from her own session's cache"
                : "Alice's reads both went to the server"
            return Verdict(
                leaked: leaked,
                detail: leaked
                    ? "Bob was shown Alice's profile"
                    : "Bob got his own profile; \(cacheNote); her cache ended with her session"
            )
        }
    }
}
