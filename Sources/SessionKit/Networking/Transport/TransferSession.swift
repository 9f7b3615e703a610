import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What one transfer task hears from its `URLSession`, in order, on the session's serial delegate queue.
struct TransferEvents: Sendable {
    /// The response head arrived (a data or upload task).
    var response: (@Sendable (HTTPURLResponse) -> Void)?
    /// A chunk of the body arrived.
    var data: (@Sendable (Data) -> Void)?
    /// Part of the request body left: bytes sent so far, and the total, or a negative number when unknown.
    var sent: (@Sendable (_ total: Int64, _ expected: Int64) -> Void)?
    /// The task finished: `nil` on success. The last event of a task; it runs exactly once.
    var completed: @Sendable ((any Error)?) -> Void
}

/// The `URLSession` a ``UserSession`` uses for uploads, downloads, byte streams and WebSockets: the transfers
/// whose bodies must stream (never held whole in memory) and report progress, which takes a delegate.
///
/// It is created on a session's first transfer, under the lock that guards `isActive`, shares the session's cookie
/// storage (nothing of another session's), has no cache, and is invalidated when the session ends: ``endAll()``
/// cancels every task through the delegate queue (so no cancellation races a completion, see
/// `cancelWithoutRacingCompletion`) and then invalidates the session.
final class TransferSession: Sendable {
    let urlSession: URLSession
    private let delegate: TransferDelegate

    /// Creates the transfer session of a user session.
    ///
    /// - Parameters:
    ///   - cookies: The user session's own cookie storage.
    ///   - idleTimeout: How long a transfer may go without a byte moving before it fails.
    init(cookies: HTTPCookieStorage?, idleTimeout: TimeInterval) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = cookies
        configuration.httpShouldSetCookies = true
        configuration.timeoutIntervalForRequest = idleTimeout
        let delegate = TransferDelegate()
        self.delegate = delegate
        // A serial delegate queue (the default): events of one task arrive in order, and
        // `cancelWithoutRacingCompletion` relies on it.
        self.urlSession = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// Registers `task`'s events; call before the task starts.
    func register(_ task: URLSessionTask, _ events: TransferEvents) {
        delegate.register(task, events)
    }

    /// How many transfers have not finished (for tests).
    var inFlight: Int { delegate.tasks.count }

    /// Cancels every task and invalidates the session. The caller has already made sure no task can be created
    /// any more.
    func endAll() {
        urlSession.cancelWithoutRacingCompletion(delegate.tasks, thenInvalidate: true)
    }

    /// Cancels one task, from the delegate queue.
    func cancel(_ task: URLSessionTask) {
        urlSession.cancelWithoutRacingCompletion([task])
    }
}

/// Routes each task's delegate calls to the events it registered.
private final class TransferDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private let registered = Lock<[Int: (task: URLSessionTask, events: TransferEvents)]>([:])

    func register(_ task: URLSessionTask, _ events: TransferEvents) {
        registered.withLock { $0[task.taskIdentifier] = (task, events) }
    }

    var tasks: [URLSessionTask] { registered.withLock { $0.values.map(\.task) } }

    private func events(of task: URLSessionTask) -> TransferEvents? {
        registered.withLock { $0[task.taskIdentifier]?.events }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse { events(of: dataTask)?.response?(http) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        events(of: dataTask)?.data?(data)
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        events(of: task)?.sent?(totalBytesSent, totalBytesExpectedToSend)
    }

    /// Never follows: the 3xx is the attempt's answer, and the session's loop decides the next hop
    /// (``RedirectDecision``), so no credential header is copied to another origin. A WebSocket handshake that is
    /// redirected fails.
    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        RedirectRefusal.refuse(task, completionHandler)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let entry = registered.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        entry?.events.completed(error)
    }
}
