import Foundation
import SessionKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// LocalServer as an app's HTTP client (URLSession) sees it.
@Suite(.timeLimit(.minutes(10))) struct LocalServerTests {
    @Test func answersWithTheHandlersResponseAndSetsContentLength() async throws {
        let handler: LocalServer.Handler = { request in
            .json(#"{"path":"\#(request.path)"}"#, headers: [("X-Test", "yes")])
        }
        try await LocalServer.withRunning(handler: handler) { server async throws in
            let client = TestHTTPClient()
            defer { client.invalidate() }
            #expect(server.baseURL.absoluteString == "http://127.0.0.1:\(server.port)/")
            #expect(server.url("/hello?x=1").absoluteString == "http://127.0.0.1:\(server.port)/hello?x=1")

            let (status, response, body) = try await client.get(server.url("/hello?x=1"))

            #expect(status == 200)
            #expect(response.value(forHTTPHeaderField: "X-Test") == "yes")
            #expect(response.value(forHTTPHeaderField: "Content-Type") == "application/json")
            #expect(response.value(forHTTPHeaderField: "Content-Length") == "\(body.count)")
            #expect(String(decoding: body, as: UTF8.self) == #"{"path":"/hello"}"#)
        }
    }

    /// The example in LocalServer's documentation, compiled and run.
    @Test func documentationExampleWorks() async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("GET", "/profile") { request in
                request.bearerToken == "alice-token" ? .json(#"{"name":"Alice"}"#) : .status(401)
            }
            var request = URLRequest(url: server.url("/profile"))
            request.setValue("Bearer alice-token", forHTTPHeaderField: "Authorization")
            let session = URLSession(configuration: .ephemeral)
            defer { session.finishTasksAndInvalidate() }
            let (data, _) = try await session.data(for: request)
            #expect(String(decoding: data, as: UTF8.self) == #"{"name":"Alice"}"#)
            #expect(server.requests.map(\.path) == ["/profile"])
        }
    }

    @Test func defaultHandlerAnswersNotFound() async throws {
        try await LocalServer.withRunning { server async throws in
            let client = TestHTTPClient()
            defer { client.invalidate() }
            #expect(try await client.get(server.url("/anything")).status == 404)
        }
    }

    @Test func routesWinOverTheFallbackAndCanChangeWhileRunning() async throws {
        let fallback: LocalServer.Handler = { _ in .text("fallback") }
        try await LocalServer.withRunning(handler: fallback) { server async throws in
            let client = TestHTTPClient()
            defer { client.invalidate() }
            func call(_ method: String, _ path: String) async throws -> String {
                var request = URLRequest(url: server.url(path))
                request.httpMethod = method
                return String(decoding: try await client.send(request).body, as: UTF8.self)
            }
            server.route("GET", "/a") { _ in .text("GET a") }
            server.route("/a") { _ in .text("any a") }
            server.route("POST", "/b") { _ in .text("POST b") }

            #expect(try await call("GET", "/a?ignored=query") == "GET a")
            #expect(try await call("DELETE", "/a") == "any a")
            #expect(try await call("POST", "/b") == "POST b")
            #expect(try await call("GET", "/b") == "fallback")
            #expect(try await call("GET", "/a/") == "fallback")

            server.route("GET", "/a") { _ in .text("GET a, second version") }
            #expect(try await call("GET", "/a") == "GET a, second version")
            server.removeRoute("GET", "/a")
            #expect(try await call("GET", "/a") == "any a")
        }
    }

    @Test func recordsEveryRequestInArrivalOrder() async throws {
        let noContent: LocalServer.Handler = { _ in .status(204) }
        try await LocalServer.withRunning(handler: noContent) { server async throws in
            let client = TestHTTPClient()
            defer { client.invalidate() }
            let before = ContinuousClock.now
            let beforeDate = Date()
            var post = URLRequest(url: server.url("/log?b=2&a=%20x"))
            post.httpMethod = "POST"
            post.httpBody = Data("payload".utf8)
            post.setValue("1", forHTTPHeaderField: "X-First")
            post.setValue("2", forHTTPHeaderField: "X-Second")
            _ = try await client.send(post)
            _ = try await client.get(server.url("/second"))
            let after = ContinuousClock.now

            let requests = server.requests
            try #require(requests.count == 2)
            let first = requests[0]
            #expect(first.method == "POST")
            #expect(first.path == "/log")
            #expect(first.query == "b=2&a=%20x")
            #expect(first.queryItems == [URLQueryItem(name: "b", value: "2"), URLQueryItem(name: "a", value: " x")])
            #expect(first.header("x-first") == "1" && first.header("X-SECOND") == "2")
            #expect(first.bodyText == "payload")
            #expect(requests[1].method == "GET" && requests[1].path == "/second" && requests[1].query == nil)
            #expect(
                before <= first.arrivedAt && first.arrivedAt <= requests[1].arrivedAt && requests[1].arrivedAt <= after)
            #expect(beforeDate <= first.arrivedAtDate)

            server.clearRequests()
            #expect(server.requests.isEmpty)
            _ = try await client.get(server.url("/third"))
            #expect(server.requests.map(\.path) == ["/third"])
        }
    }

    @Test func logShowsWhichTokenEachConcurrentRequestCarried() async throws {
        let tokens = (1...8).map { "token-of-user-\($0)" }
        // Every handler waits until all eight requests have arrived: they are provably in flight together.
        let arrivals = Arrivals(target: tokens.count)
        let handler: LocalServer.Handler = { request in
            arrivals.arrive()
            try? await arrivals.reached.wait()
            return .text(request.bearerToken ?? "none")
        }
        try await LocalServer.withRunning(handler: handler) { server async throws in
            let client = TestHTTPClient(maximumConnectionsPerHost: 16)
            defer { client.invalidate() }
            let answers = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for token in tokens {
                    group.addTask {
                        let body = try await client.get(server.url("/me"), bearer: token).body
                        return (token, String(decoding: body, as: UTF8.self))
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }

            #expect(answers == Dictionary(uniqueKeysWithValues: tokens.map { ($0, $0) }))
            let recorded = server.requests
            #expect(recorded.compactMap(\.bearerToken).sorted() == tokens.sorted())
            #expect(Set(recorded.map(\.connectionID)).count == tokens.count)
            #expect(!recorded[0].description.contains("token-of-user"))
        }
    }

    @Test func aThousandConcurrentRequestsAllSucceed() async throws {
        let echoToken: LocalServer.Handler = { request in .text(request.bearerToken ?? "") }
        try await LocalServer.withRunning(handler: echoToken) { server async throws in
            let client = TestHTTPClient(maximumConnectionsPerHost: 64)
            defer { client.invalidate() }
            let mismatches = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<1000 {
                    group.addTask {
                        let body = try await client.get(server.url("/n"), bearer: "t\(index)").body
                        return String(decoding: body, as: UTF8.self) != "t\(index)"
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(mismatches == 0)
            #expect(server.requests.count == 1000)
        }
    }

    @Test func receivesLargeBodies() async throws {
        let summary: LocalServer.Handler = { request in .text("\(request.body.count):\(request.body.last ?? 0)") }
        try await LocalServer.withRunning(handler: summary) { server async throws in
            let client = TestHTTPClient()
            defer { client.invalidate() }
            let body = Data((0..<(2 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 * 7) })
            var request = URLRequest(url: server.url("/upload"))
            request.httpMethod = "PUT"
            request.httpBody = body

            let answer = try await client.send(request)

            #expect(answer.status == 200)
            #expect(String(decoding: answer.body, as: UTF8.self) == "\(body.count):\(body.last!)")
            #expect(server.requests.first?.body == body)
        }
    }

    @Test func sendsResponsesLargerThanTheSocketBuffer() async throws {
        // Far more than a socket takes at once: the I/O thread must finish what the handler's write could not.
        let payload = Data((0..<(6 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let large: LocalServer.Handler = { _ in LocalServer.Response(body: payload) }
        try await LocalServer.withRunning(handler: large) { server async throws in
            let client = TestHTTPClient()
            defer { client.invalidate() }
            let first = try await client.get(server.url("/large"))
            let second = try await client.get(server.url("/large"))
            #expect(first.body == payload && second.body == payload)
            #expect(Set(server.requests.map(\.connectionID)).count == 1)
        }
    }

    @Test func delayedResponseArrivesWithoutHoldingUpOthers() async throws {
        try await LocalServer.withRunning { server async throws in
            let slowArrived = Gate()
            server.route("/slow") { _ in
                slowArrived.open()
                return .text("late").delayed(by: .seconds(3600))
            }
            server.route("/fast") { _ in .text("fast").delayed(by: .milliseconds(1)) }
            let client = TestHTTPClient()
            defer { client.invalidate() }
            let slow = Task { try await client.get(server.url("/slow")) }
            try await slowArrived.wait()

            // Then: a request sent while the slow one waits is answered.
            #expect(String(decoding: try await client.get(server.url("/fast")).body, as: UTF8.self) == "fast")

            // And stopping the server cancels the wait: the slow client gets an error, not a hang.
            await server.stop()
            await #expect(throws: URLError.self) { try await slow.value }
        }
    }

    @Test(arguments: [LocalServer.Fault.closeBeforeResponding, .truncatedBody, .garbage])
    func faultsReachTheClientAsErrors(fault: LocalServer.Fault) async throws {
        try await LocalServer.withRunning { server async throws in
            server.route("/fault") { _ in .json(#"{"data":"0123456789"}"#).failing(with: fault) }
            server.route("/ok") { _ in .text("ok") }
            let client = TestHTTPClient()
            defer { client.invalidate() }
            // A fresh connection, then a reused one: both see the fault as an error.
            await #expect(throws: URLError.self) { try await client.get(server.url("/fault")) }
            #expect(try await client.get(server.url("/ok")).status == 200)
            await #expect(throws: URLError.self) { try await client.get(server.url("/fault")) }

            // The server keeps serving.
            #expect(try await client.get(server.url("/ok")).status == 200)
        }
    }
}
