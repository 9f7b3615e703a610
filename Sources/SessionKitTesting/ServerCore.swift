import Foundation
import SessionKit

/// The state a running ``LocalServer`` shares between its facade, its I/O thread and its handlers' tasks:
/// routes, the request log, and the mailbox through which anyone asks the I/O thread to act.
final class ServerCore: Sendable {
    /// What the I/O thread is asked to do when it wakes.
    struct Mail {
        /// Stop: close everything and exit.
        var stop: Bool
        /// Connections whose response was handed over and that need the I/O thread.
        var ready: [Int]
    }

    private struct Mailbox {
        var ready: [Int] = []
        var stopRequested = false
        var wakePending = false
        var exited = false
        var wakeDescriptor: Int32
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
    }

    let configuration: LocalServer.Configuration
    private let routes: Lock<RouteTable>
    private let log = Lock<[LocalServer.Request]>([])
    private let mailbox: Lock<Mailbox>

    init(configuration: LocalServer.Configuration, fallback: @escaping LocalServer.Handler, wakeDescriptor: Int32) {
        self.configuration = configuration
        routes = Lock(RouteTable(fallback: fallback))
        mailbox = Lock(Mailbox(wakeDescriptor: wakeDescriptor))
    }

    // MARK: - Routes and log

    func setRoute(method: String?, path: String, handler: LocalServer.Handler?) {
        routes.withLock { $0.setRoute(method: method, path: path, handler: handler) }
    }

    /// Appends to the request log; called by the I/O thread only, so the log is in arrival order.
    func record(_ request: LocalServer.Request) {
        guard configuration.recordsRequests else { return }
        log.withLock { $0.append(request) }
    }

    var requests: [LocalServer.Request] { log.withLock { $0 } }

    func clearRequests() {
        log.withLock { $0.removeAll() }
    }

    // MARK: - Answering

    /// Runs the handler for a request and hands the response to its connection. Runs in the request's task.
    func respond(to request: LocalServer.Request, on channel: ConnectionChannel, keepAlive: Bool) async {
        let handler = routes.withLock { $0.handler(method: request.method, path: request.path) }
        let response = await handler(request)
        if let delay = response.delay {
            do {
                try await Task.sleep(for: delay)
            } catch {
                return  // Cancelled: the connection is closed or closing; there is nobody to answer.
            }
        }
        let output = HTTPResponseSerializer.serialize(response, requestMethod: request.method, keepAlive: keepAlive)
        if case .trickle(let interval) = response.fault {
            return await trickle(
                output.bytes, then: HTTPResponseSerializer.trickleBody(of: response), every: interval, on: channel)
        }
        if channel.complete(with: output.bytes, closeAfterwards: output.closeAfterwards) {
            post { $0.ready.append(channel.id) }
        }
    }

    /// Writes `head`, then one byte of `body` every `interval`, round and round, without ever handing the response
    /// over: the connection stays busy with this request until the client closes it (which cancels this task) or
    /// the server stops.
    private func trickle(_ head: [UInt8], then body: [UInt8], every interval: Duration, on channel: ConnectionChannel)
        async
    {
        var next = 0
        var bytes = head
        while true {
            switch channel.stream(bytes) {
            case .closed: return
            case .queued: post { $0.ready.append(channel.id) }  // the I/O thread finishes writing what is queued
            case .sent: break
            }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return  // Cancelled: the client went away or the server is stopping.
            }
            bytes = [body[next % body.count]]
            next += 1
        }
    }

    // MARK: - Mailbox

    /// Asks the I/O thread to stop, without waiting for it.
    func requestStop() {
        post { $0.stopRequested = true }
    }

    /// Asks the I/O thread to stop and waits until it has closed every socket.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyStopped = mailbox.withLock { mailbox in
                guard !mailbox.exited else { return true }
                mailbox.stopWaiters.append(continuation)
                mailbox.stopRequested = true
                Self.wake(&mailbox)
                return false
            }
            if alreadyStopped { continuation.resume() }
        }
    }

    /// Takes what the I/O thread was asked to do. Called by the I/O thread once the wake pipe is drained.
    func takeMail() -> Mail {
        mailbox.withLock { mailbox in
            mailbox.wakePending = false
            defer { mailbox.ready.removeAll(keepingCapacity: true) }
            return Mail(stop: mailbox.stopRequested, ready: mailbox.ready)
        }
    }

    /// Records that the I/O thread has closed everything, closes the wake pipe, and releases `stop()` callers.
    func finishStopping() {
        let waiters = mailbox.withLock { mailbox in
            mailbox.exited = true
            Socket.close(mailbox.wakeDescriptor)
            defer { mailbox.stopWaiters = [] }
            return mailbox.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func post(_ change: (inout Mailbox) -> Void) {
        mailbox.withLock { mailbox in
            guard !mailbox.exited else { return }
            change(&mailbox)
            Self.wake(&mailbox)
        }
    }

    /// Writes to the wake pipe once per wake-up. Under the lock, so it never writes after the pipe is closed.
    private static func wake(_ mailbox: inout Mailbox) {
        guard !mailbox.wakePending else { return }
        mailbox.wakePending = true
        Socket.signal(mailbox.wakeDescriptor)
    }
}
