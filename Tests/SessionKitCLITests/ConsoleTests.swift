import Foundation
import SessionKit
import Testing

@testable import SessionKitCLICore

#if canImport(Glibc)
    import Glibc
#endif

/// Standard output that cannot be written, tokens typed at a terminal, and pieces of tokens.
@Suite(.timeLimit(.minutes(5))) struct ConsoleTests {
    /// A console writing standard output to `output` and standard error to a pipe, run with `arguments`.
    private func run(_ arguments: [String], output: Int32) async throws -> (ExitCode, String) {
        var pipe: [Int32] = [0, 0]
        try #require(Glibc.pipe(&pipe) == 0)
        defer { close(pipe[0]) }
        let console = Console.system(output: output, error: pipe[1])
        let status = await SessionKitTool.run(arguments, console: console)
        close(pipe[1])
        var errors: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(pipe[0], &buffer, buffer.count)
            guard count > 0 else { break }
            errors += buffer[0..<count]
        }
        return (status, String(decoding: errors, as: UTF8.self))
    }

    @Test func aFullStandardOutputExitsNonZeroWithAMessage() async throws {
        let full = open("/dev/full", O_WRONLY)
        try #require(full >= 0)
        defer { close(full) }
        let (status, errors) = try await run(["--help"], output: full)
        #expect(status == .failure)
        #expect(errors == "sessionkit: could not write to standard output: No space left on device\n")
    }

    @Test func aPipeNobodyReadsExitsNonZeroWithAMessage() async throws {
        // The tool ignores SIGPIPE in main.swift; so must this test process, or the write would kill it.
        signal(SIGPIPE, SIG_IGN)
        var pipe: [Int32] = [0, 0]
        try #require(Glibc.pipe(&pipe) == 0)
        close(pipe[0])
        defer { close(pipe[1]) }
        let (status, errors) = try await run(["--help"], output: pipe[1])
        #expect(status == .failure)
        #expect(errors == "sessionkit: could not write to standard output: Broken pipe\n")
    }

    /// The real executable, with standard output closed (`>&-`) and full (`> /dev/full`): no crash.
    @Test func theExecutableSurvivesAClosedOrFullStandardOutput() async throws {
        let binary = try #require(Self.executable, "the sessionkit executable is built next to the tests")
        for closed in [true, false] {
            let process = Process()
            process.executableURL = binary
            process.arguments = ["--help"]
            let errors = Pipe()
            process.standardError = errors
            if !closed { process.standardOutput = FileHandle(forWritingAtPath: "/dev/full") }
            if closed {
                // Foundation cannot start a child with a descriptor closed: a shell closes it.
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "exec \"$0\" --help >&-", binary.path]
            }
            try process.run()
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationReason == .exit, "it must exit, not die of a signal")
            #expect(process.terminationStatus == 3)
            let reason = closed ? "it is closed" : "No space left on device"
            #expect(text == "sessionkit: could not write to standard output: \(reason)\n", "\(text)")
        }
    }

    static var executable: URL? {
        var candidates: [URL] = []
        for start in [URL(fileURLWithPath: CommandLine.arguments[0]), Bundle.main.bundleURL] {
            var directory = start.deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(directory.appendingPathComponent("sessionkit"))
                directory.deleteLastPathComponent()
            }
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    // MARK: - Tokens typed at a terminal

    @Test func aTokenFromATerminalIsReadWithoutEchoAfterAPrompt() async throws {
        let prompts = Lock<[String]>([])
        var console = CapturedConsole(environment: [:]).console
        console.inputIsTerminal = true
        console.readLine = {
            Issue.record("a terminal is read without echo, never with readLine")
            return nil
        }
        console.readSecretLine = { prompt in
            prompts.withLock { $0.append(prompt) }
            return prompts.withLock { $0.count } == 1 ? "typed-token-a-0123" : "typed-token-b-0123"
        }
        let tokens = try CacheAudit.tokens([.standardInput, .standardInput], console: console)
        #expect(tokens == ("typed-token-a-0123", "typed-token-b-0123"))
        #expect(prompts.withLock { $0 } == ["user A's token (not shown): ", "user B's token (not shown): "])
    }

    /// Through a real pseudo-terminal: what is typed is not echoed back.
    @Test func theTerminalDoesNotEchoTheToken() async throws {
        // glibc's pseudo-terminal calls are not in the Glibc module (they need _XOPEN_SOURCE): look them up.
        typealias Open = @convention(c) (Int32) -> Int32
        typealias Name = @convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32
        func function<T>(_ name: String, as: T.Type) throws -> T {
            unsafeBitCast(try #require(dlsym(UnsafeMutableRawPointer(bitPattern: 0), name)), to: T.self)
        }
        let master = try function("posix_openpt", as: Open.self)(O_RDWR | O_NOCTTY)
        try #require(master >= 0)
        defer { close(master) }
        try #require(try function("grantpt", as: Open.self)(master) == 0)
        try #require(try function("unlockpt", as: Open.self)(master) == 0)
        var path = [CChar](repeating: 0, count: 128)
        try #require(try function("ptsname_r", as: Name.self)(master, &path, path.count) == 0)
        let name = String(decoding: path.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let terminal = open(name, O_RDWR | O_NOCTTY)
        try #require(terminal >= 0)
        defer { close(terminal) }

        let reader = Task.detached { () -> String? in
            TerminalInput.readWithoutEcho(prompt: "token: ", input: terminal) { _ in }
        }
        // Type once echo is off: poll the terminal's flags instead of sleeping a fixed time.
        var flags = termios()
        for _ in 0..<500 {
            if tcgetattr(terminal, &flags) == 0 && flags.c_lflag & tcflag_t(ECHO) == 0 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        let typed = "secret-typed-token\n"
        _ = typed.withCString { write(master, $0, strlen($0)) }
        #expect(await reader.value == "secret-typed-token")
        // What the terminal echoed back to the master side.
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(master, &buffer, buffer.count)
        let echoed = count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : ""
        #expect(!echoed.contains("secret"), "echoed: \(echoed)")
        // Echo is back on afterwards.
        #expect(tcgetattr(terminal, &flags) == 0 && flags.c_lflag & tcflag_t(ECHO) != 0)
    }

    // MARK: - Pieces of tokens

    @Test func everyRunOfEightCharactersOfATokenIsScrubbed() {
        let token = "k7Qm2Zp9Xw4Rt8Ly3Nv6"
        #expect(TokenScrubber.scrub("full \(token) end", secrets: [token]) == "full \(Redaction.redact(token)) end")
        #expect(TokenScrubber.scrub("cut k7Qm2Zp9Xw4R…", secrets: [token]) == "cut <redacted>…")
        #expect(TokenScrubber.scrub("middle Zp9Xw4Rt8L!", secrets: [token]) == "middle <redacted>!")
        #expect(TokenScrubber.scrub("short k7Qm2Zp end", secrets: [token]) == "short k7Qm2Zp end", "7 characters stay")
        #expect(TokenScrubber.scrub("tiny abc", secrets: ["abc"]) == "tiny \(Redaction.redact("abc"))")
    }
}
