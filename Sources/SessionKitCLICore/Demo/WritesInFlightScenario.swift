import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Three of Alice's writes are in flight when she signs out: a rating she just made, a large upload, a sync.
/// Then Bob signs in. The server's log says whose token each of Alice's writes carried.
enum WritesInFlightScenario {
    static let id = "writes-in-flight"
    static let scenario = DemoScenario(id: id) { _ in
        ScenarioResult(id: id, naive: try await naive(), sessionKit: try await withSessionKit())
    }

    /// The three writes: path, body (naming its author), and the status the server answers.
    private static let writes: [(path: String, status: Int)] = [("/rating", 200), ("/upload", 201), ("/sync", 200)]

    /// Alice's writes wait at their own gate (keyed by path); writes with any other token are answered at once.
    private static func install(on server: LocalServer, gates: [String: Gate]) {
        for write in writes {
            server.route("POST", write.path) { request in
                if request.bearerToken == "token-alice" { await gates[write.path]?.wait() }
                return .json("{}", status: write.status)
            }
        }
    }

    private static func body(_ path: String) -> String { #"{"by":"alice","write":"\#(path)"}"# }

    /// Writes whose body names one author and whose token names another.
    private static func crossed(_ server: LocalServer) -> Int {
        server.requests.filter { request in
            request.method == "POST" && request.bodyText.contains(#""by":"alice""#)
                && DemoSupport.user(of: request) != "alice"
        }.count
    }

    /// Naive sign-out cancels everything on the app's one URLSession; a write that failed goes into the app's
    /// retry queue, which is flushed later "as whoever is signed in".
    static func naive() async throws -> Verdict {
        let gates = Dictionary(uniqueKeysWithValues: writes.map { ($0.path, Gate()) })
        return try await LocalServer.withRunning { server in
            install(on: server, gates: gates)
            let currentToken = Shared<String?>("token-alice")
            let retryQueue = Shared<[URLRequest]>([])
            let urlSession = DemoSupport.appURLSession()
            let started = writes.map { write in
                Task {
                    var request = DemoSupport.post(server, write.path, body: body(write.path))
                    if let token = currentToken.value {
                        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                    }
                    do {
                        _ = try await urlSession.data(for: request)
                    } catch {
                        request.setValue(nil, forHTTPHeaderField: "Authorization")
                        retryQueue.update { $0.append(request) }  // "send it later"
                    }
                }
            }
            for gate in gates.values { await gate.waitForArrivals(1) }
            currentToken.update { $0 = nil }
            urlSession.invalidateAndCancel()  // sign-out: cancel everything
            for task in started { await task.value }
            let cancelled = retryQueue.value.compactMap { $0.url?.path }

            currentToken.update { $0 = "token-bob" }  // Bob signs in; the app flushes its retry queue
            let bobSession = DemoSupport.appURLSession()
            defer { bobSession.invalidateAndCancel() }
            let queued = retryQueue.value
            retryQueue.update { $0 = [] }
            for var request in queued {
                if let token = currentToken.value {
                    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
                }
                _ = try await bobSession.data(for: request)
            }
            let crossed = crossed(server)
            return Verdict(
                leaked: crossed > 0,
                detail:
                    "sign-out cancelled \(cancelled.count) of \(writes.count) writes (\(cancelled.joined(separator: ", "))) "
                    + "and the retry queue replayed them after Bob signed in: \(crossed) of Alice's writes reached "
                    + "the server with Bob's token"
            )
        }
    }

    static func withSessionKit() async throws -> Verdict {
        let gates = Dictionary(uniqueKeysWithValues: writes.map { ($0.path, Gate()) })
        return try await LocalServer.withRunning { server in
            install(on: server, gates: gates)
            let manager = DemoSupport.manager()
            let session = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice"))
            let policies: [String: WritePolicy] = [
                "/rating": .wait(.seconds(5)), "/upload": .handOff, "/sync": .discard,
            ]
            let started = writes.map { write in
                Task { () -> String in
                    do {
                        let request = DemoSupport.post(server, write.path, body: body(write.path))
                        let (_, response) = try await session.write(request, policy: policies[write.path] ?? .discard)
                        return "\(response.statusCode)"
                    } catch {
                        return DemoSupport.describe(error)
                    }
                }
            }
            for gate in gates.values { await gate.waitForArrivals(1) }
            let signOut = Task { await manager.signOut(options: .localOnly) }
            // Once the session is detached, sign-out is waiting for the rating; the server answers it.
            while manager.current != nil { await Task.yield() }
            gates["/rating"]?.open()
            let report = await signOut.value
            gates["/upload"]?.open()  // the handed-off upload finishes after sign-out
            gates["/sync"]?.open()
            var results: [String] = []
            for task in started { results.append(await task.value) }

            _ = try await manager.signIn(DemoSupport.bob, tokens: DemoSupport.tokens("bob"))
            let bobSees = manager.takeWriteReconciliations(for: DemoSupport.bob)
            let aliceKept = manager.writeReconciliations(for: DemoSupport.alice)
            await manager.signOut(options: .localOnly)
            let crossed = crossed(server)
            let kept = aliceKept.map { "\($0.summary) \(outcome($0))" }.joined(separator: ", ")
            return Verdict(
                leaked: crossed > 0 || !bobSees.isEmpty,
                detail:
                    "wait (/rating): \(results[0]), \(report?.writesWaitedFor ?? 0) waited for by sign-out; hand-off "
                    + "(/upload): \(results[1]), finished after sign-out; discard (/sync): \(results[2]); kept for "
                    + "Alice's next sign-in: \(kept.isEmpty ? "nothing" : kept); shown to Bob: "
                    + "\(bobSees.count) of her entries; "
                    + "writes sent with another user's token: \(crossed)"
            )
        }
    }

    private static func outcome(_ entry: WriteReconciliation) -> String {
        switch entry {
        case .completed(_, let status): "completed \(status)"
        case .failed(_, let code): "failed (\(code))"
        case .discarded: "discarded, refetch"
        }
    }
}
