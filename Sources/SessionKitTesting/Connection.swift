/// One accepted connection, as the I/O thread sees it: its parser, its phase and its clocks.
///
/// Confined to the I/O thread; what handler tasks also touch lives in ``ConnectionChannel``.
final class Connection {
    enum Phase {
        /// Reading requests and writing responses.
        case open
        /// Sending is shut down; input is read and dropped until the peer closes or the deadline passes, so
        /// closing does not reset the connection before the client has read the last response.
        case draining(deadline: ContinuousClock.Instant)
    }

    let channel: ConnectionChannel
    var parser: HTTPParser
    var phase = Phase.open
    var isClosed = false
    /// When bytes last arrived.
    var lastActivity: ContinuousClock.Instant
    /// When the first byte of the request being received arrived, while one is.
    var requestStartedAt: ContinuousClock.Instant?
    /// When to look again at a connection whose handler is still running (to arm its idle timeout once the
    /// handler answers without waking the I/O thread).
    var respondingCheck: ContinuousClock.Instant?

    init(channel: ConnectionChannel, limits: HTTPParser.Limits, now: ContinuousClock.Instant) {
        self.channel = channel
        parser = HTTPParser(limits: limits)
        lastActivity = now
    }

    var id: Int { channel.id }
}
