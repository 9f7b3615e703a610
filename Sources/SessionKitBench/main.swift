import Foundation

/// sessionkit-bench: runs SessionKit's benchmarks (build with `-c release`) and prints a table, or JSON.
///
///     swift run -c release sessionkit-bench [--json] [--only <prefix>]

if CommandLine.arguments.dropFirst().first == CrossProcessBenchmarks.childArgument {
    signal(SIGPIPE, SIG_IGN)
    exit(await CrossProcessBenchmarks.runChild(Array(CommandLine.arguments.dropFirst(2))))
}

let arguments: BenchArguments
do {
    arguments = try BenchArguments.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("sessionkit-bench: \(error)\n\(BenchArguments.usage)\n".utf8))
    exit(2)
}
if arguments.help {
    print(BenchArguments.usage)
    exit(0)
}
if let variant = arguments.profile {
    exit(ProfileLoop.runBlockingMainThread(variant, requests: arguments.requests, server: arguments.url))
}
if arguments.serve {
    exit(ServeMode.runBlockingMainThread())
}

let selected = Benchmarks.selected(by: arguments.prefix)
guard !selected.isEmpty else {
    FileHandle.standardError.write(Data("sessionkit-bench: no benchmark matches \(arguments.prefix ?? "")\n".utf8))
    exit(2)
}

var results: [BenchResult] = []
var failed = false
let started = ContinuousClock.now
for benchmark in selected {
    do {
        results += arguments.filter(try await benchmark.run())
    } catch {
        failed = true
        FileHandle.standardError.write(
            Data("sessionkit-bench: \(benchmark.resultNames.joined(separator: ", ")) failed: \(error)\n".utf8))
    }
}
BenchLog.note(
    "sessionkit-bench: finished in \(BenchLog.rounded(Statistics.seconds(ContinuousClock.now - started), 1)) s")
print(arguments.json ? BenchReport.json(results) : BenchReport.table(results))
exit(failed ? 1 : 0)
