import Foundation

/// sessionkit-bench: runs SessionKit's benchmarks (build with `-c release`) and prints a table, or JSON.
///
///     swift run -c release sessionkit-bench [--json] [--only <prefix>]

let usage = "usage: sessionkit-bench [--json] [--only <name prefix>]\n"
var asJSON = false
var prefix: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--json":
        asJSON = true
    case "--only":
        guard let value = arguments.popFirst() else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(2)
        }
        prefix = value
    case "-h", "--help":
        print(usage, terminator: "")
        exit(0)
    default:
        FileHandle.standardError.write(Data("sessionkit-bench: unknown argument \(argument)\n\(usage)".utf8))
        exit(2)
    }
}

let selected = Benchmarks.all.filter { $0.isSelected(by: prefix) }
guard !selected.isEmpty else {
    FileHandle.standardError.write(Data("sessionkit-bench: no benchmark matches \(prefix ?? "")\n".utf8))
    exit(2)
}

var results: [BenchResult] = []
var failed = false
for benchmark in selected {
    do {
        let produced = try await benchmark.run()
        results += produced.filter { prefix == nil || $0.name.hasPrefix(prefix!) }
    } catch {
        failed = true
        FileHandle.standardError.write(
            Data("sessionkit-bench: \(benchmark.resultNames.joined(separator: ", ")) failed: \(error)\n".utf8))
    }
}
print(asJSON ? BenchReport.json(results) : BenchReport.table(results))
exit(failed ? 1 : 0)
