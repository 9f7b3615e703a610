import Dispatch
import Synchronization

/// A wall-clock deadline on one HTTP exchange, enforced by SessionKit rather than left to `URLSession`.
///
/// FoundationNetworking (Linux) does not enforce `timeoutIntervalForResource`, and `timeoutIntervalForRequest` is
/// an idle timeout: a server that sends one byte a second holds a request for as long as it likes. A deadline
/// runs one timer (a `DispatchSourceTimer`) from its creation; when it fires first, it runs `expire` (which
/// cancels the exchange, through its session's delegate queue) and ``hasExpired`` becomes `true`, so that the
/// cancellation the exchange then reports can be told apart from the caller's and read as a timeout.
///
/// It measures real time on the system's monotonic clock, never an injected ``SessionClock``: a test that moves
/// a manual clock by an hour must not end the requests in flight, and a real server is just as slow whatever
/// the test's clock says.
///
/// - Important: Call ``cancel()`` once the exchange has an answer, so the timer stops at once instead of
///   firing later; the deadline holds `expire` until then. Not `Sendable`: it belongs to the one call that sends
///   the exchange, and only its timer's handler runs elsewhere.
final class RequestDeadline {
    /// Whether the deadline fired: shared with the timer's handler, which may run on another thread.
    private final class Flag: Sendable {
        let fired = Atomic<Bool>(false)
    }

    private let timer: any DispatchSourceTimer
    private let flag = Flag()

    /// The queue every deadline's timer fires on: what it runs only hands the cancellation on.
    private static let queue = DispatchQueue(label: "SessionKit.RequestDeadline")

    /// Starts the timer.
    ///
    /// - Parameters:
    ///   - duration: How long the exchange may take from now.
    ///   - expire: What to run if the deadline passes before ``cancel()``: cancel the exchange. It runs once, on
    ///     a background queue, and must not block.
    init(after duration: Duration, expire: @escaping @Sendable () -> Void) {
        let timer = DispatchSource.makeTimerSource(queue: Self.queue)
        self.timer = timer
        timer.setEventHandler { [flag] in
            guard !flag.fired.exchange(true, ordering: .acquiringAndReleasing) else { return }
            expire()
        }
        // Clamped to a century, which no exchange waits for, so the nanoseconds cannot overflow.
        let (seconds, attoseconds) = min(max(duration, .zero), .seconds(3_155_760_000)).components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .never, leeway: .milliseconds(10))
        timer.activate()
    }

    /// Whether the deadline passed before ``cancel()``, and the exchange was cancelled for it.
    var hasExpired: Bool { flag.fired.load(ordering: .acquiring) }

    /// Stops the timer; `expire` will not run if it has not already. Idempotent.
    func cancel() {
        timer.cancel()
    }

    deinit {
        timer.cancel()
    }
}
