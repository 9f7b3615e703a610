import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Large bodies stream: how much resident memory a transfer of N MiB adds to the process, measured as the peak
/// resident set during the transfer minus the resident set just before it (Linux `/proc/self`, in MiB).
///
/// - `transfer.download.peak_megabytes.n1024`: `UserSession.download(for:)` of a 1 GiB body, written to the
///   session's directory as it arrives, in 16 MiB ranges (the default). The goal is at most 64.
/// - `transfer.download.unranged.peak_megabytes.n1024`: the same in one request (`downloadSegmentBytes: 0`), side by
///   side: what waits in memory when the disk falls behind and nothing bounds it.
/// - `transfer.upload.peak_megabytes.n1024`: `UserSession.upload(for:fromFile:)` of a 1 GiB file.
/// - `transfer.data.peak_megabytes.n64` and `transfer.download.peak_megabytes.n64`, side by side: a 64 MiB body
///   through `data(for:)`, which holds it in memory, and through `download(for:)`, which does not. The first shows
///   the meter sees a body held in memory.
///
/// The server is a Python subprocess that generates the body 64 KiB at a time (and reads an upload the same way),
/// so none of its memory is counted.
enum TransferBenchmarks {
    static let all = [
        Benchmark(
            resultNames: [
                "transfer.download.peak_megabytes.n1024", "transfer.download.unranged.peak_megabytes.n1024",
                "transfer.upload.peak_megabytes.n1024",
                "transfer.data.peak_megabytes.n64", "transfer.download.peak_megabytes.n64",
            ],
            run: { try await measure() })
    ]

    private static let mebibyte = 1 << 20

    private static func measure() async throws -> [BenchResult] {
        let server = try await StreamingServer.start()
        defer { server.stop() }
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("sessionkit-bench-transfer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(),
                sessionConfiguration: UserSession.Configuration(requestTimeout: .seconds(600), cacheMaximumBytes: 0),
                dataDirectory: directory))
        let session = try await manager.signIn(
            Account(issuer: "https://bench.sessionkit.test", subject: "bench"),
            tokens: TokenSet(accessToken: "bench-token"))
        defer { session.end() }

        var results: [BenchResult] = []
        func record(_ name: String, _ bytes: Int) {
            results.append(BenchResult(name: name, value: Double(bytes) / Double(mebibyte), unit: "MiB"))
        }

        // A small transfer first, so that connections, threads and the transfer session exist before measuring.
        _ = try await session.download(for: URLRequest(url: server.url(mebibytes: 1)))

        let (downloaded, downloadPeak) = try await PeakResidentMemory.during {
            try await session.download(for: URLRequest(url: server.url(mebibytes: 1024)))
        }
        let size = (try FileManager.default.attributesOfItem(atPath: downloaded.0.path)[.size] as? NSNumber)?.intValue
        guard downloaded.1.statusCode == 200, size == 1024 * mebibyte else {
            throw BenchError("the 1 GiB download ended with \(downloaded.1.statusCode) and \(size ?? -1) bytes")
        }
        record("transfer.download.peak_megabytes.n1024", downloadPeak)

        // The same download as one request (`downloadSegmentBytes: 0`), side by side: what ranges bound.
        let whole = UserSession(
            account: Account(issuer: "https://bench.sessionkit.test", subject: "bench-whole"),
            tokens: TokenSet(accessToken: "bench-token"),
            configuration: UserSession.Configuration(
                requestTimeout: .seconds(600), cacheMaximumBytes: 0, downloadSegmentBytes: 0))
        defer { whole.end() }
        try FileManager.default.removeItem(
            at: try await whole.download(for: URLRequest(url: server.url(mebibytes: 1))).0)
        let (wholeDownload, wholePeak) = try await PeakResidentMemory.during {
            try await whole.download(for: URLRequest(url: server.url(mebibytes: 1024)))
        }
        let wholeSize = (try FileManager.default.attributesOfItem(atPath: wholeDownload.0.path)[.size] as? NSNumber)?
            .intValue
        guard wholeDownload.1.statusCode == 200, wholeSize == 1024 * mebibyte else {
            throw BenchError("the 1 GiB download in one request ended with \(wholeDownload.1.statusCode)")
        }
        try FileManager.default.removeItem(at: wholeDownload.0)
        record("transfer.download.unranged.peak_megabytes.n1024", wholePeak)

        // The same file goes back up: read from disk as it is sent.
        var upload = URLRequest(url: server.url(mebibytes: 0))
        upload.httpMethod = "PUT"
        let (uploaded, uploadPeak) = try await PeakResidentMemory.during {
            try await session.upload(for: upload, fromFile: downloaded.0)
        }
        guard uploaded.1.statusCode == 200, String(decoding: uploaded.0, as: UTF8.self) == "\(1024 * mebibyte)" else {
            throw BenchError("the 1 GiB upload ended with \(uploaded.1.statusCode)")
        }
        try FileManager.default.removeItem(at: downloaded.0)
        record("transfer.upload.peak_megabytes.n1024", uploadPeak)

        let (_, dataPeak) = try await PeakResidentMemory.during {
            try await session.data(for: URLRequest(url: server.url(mebibytes: 64)))
        }
        record("transfer.data.peak_megabytes.n64", dataPeak)
        let (small, smallPeak) = try await PeakResidentMemory.during {
            try await session.download(for: URLRequest(url: server.url(mebibytes: 64)))
        }
        try FileManager.default.removeItem(at: small.0)
        record("transfer.download.peak_megabytes.n64", smallPeak)
        return results
    }
}

/// The peak resident memory a piece of work adds, sampled from `/proc/self/statm` every millisecond on a thread of
/// its own.
enum PeakResidentMemory {
    /// Runs `work` and returns its result with the peak resident set during it minus the resident set before it.
    static func during<T: Sendable>(_ work: () async throws -> T) async throws -> (T, Int) {
        let before = ResidentMemory.bytes() ?? 0
        let sampler = Sampler(before)
        let thread = Thread { sampler.run() }
        thread.start()
        defer { sampler.stop() }
        let result = try await work()
        sampler.stop()
        return (result, max(sampler.peak - before, 0))
    }

    private final class Sampler: Sendable {
        private let state: Lock<(peak: Int, running: Bool)>

        init(_ initial: Int) { state = Lock((initial, true)) }

        var peak: Int { state.withLock { $0.peak } }

        func stop() { state.withLock { $0.running = false } }

        func run() {
            while true {
                let resident = ResidentMemory.bytes() ?? 0
                let running = state.withLock { state -> Bool in
                    state.peak = max(state.peak, resident)
                    return state.running
                }
                if !running { return }
                usleep(1000)
            }
        }
    }
}

/// A Python subprocess on 127.0.0.1 that answers `GET /<n>` with n MiB of generated bytes, written 64 KiB at a
/// time (a `Range` request with the range asked for, as a 206 with an `ETag`), and `PUT` by reading the body the
/// same way and answering with its length.
private struct StreamingServer {
    private static let handler = #"""
        CHUNK = bytes(range(256)) * 256  # 64 KiB
        WINDOW = CHUNK + CHUNK[:256]

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                mebibytes = int(self.path.strip("/") or "0")
                size = mebibytes << 20
                first, last = 0, size - 1
                asked = self.headers.get("Range", "")
                ranged = asked.startswith("bytes=") and size > 0
                if ranged:
                    start, _, end = asked[6:].partition("-")
                    first, last = int(start), min(int(end or last), size - 1)
                self.send_response(206 if ranged else 200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("ETag", '"generated-%d"' % mebibytes)
                self.send_header("Content-Length", str(last - first + 1))
                if ranged:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (first, last, size))
                self.end_headers()
                # The byte at offset o is o % 256, so any range can be generated.
                position = first
                while position <= last:
                    count = min(1 << 16, last + 1 - position)
                    shift = position % 256
                    self.wfile.write(WINDOW[shift:shift + count])
                    position += count

            def do_PUT(self):
                remaining = int(self.headers.get("Content-Length", "0"))
                total = 0
                while remaining > 0:
                    chunk = self.rfile.read(min(remaining, 1 << 16))
                    if not chunk:
                        break
                    total += len(chunk)
                    remaining -= len(chunk)
                body = str(total).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):
                pass
        """#

    /// The python3 process; its standard input is a lifeline, so it exits even if this process dies first.
    let running: ChildProcess.Running
    let port: Int

    static func start() async throws -> StreamingServer {
        let (running, port) = try await PythonServerProcess.start(
            handler: handler, name: "the python3 streaming server")
        return StreamingServer(running: running, port: port)
    }

    func url(mebibytes: Int) -> URL { URL(string: "http://127.0.0.1:\(port)/\(mebibytes)")! }

    func stop() { running.terminate() }
}
