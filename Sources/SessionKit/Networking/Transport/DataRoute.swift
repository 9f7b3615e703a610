import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a session's data route runs on, chosen when the session is made (``TransportChoice``): a `URLSession` of
/// its own (Apple platforms, and Linux with `SESSIONKIT_TRANSPORT=urlsession`), or a libcurl client of its own (Linux's
/// default). Never both: a session on libcurl makes no `URLSession`, whose multi handle would hold two descriptors
/// and a FoundationNetworking loop for as long as the session lives, and whose invalidation at the end is the
/// teardown FoundationNetworking is known to crash in.
enum DataRoute: Sendable {
    /// FoundationNetworking's or Apple's `URLSession`, made for this session.
    case urlSession(URLSession)
    #if os(Linux)
        /// The transport's libcurl client, made for this session: its connections and TLS sessions are its own.
        case curl(CurlClient)
    #endif

    /// Makes the route `transport` names, with `configuration` for a `URLSession`.
    init(configuration: URLSessionConfiguration, transport: TransportChoice) {
        #if os(Linux)
            if transport == .libcurl {
                self = .curl(CurlClient())
                return
            }
            // Its completion handlers run on its own work queue (they only hand their answer on), not through an
            // operation queue's thread: the hop to that thread is a large share of a loopback request's latency on
            // Linux (BENCHMARKS.md).
            self = .urlSession(
                URLSession(
                    configuration: configuration, delegate: RedirectRefusal.shared,
                    delegateQueue: ImmediateDelegateQueue()))
        #else
            self = .urlSession(
                URLSession(configuration: configuration, delegate: RedirectRefusal.shared, delegateQueue: nil))
        #endif
    }
}
