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
    /// In order: the cheap per-request figures first, while the process is small, then the memory figures, then
    /// the runs that create thousands of sessions and connections, and last the 10,000-cycle churn.
    static let all: [Benchmark] =
        RequestBenchmarks.all + RequestBlockBenchmarks.all + DPoPBenchmarks.all + RedirectBenchmarks.all
        + InstructionBenchmarks.all
        + LocalServerBenchmarks.all
        + CacheBenchmarks.all
        + SessionBenchmarks.all + CoalesceBenchmarks.all + CrossProcessBenchmarks.all + LogoutBenchmarks.all
        + VaultBenchmarks.all
        + FleetBenchmarks.all + ChurnBenchmarks.all + TransferBenchmarks.all
        + TransportBenchmarks.all

    /// The benchmarks that produce at least one result `prefix` selects; all of them for `nil`.
    static func selected(from benchmarks: [Benchmark] = all, by prefix: String?) -> [Benchmark] {
        benchmarks.filter { $0.isSelected(by: prefix) }
    }
}
