import Foundation

/// What a request through a `UserSession` costs in instructions, against the same request through a bare
/// `URLSession`: a figure that the load of a shared machine moves far less than it moves time.
///
/// Each variant's ``ProfileLoop`` runs under `valgrind --tool=callgrind` for two request counts against a server in
/// another process (nginx when installed, else this executable's `--serve`), so that only the client's
/// instructions are counted; the difference between the two totals over the difference in requests is the cost of
/// one request, start-up and shut-down cancelled. Each figure is the median of ``repetitions`` such differences.
/// Without valgrind the figures are skipped, with a note; they are never estimated.
enum InstructionBenchmarks {
    static let counts = (100, 600)
    /// How many times each variant is counted, alternating which goes first: the count of one run moves by about
    /// 1 % with how the server's answers fall against FoundationNetworking's polling (its event loop does more or
    /// less work per request with the timing).
    static let repetitions = 3

    static let all = [
        Benchmark(
            resultNames: [
                "request.instructions.ratio", "request.instructions.session", "request.instructions.raw",
            ],
            run: { try await measure() })
    ]

    private static func measure() async throws -> [BenchResult] {
        guard let valgrind = ChildProcess.find("valgrind") else {
            BenchLog.note(
                "request.instructions.*: skipped, valgrind is not installed (Debian: apt-get install valgrind)")
            return []
        }
        let server: BenchServer
        if let nginx = try await BenchServer.nginx() {
            server = nginx
        } else {
            BenchLog.note("request.instructions.*: nginx is not installed; counting against LocalServer (--serve)")
            server = try await BenchServer.localServer()
        }
        defer { server.stop() }
        var perRequest: [ProfileLoop.Variant: [Double]] = [:]
        for repetition in 0..<repetitions {
            let variants: [ProfileLoop.Variant] = repetition.isMultiple(of: 2) ? [.raw, .session] : [.session, .raw]
            for variant in variants {
                let low = try await count(variant, requests: counts.0, valgrind: valgrind, server: server)
                let high = try await count(variant, requests: counts.1, valgrind: valgrind, server: server)
                let cost = Double(high - low) / Double(counts.1 - counts.0)
                perRequest[variant, default: []].append(cost)
                BenchLog.note(
                    "request.instructions \(variant.rawValue) against \(server.name): \(low) at \(counts.0) requests, "
                        + "\(high) at \(counts.1): \(BenchLog.rounded(cost, 0)) per request")
            }
        }
        let session = Statistics.median(perRequest[.session] ?? [])
        let raw = Statistics.median(perRequest[.raw] ?? [])
        return [
            BenchResult(
                name: "request.instructions.ratio", value: session / raw,
                unit: "x (instructions per GET, UserSession / bare URLSession; callgrind, \(server.name))"),
            BenchResult(
                name: "request.instructions.session", value: session,
                unit: "instructions per GET through UserSession.data(for:), client only"),
            BenchResult(
                name: "request.instructions.raw", value: raw,
                unit: "instructions per GET through URLSession.data(for:), client only"),
        ]
    }

    /// The instructions callgrind counted in one run of the profile loop.
    private static func count(
        _ variant: ProfileLoop.Variant, requests: Int, valgrind: String, server: BenchServer
    ) async throws -> Int {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "sessionkit-bench-callgrind-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        let (status, log) = try await ChildProcess.run(
            valgrind,
            [
                "--tool=callgrind", "--callgrind-out-file=\(output.path)", ChildProcess.currentExecutable,
                "--profile", variant.rawValue, "--requests", "\(requests)", "--url", server.baseURL.absoluteString,
            ])
        guard status == 0, let total = collected(in: log) else {
            throw BenchError("callgrind --profile \(variant.rawValue) failed (\(status)): \(log.suffix(400))")
        }
        return total
    }

    /// The total of callgrind's `==pid== Collected : N` line.
    static func collected(in log: String) -> Int? {
        for line in log.split(separator: "\n") {
            guard let range = line.range(of: "Collected :") else { continue }
            return Int(line[range.upperBound...].trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
