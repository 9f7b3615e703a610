import Foundation
import SessionKit

/// What a live session costs: the time to create one, and the resident memory each keeps while alive, measured
/// over batches of 1,000 sessions that share one OAuth client (as an app or a server acting for many users would).
enum SessionBenchmarks {
    private static let batch = 1000
    private static let batches = 3

    static let all = [
        Benchmark(
            resultNames: ["session.create.microseconds", "session.memory.kilobytes", "session.descriptors"],
            run: { try await measure() })
    ]

    private static func measure() async throws -> [BenchResult] {
        let client = OAuthClient(
            configuration: .init(tokenEndpoint: URL(string: "http://127.0.0.1:9/token")!, clientID: "bench"))
        func make(_ index: Int) -> UserSession {
            UserSession(
                account: Account(issuer: "https://id.example.com", subject: "user-\(index)"),
                tokens: TokenSet(
                    accessToken: "access-\(index)-0123456789abcdef", refreshToken: "refresh-\(index)-0123456789abcdef",
                    lifetime: .seconds(3600)),
                tokenEndpoint: client)
        }
        // One-time costs (Foundation, libcurl's global state, first allocations) are not any session's.
        for index in 0..<50 { make(index).end() }

        var live: [UserSession] = []
        live.reserveCapacity(batch * batches)
        var microseconds: [Double] = []
        var kilobytes: [Double] = []
        var descriptors: [Double] = []
        for round in 0..<batches {
            let before = ResidentMemory.bytes()
            let descriptorsBefore = ResidentMemory.openDescriptors()
            let start = ContinuousClock.now
            for index in 0..<batch { live.append(make(round * batch + index)) }
            let elapsed = ContinuousClock.now - start
            let after = ResidentMemory.bytes()
            let descriptorsAfter = ResidentMemory.openDescriptors()
            microseconds.append(Statistics.microseconds(elapsed) / Double(batch))
            if let before, let after { kilobytes.append(Double(after - before) / 1024 / Double(batch)) }
            if let descriptorsBefore, let descriptorsAfter {
                descriptors.append(Double(descriptorsAfter - descriptorsBefore) / Double(batch))
            }
        }
        BenchLog.note(
            "session: create \(microseconds.map { BenchLog.rounded($0, 1) }) µs, "
                + "resident \(kilobytes.map { BenchLog.rounded($0, 1) }) KiB per session, per batch of \(batch)")
        for session in live { session.end() }
        return [
            BenchResult(
                name: "session.create.microseconds", value: Statistics.median(microseconds),
                unit: "µs per UserSession.init"),
            BenchResult(
                name: "session.memory.kilobytes", value: Statistics.median(kilobytes),
                unit: "KiB resident per live session (1,000 alive)"),
            BenchResult(
                name: "session.descriptors", value: Statistics.median(descriptors),
                unit: "open file descriptors per live session (a URLSession's libcurl multi handle; none on libcurl)"),
        ]
    }
}
