/// A `ContinuousClock.Instant` kept as the `Duration` since a fixed instant of the process, for values that live
/// on every request's path.
///
/// `ContinuousClock.Instant`'s layout is known only inside the standard library (it is not frozen), so every struct
/// that stores one has no fixed layout either: copying it, testing an optional of it, or finding a field after it
/// in a lock's storage goes through the runtime's metadata and value witnesses. `Duration` is frozen, so a value
/// that stores this instead is laid out at compile time. The conversion is exact both ways (an instant is a
/// `Duration` inside), and instants of any clock position, a test's manual clock far from now included, convert.
struct StoredInstant: Hashable, Comparable, Sendable {
    /// The instant every stored instant is counted from: the first use, in this process.
    private static let origin = ContinuousClock.now

    /// The time from ``origin`` to the instant (negative before it).
    let sinceOrigin: Duration

    /// Stores `instant`.
    @inline(__always)
    init(_ instant: ContinuousClock.Instant) {
        sinceOrigin = Self.origin.duration(to: instant)
    }

    /// The instant stored.
    var instant: ContinuousClock.Instant { Self.origin.advanced(by: sinceOrigin) }

    static func < (lhs: StoredInstant, rhs: StoredInstant) -> Bool { lhs.sinceOrigin < rhs.sinceOrigin }
}
