import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A response from Alice's previous session arrives after she signed in again.
///
/// Between her two sessions an administrator took away her admin role (that is why she signed in again). Her
/// profile response from the first session has been received and is being processed when she signs out and in;
/// then it is committed, or not. Naive code compares user names, which match; SessionKit compares sessions.
enum ReloginScenario {
    static let id = "relogin-same-user"
    static let scenario = DemoScenario(id: id) { _ in
        ScenarioResult(id: id, naive: try await naive(), sessionKit: try await withSessionKit())
    }

    /// The profile as the app keeps it, with the token that fetched it (so the check below is computed).
    struct Profile: Sendable, Equatable {
        var role: String
        var fetchedWith: String
    }

    /// A server whose `/me/profile` reports the token user's current role.
    private static func install(on server: LocalServer, roles: Shared<[String: String]>) {
        server.route("GET", "/me/profile") { request in
            let user = DemoSupport.user(of: request)
            let role = roles.value[user] ?? "none"
            return .json(#"{"user":"\#(user)","role":"\#(role)"}"#)
        }
    }

    private static func role(in data: Data) throws -> String {
        struct Body: Decodable { let role: String }
        return try JSONDecoder().decode(Body.self, from: data).role
    }

    static func naive() async throws -> Verdict {
        let roles = Shared(["alice": "admin"])
        return try await LocalServer.withRunning { server in
            install(on: server, roles: roles)
            let urlSession = DemoSupport.appURLSession()
            defer { urlSession.invalidateAndCancel() }
            let signedIn = Shared<(user: String, token: String)?>(("alice", "token-alice-1"))
            let profile = Shared<Profile?>(nil)
            let processing = Gate()
            let load = Task {
                guard let signed = signedIn.value else { return }
                let (user, token) = signed
                let (data, _) = try await urlSession.data(for: DemoSupport.get(server, "/me/profile", token: token))
                let loaded = Profile(role: try role(in: data), fetchedWith: token)
                await processing.wait()  // decoding, a hop to the main actor: Alice signs out and in meanwhile
                if signedIn.value?.user == user { profile.update { $0 = loaded } }  // same user name: commit
            }
            await processing.waitForArrivals(1)
            signedIn.update { $0 = nil }
            profile.update { $0 = nil }
            roles.update { $0["alice"] = "member" }
            signedIn.update { $0 = ("alice", "token-alice-2") }
            processing.open()
            try await load.value
            let shown = profile.value
            let leaked = shown != nil && shown?.fetchedWith != signedIn.value?.token
            return Verdict(
                leaked: leaked,
                detail: leaked
                    ? "the old session's response passed the user-name check: Alice's new session shows role "
                        + "\(shown?.role ?? "?"), which she lost before signing in again"
                    : "Alice's new session shows \(shown.map { "role \($0.role)" } ?? "nothing yet")"
            )
        }
    }

    static func withSessionKit() async throws -> Verdict {
        let roles = Shared(["alice": "admin"])
        return try await LocalServer.withRunning { server in
            install(on: server, roles: roles)
            let manager = DemoSupport.manager()
            let profile = SessionScoped<Profile?>(empty: nil)
            manager.register(profile)
            let first = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice-1"))
            let processing = Gate()
            let load = Task { () -> Bool in
                let (data, _) = try await first.data(for: DemoSupport.get(server, "/me/profile"))
                let loaded = Profile(role: try role(in: data), fetchedWith: "token-alice-1")
                await processing.wait()
                return profile.commit(loaded, from: first)  // identity of the session, not the user name
            }
            await processing.waitForArrivals(1)
            await manager.signOut(options: .localOnly)
            roles.update { $0["alice"] = "member" }
            let second = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice-2"))
            processing.open()
            let oldCommitted = try await load.value
            let (data, _) = try await second.data(for: DemoSupport.get(server, "/me/profile"))
            profile.commit(Profile(role: try role(in: data), fetchedWith: "token-alice-2"), from: second)
            let shown = profile.value
            await manager.signOut(options: .localOnly)
            let leaked = oldCommitted || shown?.fetchedWith != "token-alice-2"
            return Verdict(
                leaked: leaked,
                detail: "same account, another session: the old response was "
                    + (oldCommitted ? "committed" : "refused (\(first.serial) is not \(second.serial))")
                    + "; Alice's new session shows role \(shown?.role ?? "nothing")"
            )
        }
    }
}
