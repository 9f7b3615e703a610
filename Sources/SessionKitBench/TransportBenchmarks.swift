#if os(Linux)
    import CSessionKitCurl
    import Foundation
    import FoundationNetworking
    import SessionKit
    import SessionKitOAuth
    import SessionKitTesting

    /// The libcurl transport (issue 49) beside what it replaces and what it is built on, side by side in one run:
    ///
    /// - `transport.wait.cpu_seconds_per_second.nN`: the CPU this process uses per second of wall time while N
    ///   requests wait on a server that accepted their connections and never answers (a listener that never
    ///   `accept`s: the kernel completes the handshake and takes the request); `transport.wait.urlsession.*` the
    ///   same with FoundationNetworking's `URLSession`.
    /// - `transport.ratio.<label>`: the libcurl transport's throughput ÷ a bare `URLSession`'s async `data(for:)`,
    ///   authorized GETs of `/me` in blocks of ``block`` requests per client and round (`sequential`: one caller;
    ///   `concurrent8`: 8 callers sharing the block), 7 rounds, the clients' order rotating by round; the median of
    ///   the rounds' ratios, with the lowest and highest. `.vs_easy`: ÷ raw libcurl easy handles (one per caller,
    ///   each on a thread of its own, reused for its whole block, `curl_easy_perform`), the floor any libcurl client
    ///   stands on. `transport.nginx.*`: the same against nginx.
    enum TransportBenchmarks {
        private static let rounds = 7
        private static let block = 1000

        static let all = [
            Benchmark(resultNames: waitNames, run: { try await waiting() }),
            Benchmark(resultNames: ratioNames, run: { try await ratios() }),
            Benchmark(resultNames: churnNames, run: { try await churn() }),
            Benchmark(resultNames: sessionChurnNames, run: { try await sessionChurn() }),
            Benchmark(resultNames: floorNames, run: { try await floor() }),
        ]

        private static let floorNames = ["transport.floor.response.microseconds", "transport.floor.hop.microseconds"]

        /// What every request on the transport pays and a raw easy handle does not, each alone, median of 7 runs of
        /// 20,000: `response`, Foundation making the `HTTPURLResponse` of nginx's head for `/me` (what
        /// ``CurlAnswer/response()`` does once per request); `hop`, a task handing work to the loop and being resumed
        /// by it (the two thread hops of every request, with nothing sent). `vs_easy` cannot pass 35 µs ÷ (35 µs + these)
        /// against nginx whatever the transport does between them.
        private static func floor() async throws -> [BenchResult] {
            let url = URL(string: "http://127.0.0.1/me")!
            let head = [
                ("Server", "nginx/1.22.1"), ("Date", "Sun, 06 Dec 2026 12:00:00 GMT"),
                ("Content-Type", "application/json"), ("Content-Length", "60"), ("Connection", "keep-alive"),
                ("Cache-Control", "no-store"),
            ]
            let count = 20_000
            var response = [Double]()
            var hop = [Double]()
            for _ in 0..<7 {
                var start = ContinuousClock.now
                for _ in 0..<count {
                    let answer = CurlAnswer(data: Data(), url: url, status: 200, version: "HTTP/1.1", fields: head)
                    guard answer.response()?.statusCode == 200 else { throw BenchError("no response was made") }
                }
                response.append(Statistics.microseconds(ContinuousClock.now - start) / Double(count))
                start = ContinuousClock.now
                for _ in 0..<count {
                    await withCheckedContinuation { continuation in CurlClient.onLoop { continuation.resume() } }
                }
                hop.append(Statistics.microseconds(ContinuousClock.now - start) / Double(count))
            }
            return [
                BenchResult(
                    name: "transport.floor.response.microseconds", value: Statistics.median(response),
                    unit: "µs per HTTPURLResponse (nginx's head, 6 fields)"),
                BenchResult(
                    name: "transport.floor.hop.microseconds", value: Statistics.median(hop),
                    unit: "µs per hand-over to the loop and back"),
            ]
        }

        private static let sessionChurnNames = [
            "transport.sessions.descriptors_kept", "transport.sessions.heap_growth_kib",
            "transport.sessions.rss_growth_kib", "transport.sessions.seconds",
        ]

        /// 10,000 user sessions on the process's transport, each ended with a request of every kind in flight: a data
        /// request, a download and a byte stream waiting on a server that holds them, after a request to a refused
        /// port and a download whose server closed mid-body have failed. Every call must be answered (the three in
        /// flight with `sessionEnded`), and the process must not crash; what is counted is the descriptors, the heap
        /// in use (glibc's count, after it returned its free pages) and resident memory left after, beside a first
        /// thousand sessions that warm every allocator. The server lets its held requests go once their session
        /// ended (a gate per cycle): a handler that slept instead would keep its timer, memory of the server's, not
        /// the transport's.
        private static func sessionChurn() async throws -> [BenchResult] {
            let refused = try SilentListener()
            let refusedURL = refused.url
            refused.close()
            let holds = Lock(Gate())
            let server = try await LocalServer.start(configuration: .init(recordsRequests: false)) { request in
                switch request.path {
                case "/cut":
                    return LocalServer.Response.text(String(repeating: "x", count: 4096)).failing(with: .truncatedBody)
                case "/hold":
                    await holds.withLock { $0 }.wait()
                    return LocalServer.Response.text("late")
                default: return .notFound
                }
            }
            defer { Task { await server.stop() } }
            let hold = URLRequest(url: server.url("/hold"))
            // The process's transport: libcurl by default, `SESSIONKIT_TRANSPORT=urlsession` for the same churn on
            // URLSession beside it.
            let configuration = UserSession.Configuration(retryPolicy: .never)
            func cycles(_ count: Int, from first: Int) async throws {
                for index in first..<(first + count) {
                    let session = UserSession(
                        account: Account(issuer: "https://churn.sessionkit.invalid", subject: "user-\(index)"),
                        tokens: TokenSet(accessToken: "churn-access", lifetime: .seconds(3600)),
                        configuration: configuration)
                    let codes = try await withThrowingTaskGroup(of: (Bool, SessionError.Code?).self) { group in
                        func outcome(_ work: @escaping @Sendable () async throws -> Void) async -> SessionError.Code? {
                            do {
                                try await work()
                                return nil
                            } catch {
                                return (error as? SessionError)?.code
                            }
                        }
                        for held in [false, true] {
                            if held {
                                group.addTask { (true, await outcome { _ = try await session.data(for: hold) }) }
                                group.addTask { (true, await outcome { _ = try await session.download(for: hold) }) }
                                group.addTask { (true, await outcome { _ = try await session.bytes(for: hold) }) }
                            } else {
                                group.addTask {
                                    (
                                        false,
                                        await outcome { _ = try await session.data(for: URLRequest(url: refusedURL)) }
                                    )
                                }
                                group.addTask {
                                    (
                                        false,
                                        await outcome {
                                            _ = try await session.download(for: URLRequest(url: server.url("/cut")))
                                        }
                                    )
                                }
                            }
                        }
                        var codes = [SessionError.Code?]()
                        var failed = 0
                        for try await (held, code) in group {
                            if held {
                                codes.append(code)
                            } else {
                                failed += 1
                                if failed == 2 { session.end() }
                            }
                        }
                        return codes
                    }
                    guard codes.count == 3, codes.allSatisfy({ $0 == .sessionEnded }) else {
                        throw BenchError("a churned session's requests in flight ended as \(codes), not sessionEnded")
                    }
                    holds.withLock { gate in
                        gate.open()
                        gate = Gate()
                    }
                }
            }
            try await cycles(1_000, from: 0)
            _ = AllocatorStatistics.returnFreeMemory()
            let descriptors = ResidentMemory.openDescriptors() ?? 0
            let heap = AllocatorStatistics.bytesInUse() ?? 0
            let resident = ResidentMemory.bytes() ?? 0
            let start = ContinuousClock.now
            try await cycles(churnCycles, from: 1_000)
            let seconds = Statistics.seconds(ContinuousClock.now - start)
            _ = AllocatorStatistics.returnFreeMemory()
            let kept = (ResidentMemory.openDescriptors() ?? 0) - descriptors
            let heapGrowth = Double((AllocatorStatistics.bytesInUse() ?? 0) - heap) / 1024
            let growth = Double((ResidentMemory.bytes() ?? 0) - resident) / 1024
            BenchLog.note(
                "transport.sessions: \(churnCycles) sessions × 5 requests in \(BenchLog.rounded(seconds, 1)) s, "
                    + "\(kept) descriptors kept, heap \(BenchLog.rounded(heapGrowth, 0)) KiB more, resident memory "
                    + "\(BenchLog.rounded(growth, 0)) KiB more")
            return [
                BenchResult(name: "transport.sessions.descriptors_kept", value: Double(kept), unit: "descriptors"),
                BenchResult(
                    name: "transport.sessions.heap_growth_kib", value: heapGrowth, unit: "KiB over 10,000 sessions"),
                BenchResult(name: "transport.sessions.rss_growth_kib", value: growth, unit: "KiB over 10,000 sessions"),
                BenchResult(name: "transport.sessions.seconds", value: seconds, unit: "s for 10,000 sessions"),
            ]
        }

        // MARK: - Churn

        private static let churnCycles = 10_000
        private static let churnNames = [
            "transport.churn.descriptors_kept", "transport.churn.rss_growth_kib", "transport.churn.seconds",
        ]

        /// 10,000 clients, as many sessions would make and end them: each starts four transfers (one waiting on a
        /// silent server, one to a refused port, one that meets its first-byte deadline, one whose server closes
        /// mid-body) and is closed at once, the first transfers still in flight. Every transfer must complete
        /// (the process must not crash); what is counted is the descriptors and resident memory left after, beside
        /// a first thousand cycles that warm every allocator.
        private static func churn() async throws -> [BenchResult] {
            let silent = try SilentListener()
            defer { silent.close() }
            let refused = try SilentListener()
            let refusedURL = refused.url
            refused.close()
            // Not recording requests: the log would grow with the cycles and read as the transport's memory.
            let server = try await LocalServer.start(configuration: .init(recordsRequests: false)) { request in
                request.path == "/cut"
                    ? LocalServer.Response.text(String(repeating: "x", count: 4096)).failing(with: .truncatedBody)
                    : .notFound
            }
            defer { Task { await server.stop() } }
            let cut = server.url("/cut")
            func cycles(_ count: Int) async throws {
                for _ in 0..<count {
                    let client = CurlClient()
                    let (answers, answered) = AsyncStream<URLError.Code?>.makeStream()
                    let requests: [(URL, CurlDeadlines)] = [
                        (refusedURL, CurlDeadlines()), (silent.url, CurlDeadlines(firstByte: .milliseconds(1))),
                        (cut, CurlDeadlines()), (silent.url, CurlDeadlines()),
                    ]
                    for (url, deadlines) in requests {
                        try client.start(URLRequest(url: url), deadlines: deadlines) { result in
                            if case .failure(let error) = result {
                                answered.yield(error.code)
                            } else {
                                answered.yield(nil)
                            }
                        }
                    }
                    // The refusal, the deadline and the cut body run their course; the silent one is in flight at
                    // the close.
                    var codes = [URLError.Code?]()
                    for await code in answers {
                        codes.append(code)
                        if codes.count == requests.count - 1 { client.close() }
                        if codes.count == requests.count { break }
                    }
                    guard codes.allSatisfy({ $0 != nil }), codes.last == .cancelled else {
                        throw BenchError("a churned transfer ended as \(codes), not as a failure with the close last")
                    }
                }
            }
            try await cycles(1_000)
            let descriptors = ResidentMemory.openDescriptors() ?? 0
            let resident = ResidentMemory.bytes() ?? 0
            let start = ContinuousClock.now
            try await cycles(churnCycles)
            let seconds = Statistics.seconds(ContinuousClock.now - start)
            let kept = (ResidentMemory.openDescriptors() ?? 0) - descriptors
            let growth = Double((ResidentMemory.bytes() ?? 0) - resident) / 1024
            BenchLog.note(
                "transport.churn: \(churnCycles) clients × 4 transfers in \(BenchLog.rounded(seconds, 1)) s, "
                    + "\(kept) descriptors kept, resident memory \(BenchLog.rounded(growth, 0)) KiB more")
            return [
                BenchResult(name: "transport.churn.descriptors_kept", value: Double(kept), unit: "descriptors"),
                BenchResult(name: "transport.churn.rss_growth_kib", value: growth, unit: "KiB over 10,000 clients"),
                BenchResult(name: "transport.churn.seconds", value: seconds, unit: "s for 10,000 clients"),
            ]
        }

        private static let waitNames = [1, 8].flatMap {
            ["transport.wait.cpu_seconds_per_second.n\($0)", "transport.wait.urlsession.cpu_seconds_per_second.n\($0)"]
        }

        private static let ratioNames = ["transport", "transport.nginx"].flatMap { prefix in
            ["sequential", "concurrent8"].flatMap { label in
                [
                    "\(prefix).ratio.\(label)", "\(prefix).ratio.\(label).min", "\(prefix).ratio.\(label).max",
                    "\(prefix).ratio.\(label).vs_easy", "\(prefix).\(label).curl.microseconds",
                    "\(prefix).\(label).urlsession.microseconds", "\(prefix).\(label).easy.microseconds",
                ]
            }
        }

        // MARK: - Waiting on a silent server

        private static func waiting() async throws -> [BenchResult] {
            let silent = try SilentListener()
            defer { silent.close() }
            var results = [BenchResult]()
            let unit = "s/s (this process's CPU per second of the wait)"
            for n in [1, 8] {
                let client = CurlClient()
                let calls = (0..<n).map { _ in
                    Task { _ = try? await client.data(for: URLRequest(url: silent.url)) }
                }
                let curl = try await cpuPerSecond(over: .seconds(2))
                // Still waiting, all of them: a request that failed at once would cost nothing and prove nothing.
                let waiting = await client.running()
                guard waiting == n else { throw BenchError("\(waiting) of \(n) requests were waiting, not all") }
                client.close()
                for call in calls { await call.value }
                results.append(
                    BenchResult(name: "transport.wait.cpu_seconds_per_second.n\(n)", value: curl, unit: unit))

                let session = URLSession(configuration: .ephemeral)
                let waits = (0..<n).map { _ in
                    Task { _ = try? await session.data(for: URLRequest(url: silent.url)) }
                }
                let foundation = try await cpuPerSecond(over: .seconds(2))
                session.invalidateAndCancel()
                for wait in waits { await wait.value }
                results.append(
                    BenchResult(
                        name: "transport.wait.urlsession.cpu_seconds_per_second.n\(n)", value: foundation, unit: unit))
                BenchLog.note(
                    "transport.wait n\(n): libcurl \(BenchLog.rounded(curl, 4)) CPU s/s, "
                        + "URLSession \(BenchLog.rounded(foundation, 3)) CPU s/s")
            }
            return results
        }

        /// The process's CPU time over `duration` of wall time, per second, after a short settling time in which the
        /// requests connect and send.
        private static func cpuPerSecond(over duration: Duration) async throws -> Double {
            try await Task.sleep(for: .milliseconds(300))
            let (cpu0, wall0) = (processCPUSeconds(), ContinuousClock.now)
            try await Task.sleep(for: duration)
            let (cpu1, wall1) = (processCPUSeconds(), ContinuousClock.now)
            return (cpu1 - cpu0) / Statistics.seconds(wall1 - wall0)
        }

        private static func processCPUSeconds() -> Double {
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }

        // MARK: - Throughput

        private static func ratios() async throws -> [BenchResult] {
            var servers = [try await BenchServer.localServer()]
            if let nginx = try await BenchServer.nginx() {
                servers.append(nginx)
            } else {
                BenchLog.note(
                    "transport.nginx.*: skipped, nginx is not installed (Debian: apt-get install nginx-light)")
            }
            defer { for server in servers { server.stop() } }
            var results = [BenchResult]()
            for server in servers {
                let prefix = server.name == "nginx" ? "transport.nginx" : "transport"
                for (label, callers) in [("sequential", 1), ("concurrent8", 8)] {
                    results += try await compare(server: server, prefix: prefix, label: label, callers: callers)
                }
            }
            return results
        }

        private enum Client: CaseIterable { case curl, urlSession, easy }

        private static func compare(server: BenchServer, prefix: String, label: String, callers: Int) async throws
            -> [BenchResult]
        {
            var authorized = URLRequest(url: server.url("me"))
            authorized.setValue("Bearer \(BenchServer.token)", forHTTPHeaderField: "Authorization")
            let request = authorized
            let curl = CurlClient()
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            let urlSession = URLSession(configuration: configuration)
            defer {
                curl.close()
                urlSession.invalidateAndCancel()
            }
            let perCaller = block / callers
            func run(_ client: Client) async throws -> Duration {
                let start = ContinuousClock.now
                switch client {
                case .curl:
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<callers {
                            group.addTask {
                                for _ in 0..<perCaller { try check(try await curl.data(for: request).1) }
                            }
                        }
                        try await group.waitForAll()
                    }
                case .urlSession:
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<callers {
                            group.addTask {
                                for _ in 0..<perCaller { try check(try await urlSession.data(for: request).1) }
                            }
                        }
                        try await group.waitForAll()
                    }
                case .easy:
                    try await EasyCallers.run(request, callers: callers, requestsEach: perCaller)
                }
                return ContinuousClock.now - start
            }
            for client in Client.allCases { _ = try await run(client) }  // connections made, code warm
            var versusURLSession = [Double]()
            var versusEasy = [Double]()
            var times = [Client: [Double]]()
            for round in 0..<rounds {
                var took = [Client: Duration]()
                let order = Client.allCases
                for index in 0..<order.count {
                    let client = order[(index + round) % order.count]
                    took[client] = try await run(client)
                }
                let curlTime = Statistics.seconds(took[.curl]!)
                versusURLSession.append(Statistics.seconds(took[.urlSession]!) / curlTime)
                versusEasy.append(Statistics.seconds(took[.easy]!) / curlTime)
                for (client, duration) in took {
                    times[client, default: []].append(Statistics.seconds(duration) * 1e6 / Double(block))
                }
                BenchLog.note(
                    "\(prefix).\(label) round \(round + 1)/\(rounds) (\(server.name)): libcurl ÷ URLSession "
                        + "\(BenchLog.rounded(versusURLSession.last!, 3)), ÷ easy \(BenchLog.rounded(versusEasy.last!, 3))"
                )
            }
            let unit = "x (libcurl transport / bare URLSession async throughput)"
            return [
                BenchResult(name: "\(prefix).ratio.\(label)", value: Statistics.median(versusURLSession), unit: unit),
                BenchResult(
                    name: "\(prefix).ratio.\(label).min", value: versusURLSession.min()!, unit: "x (lowest round)"),
                BenchResult(
                    name: "\(prefix).ratio.\(label).max", value: versusURLSession.max()!, unit: "x (highest round)"),
                BenchResult(
                    name: "\(prefix).ratio.\(label).vs_easy", value: Statistics.median(versusEasy),
                    unit: "x (libcurl transport / raw libcurl easy handles)"),
                BenchResult(
                    name: "\(prefix).\(label).curl.microseconds", value: Statistics.median(times[.curl]!),
                    unit: "µs per request"),
                BenchResult(
                    name: "\(prefix).\(label).urlsession.microseconds", value: Statistics.median(times[.urlSession]!),
                    unit: "µs per request"),
                BenchResult(
                    name: "\(prefix).\(label).easy.microseconds", value: Statistics.median(times[.easy]!),
                    unit: "µs per request"),
            ]
        }

        @Sendable private static func check(_ response: URLResponse) throws {
            guard (response as? HTTPURLResponse)?.statusCode == 200 else {
                throw BenchError("a bench request was not answered 200")
            }
        }
    }

    /// Raw libcurl easy handles, each caller a thread of its own with one handle for all its requests.
    enum EasyCallers {
        static func run(_ request: URLRequest, callers: Int, requestsEach: Int) async throws {
            let url = request.url!.absoluteString
            let authorization = "Authorization: " + (request.value(forHTTPHeaderField: "Authorization") ?? "")
            let failures = Lock(0)
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let group = DispatchGroup()
                for _ in 0..<callers {
                    group.enter()
                    let thread = Thread {
                        defer { group.leave() }
                        guard let easy = curl_easy_init() else { return failures.withLock { $0 += 1 } }
                        defer { curl_easy_cleanup(easy) }
                        var fields: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, authorization)
                        defer { curl_slist_free_all(fields) }
                        fields = curl_slist_append(fields, "Expect:")
                        sk_curl_easy_setopt_pointer(easy, CURLOPT_URL, url)
                        sk_curl_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, fields)
                        sk_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
                        sk_curl_easy_setopt_pointer(easy, CURLOPT_ACCEPT_ENCODING, "")
                        sk_curl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { _, size, count, _ in
                            size * count
                        }
                        for _ in 0..<requestsEach {
                            var status = 0
                            if curl_easy_perform(easy) != CURLE_OK
                                || sk_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK
                                || status != 200
                            {
                                failures.withLock { $0 += 1 }
                            }
                        }
                    }
                    thread.start()
                }
                group.notify(queue: .global()) { done.resume() }
            }
            if failures.withLock({ $0 }) > 0 { throw BenchError("a raw libcurl request failed") }
        }
    }

    /// A loopback listener that never accepts: connections complete in the kernel's backlog and requests are
    /// taken into its buffers, and nothing answers.
    private struct SilentListener {
        let descriptor: Int32
        let url: URL

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0, listen(descriptor, 64) == 0 else { throw BenchError("no silent listener") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
            }
            self.descriptor = descriptor
            url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))/silent")!
        }

        func close() { _ = Glibc.close(descriptor) }
    }
#else
    /// The libcurl transport is Linux's; Apple platforms keep URLSession and have nothing to compare.
    enum TransportBenchmarks {
        static let all: [Benchmark] = []
    }
#endif
