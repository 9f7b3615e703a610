/// A benchmark: the figures it produces, and how to measure them.
struct Benchmark: Sendable {
    /// The names of the results it produces, so `--only` can select it before it runs.
    var resultNames: [String]
    /// Measures and returns the results (some or all of ``resultNames``).
    var run: @Sendable () async throws -> [BenchResult]

    /// Whether any of its results is selected by `prefix`.
    func isSelected(by prefix: String?) -> Bool {
        guard let prefix else { return true }
        return resultNames.contains { $0.hasPrefix(prefix) }
    }
}

/// Every benchmark the tool knows, in the order it runs them. Add new ones here.
enum Benchmarks {
    static let all: [Benchmark] = LocalServerBenchmarks.all
}
