/// The few statistics the benchmarks report: medians of repetitions, so one disturbed repetition on a shared
/// machine moves nothing.
enum Statistics {
    /// The median of `values`, or NaN when there are none.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
    }

    /// `duration` in seconds.
    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }

    /// `duration` in microseconds.
    static func microseconds(_ duration: Duration) -> Double {
        seconds(duration) * 1e6
    }
}
