import Foundation
import SessionKit
import SessionKitTesting
import Testing

@testable import SessionKitCLICore

/// `sessionkit timeline` over a stream a real manager wrote (issue 36): one sign-in, a refresh the provider
/// rejects, the sign-in again and a sign-out, read back as a timeline in order.
@Suite(.timeLimit(.minutes(1))) struct TimelineTests {
    static let alice = Account(issuer: "https://timeline.sessionkit.invalid", subject: "alice")

    /// The JSON lines a manager writes through `Diagnostics.lines(format: .jsonLines)` during one account's day.
    static func capturedDay() async throws -> String {
        let lines = Lock<[String]>([])
        let diagnostics = Diagnostics.lines(level: .debug, format: .jsonLines) { line in
            lines.withLock { $0.append(line) }
        }
        let endpoint = ScriptedTokenEndpoint { presented, _ in
            guard presented == "rt-1" else {
                throw SessionError(.refreshRejected, "rejected", statusCode: 400, oauthError: "invalid_grant")
            }
            return TokenSet(accessToken: "at-2", refreshToken: "rt-dead", lifetime: .seconds(3600))
        }
        let manager = SessionManager(
            configuration: .init(
                store: InMemoryCredentialStore(), tokenEndpoint: endpoint,
                sessionConfiguration: .init(diagnostics: diagnostics)))
        let session = try await manager.signIn(
            alice, tokens: TokenSet(accessToken: "at-1", refreshToken: "rt-1", lifetime: .seconds(3600)))
        try await session.refreshTokens()
        await #expect(throws: SessionError.self) { try await session.refreshTokens() }
        _ = try await manager.signIn(
            alice, tokens: TokenSet(accessToken: "at-3", refreshToken: "rt-1", lifetime: .seconds(3600)))
        await manager.signOut()
        diagnostics.flush()
        return lines.withLock { $0 }.joined(separator: "\n") + "\n"
    }

    @Test func aCapturedDayReadsInOrderAndWithoutATokenInSight() async throws {
        let stream = try await Self.capturedDay()
        let (lines, skipped) = Timeline.render("not an event\n" + stream + "\n\n")
        #expect(skipped == 1)
        let expected = [
            "state signedOut → authenticating", "state authenticating → active", "refresh started (forced)",
            "refresh succeeded in", "refresh started (forced)", "refresh rejected: refreshRejected, invalid_grant",
            "state refreshing → reauthenticationRequired", "state reauthenticationRequired → authenticating",
            "state active → signedOut", "sign-out step credential_deletion: succeeded",
        ]
        var remaining = expected[...]
        for line in lines where remaining.first.map(line.contains) == true { remaining = remaining.dropFirst() }
        #expect(remaining.isEmpty, "missing from the timeline: \(Array(remaining))\n\(lines.joined(separator: "\n"))")
        #expect(lines.allSatisfy { $0.hasPrefix("+") && $0.contains("alice") || $0.contains(" - ") })
        for secret in ["at-1", "at-2", "at-3", "rt-1", "rt-dead"] {
            #expect(!stream.contains("\"\(secret)\""), "the stream carried \(secret)")
            #expect(!lines.joined().contains(secret), "the timeline carried \(secret)")
        }
    }

    @Test func theCommandReadsAFileOrStandardInputAndRefusesWhatHoldsNoEvent() async throws {
        let stream = try await Self.capturedDay()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("timeline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        do {
            let file = directory.appendingPathComponent("events.jsonl")
            try Data(stream.utf8).write(to: file)
            let fromFile = CapturedConsole()
            #expect(await fromFile.run(["timeline", file.path]) == .ok)
            #expect(fromFile.output.contains("refresh rejected"))
            #expect(fitsEightyColumns(Usage.text(.timeline)))

            let fromInput = CapturedConsole(input: stream.split(separator: "\n").map(String.init))
            #expect(await fromInput.run(["timeline"]) == .ok)
            #expect(fromInput.output == fromFile.output)

            let empty = CapturedConsole(input: ["garbage", "{}"])
            #expect(await empty.run(["timeline", "-"]) == .failure)
            #expect(empty.errors.contains("no SessionKit diagnostic events"))
            #expect(
                await CapturedConsole().run(["timeline", directory.appendingPathComponent("missing").path]) == .failure)
            #expect(await CapturedConsole().run(["timeline", "a", "b"]) == .usage)
            #expect(await CapturedConsole().run(["timeline", "--color"]) == .usage)
        }
    }

    /// Two managers sharing a store and one events file (`Diagnostics.file(at:)`), as two processes of one app do:
    /// the first refreshes, the second adopts that refresh, the first signs out. Once each has called
    /// `finishPendingWork`, `sessionkit timeline` reads the file and tells that story, in words.
    @Test func twoManagersWritingOneFileReadAsOneStory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("timeline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("events.jsonl")
        let store = InMemoryCredentialStore(
            refreshLock: CrossProcessLock(file: directory.appendingPathComponent(".refresh.lock")))
        let endpoint = ScriptedTokenEndpoint { _, call in
            TokenSet(accessToken: "at-\(call)", refreshToken: "rt-\(call)", lifetime: .seconds(3600))
        }
        func manager() throws -> SessionManager {
            SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: endpoint,
                    sessionConfiguration: .init(diagnostics: try .file(at: file, level: .debug))))
        }
        let (first, second) = (try manager(), try manager())
        let tokens = TokenSet(accessToken: "at-0", refreshToken: "rt-0", lifetime: .seconds(3600))
        let one = try await first.signIn(Self.alice, tokens: tokens)
        let two = try await second.signIn(Self.alice, tokens: tokens)
        try await one.refreshTokens()
        try await two.refreshTokens()
        #expect(endpoint.count == 1)
        await first.signOut()
        await first.finishPendingWork(within: .seconds(5))
        await second.finishPendingWork(within: .seconds(5))

        let console = CapturedConsole()
        #expect(await console.run(["timeline", file.path]) == .ok)
        // Each manager's events are in the order they happened; the two sinks' queues write independently, so the
        // two managers' lines may interleave either way.
        let lines = console.output.split(separator: "\n")
        let expected = [
            "refresh started (forced)", "refresh succeeded in", "sign-out step credential_deletion: succeeded",
        ]
        var remaining = expected[...]
        for line in lines where remaining.first.map(line.contains) == true { remaining = remaining.dropFirst() }
        #expect(remaining.isEmpty, "missing: \(Array(remaining))\n\(console.output)")
        #expect(
            lines.filter { $0.contains("adopted the tokens another process refreshed, after") }.count == 1,
            "\(console.output)")
        #expect(console.output.components(separatedBy: "refresh started").count == 2, "one refresh was sent")
        #expect(!console.output.contains("at-1") && !console.output.contains("rt-1"))
        _ = two
    }
}
