import Foundation
import SessionKitTesting

/// When requests start and when the user logs out, in `logout-in-flight`: Poisson arrivals at rate λ, each
/// served in W, and a logout at a random moment, all drawn from a seed.
///
/// By Little's law the average number in flight is L = λW; with Poisson arrivals, the chance that nothing is in
/// flight at a given moment is e^-L.
struct ArrivalSchedule: Sendable, Equatable {
    /// λ, requests per second.
    static let rate = 2.0
    /// W, the server's latency.
    static let latency = Duration.milliseconds(600)
    /// The earliest logout, so the app has reached its steady state.
    static let earliestLogout = 1.5
    /// The latest logout; the run ends one latency after it.
    static let latestLogout = 2.5

    /// L = λW.
    static var expectedInFlight: Double { rate * latency.seconds }
    /// e^-L: the chance that nothing is in flight at the moment of logout.
    static var chanceNothingInFlight: Double { exp(-expectedInFlight) }

    /// When each request starts, from the start of the run, in order; all before ``logout``.
    let arrivals: [Duration]
    /// When the user logs out.
    let logout: Duration

    /// Draws a schedule.
    ///
    /// - Parameter seed: The seed.
    init(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let logoutSeconds = Double.random(in: Self.earliestLogout..<Self.latestLogout, using: &random)
        var arrivals: [Duration] = []
        var time = 0.0
        while true {
            // Exponential gaps: -ln(1 - U) / λ.
            time += -log(1 - Double.random(in: 0..<1, using: &random)) / Self.rate
            guard time < logoutSeconds else { break }
            arrivals.append(.milliseconds(Int64(time * 1000)))
        }
        self.arrivals = arrivals
        self.logout = .milliseconds(Int64(logoutSeconds * 1000))
    }

    /// How many requests the schedule has in flight at the logout, if every one takes exactly W.
    var scheduledInFlight: Int {
        arrivals.filter { $0 > logout - Self.latency }.count
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
