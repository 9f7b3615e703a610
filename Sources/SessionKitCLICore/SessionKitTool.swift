import Foundation
import SessionKit

/// The `sessionkit` command-line tool: `demo`, `audit cache`, `audit logout`, `audit redirects`.
///
/// The executable is a thin `main.swift` over ``run(_:)``; the logic lives here so that tests can drive it.
public enum SessionKitTool {
    /// The version `sessionkit --version` prints: CHANGELOG.md's newest heading, and the one README.md and Getting
    /// Started name (`PackageManifestTests` checks them).
    public static let version = "0.2.0"

    /// Runs the tool with the process's standard streams and environment.
    ///
    /// - Parameter arguments: The arguments after the program name.
    /// - Returns: The exit status: 0 ok, 1 a leak, 2 a usage error, 3 a check that could not be made (or the
    ///   output could not be written).
    public static func run(_ arguments: [String]) async -> Int32 {
        await run(arguments, console: .system()).rawValue
    }

    /// Runs the tool with `console`, then reports a standard output that could not be written (closed, full, a
    /// pipe nobody reads) on standard error, with status 3 unless the run already failed.
    static func run(_ arguments: [String], console: Console) async -> ExitCode {
        let status = await runCommand(arguments, console: console)
        guard let failure = console.outputFailure() else { return status }
        console.error("could not write to standard output: \(failure)")
        return status == .ok || status == .leak ? .failure : status
    }

    private static func runCommand(_ arguments: [String], console: Console) async -> ExitCode {
        let command: Command
        do {
            command = try CommandLineParser.parse(arguments)
        } catch {
            return usage(error, console: console)
        }
        switch command {
        case .help(let topic):
            console.writeOutput(Usage.text(topic))
            return .ok
        case .version:
            console.print("sessionkit \(version)")
            return .ok
        case .demo(let options):
            return await demo(options, console: console)
        case .auditCache(let options):
            let tokens: (String, String)
            do {
                tokens = try CacheAudit.tokens(options.tokens, console: console)
            } catch {
                return usage(error, console: console)
            }
            return await CacheAudit.run(options, tokens: tokens, console: console.scrubbing([tokens.0, tokens.1]))
        case .auditLogout(let options):
            let tokens: (access: String, refresh: String)
            do {
                tokens = try LogoutAudit.tokens(options, console: console)
            } catch {
                return usage(error, console: console)
            }
            return await LogoutAudit.run(
                options, tokens: tokens, console: console.scrubbing([tokens.access, tokens.refresh]))
        case .auditRedirects(let options):
            let token: String
            do {
                token = try RedirectAudit.token(options, console: console)
            } catch {
                return usage(error, console: console)
            }
            return await RedirectAudit.run(options, token: token, console: console.scrubbing([token]))
        case .timeline(let options):
            return Timeline.run(options, console: console)
        }
    }

    /// One line saying what is wrong, and one pointing to the help: not the whole help text.
    private static func usage(_ error: UsageError, console: Console) -> ExitCode {
        console.error(error.message)
        console.writeError("Try '\(Usage.helpCommand(error.topic))' for more information.\n")
        return .usage
    }

    static func demo(_ options: DemoOptions, console: Console) async -> ExitCode {
        let scenarios = DemoRunner.selected(options.only)
        guard !scenarios.isEmpty else {
            return usage(
                UsageError(
                    "no scenario id starts with that; the ids are "
                        + DemoRunner.scenarios.map(\.id).joined(separator: ", "), topic: .demo),
                console: console)
        }
        let clock = ContinuousClock()
        let started = clock.now
        let showProgress = console.errorIsTerminal
        let outcomes = await DemoRunner.run(scenarios, seed: options.seed) { index, id in
            if showProgress { console.writeError("\r\u{1B}[K[\(index + 1)/\(scenarios.count)] \(id)") }
        }
        if showProgress { console.writeError("\r\u{1B}[K") }
        let elapsed = started.duration(to: clock.now)
        var results: [ScenarioResult] = []
        var failures: [DemoRunner.Failure] = []
        for outcome in outcomes {
            switch outcome {
            case .success(let result): results.append(result)
            case .failure(let failure): failures.append(failure)
            }
        }
        if options.json {
            console.print(DemoReport.json(results, seed: options.seed))
        } else {
            console.print(
                TextLayout.paragraph(
                    "Each scenario runs twice against servers on this machine: the naive way (the patterns apps "
                        + "write) and with SessionKit. \"LEAKED\" is read from server logs, credential stores and "
                        + "app state after the run."))
            console.print()
            console.print(DemoReport.table(results, colour: console.usesColour))
            console.print()
            console.print(DemoReport.footer(results, seed: options.seed, elapsed: elapsed))
        }
        for failure in failures { console.error("scenario \(failure.id) could not run: \(failure.message)") }
        return exitCode(results, failures: failures.count)
    }

    /// The demo's exit status: 3 when a scenario could not run, 1 when a SessionKit row leaked, else 0. The naive
    /// rows do not count: they are expected to leak.
    static func exitCode(_ results: [ScenarioResult], failures: Int) -> ExitCode {
        if failures > 0 { return .failure }
        return results.contains(where: \.sessionKit.leaked) ? .leak : .ok
    }
}
