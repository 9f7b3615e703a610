import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension URLSession {
    /// A session for requests that carry a credential to one endpoint (token, revocation, an audited API): it
    /// neither answers from nor keeps a cache, carries and keeps no cookies, stores no credentials, and follows
    /// no redirect, so the response to a credential-bearing request is the 3xx itself and the credential is never
    /// posted anywhere else.
    ///
    /// - Parameter timeout: The request and resource timeouts, in seconds; `nil` keeps URLSession's defaults. They
    ///   are not deadlines on Linux (FoundationNetworking ignores the resource timeout, and the request timeout
    ///   only bounds silence): a caller that promises a deadline enforces it itself, as ``OAuthClient`` does.
    /// - Returns: A new session with a serial delegate queue (what ``cancelWithoutRacingCompletion(_:thenInvalidate:)``
    ///   needs).
    package static func credentialExchange(timeout: TimeInterval?) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCredentialStorage = nil
        if let timeout {
            configuration.timeoutIntervalForRequest = timeout
            configuration.timeoutIntervalForResource = timeout
        }
        return URLSession(configuration: configuration, delegate: RedirectRefusal.shared, delegateQueue: nil)
    }
}
