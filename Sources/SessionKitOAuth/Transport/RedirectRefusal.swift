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
package final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    /// The one instance: it holds nothing.
    package static let shared = RedirectRefusal()

    package func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        Self.refuse(task, completionHandler)
    }

    /// Answers a redirect of `task` with `nil` (the 3xx is the answer), unless the task's cancellation has begun.
    ///
    /// FoundationNetworking cancels in two hops on the task's work queue, and the second stops the transfer; an
    /// answer given after the first hop is handled after the second, and stops the process ("Received callback for
    /// HTTP redirection, but we're not waiting for it"). Left unanswered, the cancellation completes the task. The
    /// state is read where no cancellation can begin between the read and the answer: on the work queue itself (a
    /// session with ``ImmediateDelegateQueue``), or on the serial delegate queue that every cancellation of the
    /// session is started from (`cancelWithoutRacingCompletion`).
    ///
    /// - Parameters:
    ///   - task: The redirected task.
    ///   - completionHandler: The delegate method's completion handler.
    package static func refuse(_ task: URLSessionTask, _ completionHandler: (URLRequest?) -> Void) {
        #if canImport(FoundationNetworking)
            if task.state == .canceling { return }
        #endif
        completionHandler(nil)
    }
}
