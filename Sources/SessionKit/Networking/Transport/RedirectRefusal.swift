import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A URLSession delegate that refuses every redirect, so the 3xx itself is the task's answer.
///
/// Every URLSession SessionKit sends a credential through has it: FoundationNetworking follows a redirect by copying
/// the original request's header fields, `Authorization` and `Cookie` included, to the new origin. A session's
/// requests follow redirects in ``UserSession/sendAuthorized(_:attempt:discard:)`` instead, by
/// ``RedirectDecision``; token exchanges and revocations never follow one.
final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    /// The one instance: it holds nothing.
    static let shared = RedirectRefusal()

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
