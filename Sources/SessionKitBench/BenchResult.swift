/// One measured figure.
struct BenchResult: Sendable, Equatable {
    /// A dotted name, such as `localserver.ratio.sequential`; `--only` selects by its prefix.
    var name: String
    /// The figure.
    var value: Double
    /// Its unit, such as `req/s` or `x` (a ratio).
    var unit: String
}
