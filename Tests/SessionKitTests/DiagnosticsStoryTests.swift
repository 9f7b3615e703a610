import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(Glibc)
    import Glibc
#endif

/// The story the events tell is what happened (issue 47, item 4): a process that adopts tokens another one
/// refreshed does not say it refreshed; a process's own change notice is not told as another process's; and the
/// file sink writes JSON lines, each ending in a newline, all of them written once `finishPendingWork` returns.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct DiagnosticsStoryTests {
    typealias Recorder = DiagnosticsTests.Recorder

    // MARK: - Adopting another process's refresh

    /// Two managers share a store and its refresh lock, as two processes do. The first refreshes; the second,
    /// refreshing next, finds the rotation stored and adopts it: it tells `refresh.adopted`, and neither
    /// `refresh.started` nor `refresh.succeeded`, because it sent nothing.
    @Test func aSessionThatAdoptsAnotherProcesssRefreshSaysSoAndNotThatItRefreshed() async throws {
        try await TemporaryDirectory.with { directory in
            let (firstEvents, secondEvents) = (Recorder(), Recorder())
            let (_, endpoint, signedIn, one, two) = try await BindingTokenEndpoint.aliceInTwoManagers(
                sharingALockIn: directory, diagnostics: (firstEvents.diagnostics, secondEvents.diagnostics))
            defer {
                one.end()
                two.end()
            }

            try await one.refreshTokens()
            try await two.refreshTokens()

            // Compared, never printed: a failure names the count, not the tokens.
            let presentedOnlyTheSignedInToken = endpoint.presented == [signedIn.refreshToken]
            #expect(presentedOnlyTheSignedInToken, "one request: the second manager adopted")
            #expect(endpoint.presented.count == 1)
            let refreshKinds: Set<DiagnosticEvent.Kind> = [.refreshStarted, .refreshSucceeded, .refreshAdopted]
            #expect(
                firstEvents.recorded.filter { refreshKinds.contains($0.kind) }.map(\.kind)
                    == [.refreshStarted, .refreshSucceeded])
            let adopted = secondEvents.recorded.filter { refreshKinds.contains($0.kind) }
            #expect(adopted.map(\.kind) == [.refreshAdopted], "\(adopted.map(\.description))")
            #expect(adopted.first?.fields["cause"] == "forced")
            #expect(adopted.first?.fields["milliseconds"].flatMap(Int.init) != nil)
            #expect(adopted.first?.account == alice && adopted.first?.level == .info)
        }
    }

    // MARK: - Whose change notice

    /// The manager that signs an account out announces the change and hears its own notice: it tells it as this
    /// process's (`from: this_process`). A notice another process writes is told as another's, and both are
    /// checked against the store.
    @Test func aProcesssOwnChangeNoticeIsToldAsItsOwnAndAnothersAsAnothers() async throws {
        try await TemporaryDirectory.with { directory in
            let recorder = Recorder()
            let store = try FileCredentialStore(directory: directory)
            let manager = SessionManager(
                configuration: .init(store: store, sessionConfiguration: .init(diagnostics: recorder.diagnostics)))
            _ = try await manager.signIn(alice, tokens: DiagnosticsTests.tokens("alice"))
            await manager.signOut()
            let own = try await Self.notices(recorder, count: 1)
            #expect(own.map { $0.fields["from"] } == ["this_process"], "\(own.map(\.description))")

            // Another process writes the notice as any process does: its own sender and the time.
            let lock = try #require(store.refreshLock)
            let writer = Process()
            writer.executableURL = URL(fileURLWithPath: "/bin/sh")
            writer.arguments = ["-c", "printf 'ffff0000 12345\\n' > \"$0\"", lock.noticeFile.path]
            try writer.run()
            writer.waitUntilExit()
            #expect(writer.terminationStatus == 0)
            let both = try await Self.notices(recorder, count: 2)
            #expect(both.map { $0.fields["from"] } == ["this_process", "another_process"])
        }
    }

    /// The `cross_process.notice` events once `count` have arrived (a notice comes on the watcher's thread).
    static func notices(_ recorder: Recorder, count: Int) async throws -> [DiagnosticEvent] {
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while ContinuousClock.now < deadline {
            let notices = recorder.recorded.filter { $0.kind == .crossProcessNotice }
            if notices.count >= count { return notices }
            try await Task.sleep(for: .milliseconds(2))
        }
        return recorder.recorded.filter { $0.kind == .crossProcessNotice }
    }

    // MARK: - The file sink

    /// A day written by a manager through `Diagnostics.file(at:)`: every line ends in a newline and is an event,
    /// the file is the owner's alone (0600), a second sink appends rather than truncating, and nothing the
    /// sessions held is in it.
    @Test func theFileSinkWritesOneJSONLineAnEventAppendingAndPrivate() async throws {
        try await TemporaryDirectory.with { directory in
            let file = directory.appendingPathComponent("events.jsonl")
            for day in 1...2 {
                let manager = SessionManager(
                    configuration: .init(
                        store: InMemoryCredentialStore(), tokenEndpoint: BindingTokenEndpoint(),
                        sessionConfiguration: .init(diagnostics: try .file(at: file, level: .debug))))
                let session = try await manager.signIn(alice, tokens: DiagnosticsTests.tokens("day\(day)"))
                try await session.refreshTokens()
                await manager.signOut()
                let left = await manager.finishPendingWork(within: .seconds(5))
                #expect(left.isEmpty)

                let bytes = try Data(contentsOf: file)
                #expect(bytes.last == UInt8(ascii: "\n"), "the last line ends in a newline")
                let lines = String(decoding: bytes, as: UTF8.self).split(
                    separator: "\n", omittingEmptySubsequences: false)
                #expect(lines.last == "", "every line ends in a newline")
                let events = lines.dropLast().map { DiagnosticEvent(jsonLine: String($0)) }
                #expect(events.allSatisfy { $0 != nil }, "every line is an event")
                let days = events.compactMap { $0 }.filter {
                    $0.kind == .stateChanged && $0.fields == ["from": "authenticating", "to": "active"]
                }
                #expect(days.count == day, "day \(day) appended to the day before")
                #expect(events.compactMap { $0 }.last?.kind == .signOutStep)
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(!text.contains("secret"), "no token of the sessions")
                #expect(!text.contains("access-token") && !text.contains("refresh-token"))
            }
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        }
    }

    /// `finishPendingWork` returns only once every event emitted before it is written: a process exiting next loses
    /// none. The sink here is slow (each event takes 20 ms to hand over), so without the flush the call returns
    /// while most are still queued.
    @Test func finishPendingWorkReturnsOnlyOnceEveryEventIsHandedOver() async throws {
        let handed = Lock(0)
        let diagnostics = Diagnostics(level: .debug) { _ in
            usleep(20_000)
            handed.withLock { $0 += 1 }
        }
        let emitted = Lock(0)
        let counting = Diagnostics(level: .debug) { _ in emitted.withLock { $0 += 1 } }
        for sink in [counting, diagnostics] {
            let manager = SessionManager(
                configuration: .init(
                    store: InMemoryCredentialStore(), tokenEndpoint: BindingTokenEndpoint(),
                    sessionConfiguration: .init(diagnostics: sink)))
            let session = try await manager.signIn(alice, tokens: DiagnosticsTests.tokens("alice"))
            try await session.refreshTokens()
            try await session.refreshTokens()
            await manager.signOut()
            await manager.finishPendingWork(within: .seconds(5))
            counting.flush()
        }
        #expect(emitted.withLock { $0 } >= 6)
        #expect(handed.withLock { $0 } == emitted.withLock { $0 }, "every event was handed over before it returned")
    }

    /// What cannot be a diagnostics file is refused when the sink is made, with `invalidInput`: not a file URL, a
    /// directory, a missing directory, a pipe (refused at once, not waited on for a reader).
    @Test func whatCannotBeADiagnosticsFileIsRefusedAsInvalidInput() async throws {
        try await TemporaryDirectory.with { directory in
            let fifo = directory.appendingPathComponent("pipe")
            #expect(mkfifo(fifo.path, 0o600) == 0)
            let refused = [
                URL(string: "https://logs.example/events")!, directory,
                directory.appendingPathComponent("missing/events.jsonl"), fifo,
            ]
            for url in refused {
                let error = #expect(throws: SessionError.self, "\(url)") { try Diagnostics.file(at: url) }
                #expect(error?.code == .invalidInput, "\(url)")
            }
            // A device opens for writing, and is refused for what it is, which the message says.
            let device = #expect(throws: SessionError.self) {
                try Diagnostics.file(at: URL(fileURLWithPath: "/dev/null"))
            }
            #expect(device?.code == .invalidInput)
            #expect(device?.message.contains("not a regular file") == true, "\(String(describing: device))")
            let unused = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            #expect(unused == ["pipe"], "nothing was created for a refused sink")
        }
    }
}
