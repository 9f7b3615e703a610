import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Bug 1: Alice's slow load is in flight when she signs out and Bob signs in; its response lands afterwards.
enum LateResponseScenario {
    static let scenario = DemoScenario(id: "late-response") { _ in
        ScenarioResult(id: "late-response", naive: try await naive(), sessionKit: try await withSessionKit())
    }

    /// A server whose `/me/loans` answers with the loans of the token's user, holding Alice's at `gate`.
    private static func install(on server: LocalServer, gate: Gate) {
        server.route("GET", "/me/loans") { request in
            let user = DemoSupport.user(of: request)
            if user == "alice" { await gate.wait() }
            return .json(#"["\#(user)'s loan"]"#)
        }
    }

    private static func decodeLoans(_ data: Data) throws -> [String] {
        try JSONDecoder().decode([String].self, from: data)
    }

    /// One place for the signed-in user's data, loaded by a plain async method that commits whatever returns.
    private final class NaiveStore: Sendable {
        let user = Shared<String?>(nil)
        let loans = Shared<[String]>([])

        func login(_ name: String) { user.update { $0 = name } }

        func logout() {
            user.update { $0 = nil }
            loans.update { $0 = [] }
        }

        func loadLoans(from server: LocalServer, session: URLSession) async throws {
            guard let name = user.value else { return }
            let (data, _) = try await session.data(for: DemoSupport.get(server, "/me/loans", token: "token-\(name)"))
            let decoded = try LateResponseScenario.decodeLoans(data)
            loans.update { $0 = decoded }  // who is signed in now is never checked
        }
    }

    static func naive() async throws -> Verdict {
        let gate = Gate()
        return try await LocalServer.withRunning { server in
            install(on: server, gate: gate)
            let urlSession = DemoSupport.appURLSession()
            defer { urlSession.invalidateAndCancel() }
            let store = NaiveStore()
            store.login("alice")
            let load = Task { try await store.loadLoans(from: server, session: urlSession) }
            await gate.waitForArrivals(1)  // Alice's request is at the server
            store.logout()
            store.login("bob")
            gate.open()
            try await load.value
            let shown = store.loans.value
            let leaked = store.user.value == "bob" && shown.contains { $0.hasPrefix("alice") }
            return Verdict(
                leaked: leaked,
                detail: leaked
                    ? "Alice's response landed after Bob signed in and was committed: Bob's screen shows \(DemoSupport.list(shown))"
                    : "Bob's screen shows \(DemoSupport.list(shown))"
            )
        }
    }

    static func withSessionKit() async throws -> Verdict {
        let gate = Gate()
        return try await LocalServer.withRunning { server in
            install(on: server, gate: gate)
            let manager = DemoSupport.manager()
            let loans = SessionScoped<[String]>(empty: [])
            manager.register(loans)
            let aliceSession = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice"))
            let load = Task { () -> String in
                do {
                    let (data, _) = try await aliceSession.data(for: DemoSupport.get(server, "/me/loans"))
                    return loans.commit(try decodeLoans(data), from: aliceSession) ? "was committed" : "was refused"
                } catch {
                    return "ended with \(DemoSupport.describe(error))"
                }
            }
            await gate.waitForArrivals(1)
            let report = await manager.signOut(options: .localOnly)
            let bobSession = try await manager.signIn(DemoSupport.bob, tokens: DemoSupport.tokens("bob"))
            gate.open()
            let aliceOutcome = await load.value
            let (data, _) = try await bobSession.data(for: DemoSupport.get(server, "/me/loans"))
            loans.commit(try decodeLoans(data), from: bobSession)
            let shown = loans.value
            await manager.signOut(options: .localOnly)
            return Verdict(
                leaked: shown.contains { $0.hasPrefix("alice") },
                detail:
                    "sign-out cancelled \(DemoSupport.count(report?.cancelledRequests ?? 0, "request")); Alice's load "
                    + "\(aliceOutcome); Bob's screen shows \(DemoSupport.list(shown))"
            )
        }
    }
}
