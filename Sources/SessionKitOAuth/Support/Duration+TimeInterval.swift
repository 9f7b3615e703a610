import Foundation

extension Duration {
    /// The duration in seconds, as Foundation's `TimeInterval`.
    package var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }

    /// The duration as a `URLSession` timeout.
    ///
    /// FoundationNetworking (Linux) arms its timeout timer with the interval truncated to whole seconds, so a
    /// timeout under one second fires at once and fails every request; there the interval is rounded up to whole
    /// seconds, which waits a little longer than asked rather than not at all.
    package var urlSessionTimeout: TimeInterval {
        #if canImport(FoundationNetworking)
            return max(timeInterval.rounded(.up), 1)
        #else
            return timeInterval
        #endif
    }
}
