import Foundation
import SessionKit
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A download fetched in ranges from a real nginx serving a file (its own `Range`, `ETag` and `If-Range`), as users
/// meet it: the bytes on disk are the file's, each range was a 206 of the size asked for, and a file replaced on
/// the server midway is downloaded whole in its new version, never joined to the old one.
@Suite(
    .enabled(if: NginxProxy.shouldRun, "nginx is not installed (scripts/test installs nginx-light)"),
    .timeLimit(.minutes(5)))
struct RangedDownloadNginxTests {
    static let segment = 1 << 20

    static func pattern(_ count: Int, seed: Int) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: ($0 &+ seed) &* 31 &+ $0 >> 8) })
    }

    static func session() -> UserSession {
        UserSession(
            account: Account(issuer: "https://issuer.example", subject: "alice"),
            tokens: TokenSet(accessToken: "token-alice"),
            configuration: UserSession.Configuration(downloadSegmentBytes: segment))
    }

    @Test func aFileIsDownloadedInRangesNginxServedAndAssembledByteForByte() async throws {
        try await NginxProxy.withRunning(upstream: URL(string: "http://127.0.0.1:9")!) { nginx in
            let body = Self.pattern(5 * Self.segment + 123, seed: 0)
            try body.write(to: nginx.directory.appendingPathComponent("www/files/big.bin"))
            let session = Self.session()
            defer { session.end() }

            let (file, response) = try await session.download(for: URLRequest(url: nginx.url("/files/big.bin")))

            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "Content-Length") == "\(body.count)")
            #expect(try Data(contentsOf: file) == body)
            let log = nginx.log().filter { $0.uri == "/files/big.bin" }
            #expect(log.map(\.status) == Array(repeating: "206", count: 6))
            #expect(log.first?.range == "bytes=0-\(Self.segment - 1)")
            #expect(log.last?.range == "bytes=\(5 * Self.segment)-\(6 * Self.segment - 1)")
        }
    }

    @Test func aFileReplacedOnTheServerMidwayIsDownloadedWholeInItsNewVersion() async throws {
        try await NginxProxy.withRunning(upstream: URL(string: "http://127.0.0.1:9")!) { nginx in
            let path = nginx.directory.appendingPathComponent("www/files/report.bin")
            let old = Self.pattern(3 * Self.segment, seed: 0)
            // One byte longer: nginx's ETag is the modification time and the size, so it changes even within the
            // same second.
            let new = Self.pattern(3 * Self.segment + 1, seed: 7)
            try old.write(to: path)
            let session = Self.session()
            defer { session.end() }
            let replaced = Lock(false)

            let (file, response) = try await session.download(for: URLRequest(url: nginx.url("/files/report.bin"))) {
                progress in
                // During the first range (nginx has sent it): the next range asks for the old version.
                guard progress.completedBytes > 0 else { return }
                let replace = replaced.withLock { done -> Bool in
                    defer { done = true }
                    return !done
                }
                if replace { try? new.write(to: path, options: .atomic) }
            }

            #expect(response.statusCode == 200)
            #expect(try Data(contentsOf: file) == new, "the download joined parts of two versions")
            let log = nginx.log().filter { $0.uri == "/files/report.bin" }
            #expect(log.map(\.status) == ["206", "200"])
        }
    }

    @Test func aRangeRequestWithoutTheSessionsTokenIsRefusedByNginx() async throws {
        try await NginxProxy.withRunning(upstream: URL(string: "http://127.0.0.1:9")!) { nginx in
            try Data("secret".utf8).write(to: nginx.directory.appendingPathComponent("www/files/a.bin"))
            let session = UserSession(
                account: Account(issuer: "https://issuer.example", subject: "bob"),
                tokens: TokenSet(accessToken: "token-bob"),
                configuration: UserSession.Configuration(retryPolicy: .never, downloadSegmentBytes: Self.segment))
            defer { session.end() }
            let error = await #expect(throws: SessionError.self) {
                try await session.download(for: URLRequest(url: nginx.url("/files/a.bin")))
            }
            #expect(error?.statusCode == 401)
        }
    }
}
