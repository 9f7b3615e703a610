import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Two accounts signed in at once (work and personal). Alice's two-page sync is on page 1 when the user
/// switches to Bob; page 2 follows. The server's request log says whether every request carried the token of
/// the account whose work made it.
enum AccountSwitchScenario {
    static let id = "account-switch"
    static let scenario = DemoScenario(id: id) { _ in
        ScenarioResult(id: id, naive: try await naive(), sessionKit: try await withSessionKit())
    }

    /// `/sync?account=<whose work>&page=<n>` answers with the token user's items; Alice's page 1 waits at `gate`.
    private static func install(on server: LocalServer, gate: Gate) {
        server.route("GET", "/sync") { request in
            let account = request.queryItems.first { $0.name == "account" }?.value
            let page = request.queryItems.first { $0.name == "page" }?.value
            if account == "alice" && page == "1" { await gate.wait() }
            return .json(#"{"items":["\#(DemoSupport.user(of: request))'s item"]}"#)
        }
    }

    /// The requests whose token belongs to another account than the work that sent them.
    private static func crossed(_ server: LocalServer) -> (crossed: Int, total: Int) {
        let syncs = server.requests.filter { $0.path == "/sync" }
        let crossed = syncs.filter { request in
            request.queryItems.first { $0.name == "account" }?.value != DemoSupport.user(of: request)
        }
        return (crossed.count, syncs.count)
    }

    private static func path(_ account: String, page: Int) -> String { "/sync?account=\(account)&page=\(page)" }

    static func naive() async throws -> Verdict {
        let gate = Gate()
        return try await LocalServer.withRunning { server in
            install(on: server, gate: gate)
            let urlSession = DemoSupport.appURLSession()
            defer { urlSession.invalidateAndCancel() }
            // The app's one "current token", read by every request builder at the moment it builds.
            let currentToken = Shared("token-alice")
            func sync(_ account: String, page: Int) async throws {
                let token = currentToken.value
                _ = try await urlSession.data(for: DemoSupport.get(server, path(account, page: page), token: token))
            }
            let aliceSync = Task {
                try await sync("alice", page: 1)
                try await sync("alice", page: 2)
            }
            await gate.waitForArrivals(1)
            currentToken.update { $0 = "token-bob" }  // the user switches to Bob; Alice stays signed in
            try await sync("bob", page: 1)
            gate.open()
            try await aliceSync.value
            let (crossed, total) = crossed(server)
            return Verdict(
                leaked: crossed > 0,
                detail: crossed > 0
                    ? "after the switch, Alice's sync sent page 2 with Bob's token and stored Bob's items in "
                        + "Alice's account: \(crossed) of \(DemoSupport.count(total, "request")) carried another "
                        + "account's token"
                    : "every one of \(DemoSupport.count(total, "request")) carried its own account's token"
            )
        }
    }

    static func withSessionKit() async throws -> Verdict {
        let gate = Gate()
        return try await LocalServer.withRunning { server in
            install(on: server, gate: gate)
            let manager = DemoSupport.manager()
            let work = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice"))
            let aliceSync = Task {
                _ = try await work.data(for: DemoSupport.get(server, path("alice", page: 1)))
                _ = try await work.data(for: DemoSupport.get(server, path("alice", page: 2)))
            }
            await gate.waitForArrivals(1)
            let personal = try await manager.signIn(DemoSupport.bob, tokens: DemoSupport.tokens("bob"))  // switch
            _ = try await personal.data(for: DemoSupport.get(server, path("bob", page: 1)))
            gate.open()
            try await aliceSync.value
            let alive = manager.sessions.count
            await manager.signOut(work, options: .localOnly)
            await manager.signOut(personal, options: .localOnly)
            let (crossed, total) = crossed(server)
            return Verdict(
                leaked: crossed > 0,
                detail: "\(alive) sessions alive across the switch; "
                    + (crossed > 0
                        ? "\(crossed) of \(DemoSupport.count(total, "request")) carried another account's token"
                        : "all \(DemoSupport.count(total, "request")) carried the token of the session that made them")
            )
        }
    }
}
