import Foundation

/// The loopback redirect a command-line or desktop app's browser sign-in ends on (RFC 8252 §7.3): its path, the
/// pages the browser sees and how long a connection may take.
///
/// ``OAuthClient/authorizeInBrowser(scope:additionalParameters:expectedIssuer:listener:timeout:open:)`` and
/// ``OpenIDProvider/authorizeInBrowser(scope:additionalParameters:listener:timeout:open:)`` bind a listener on
/// `127.0.0.1` with it for one sign-in, and close it when the sign-in ends. What the listener accepts:
/// - Exactly one callback: the first `GET` of ``path``, whatever its query says. Once it has arrived the listening
///   socket is closed, so a second callback finds nothing listening (connection refused); one already connected is
///   answered with ``failurePage`` and never delivered.
/// - A request for another path (`/favicon.ico`) is answered 404, another method 405, a `Host` other than
///   `127.0.0.1:PORT` 421, a head longer than 8 KiB 431, anything that is not HTTP/1.x 400; none of them uses up
///   the callback. Connections are served side by side: one that sends nothing is closed after
///   ``connectionTimeout`` and never delays another.
/// - The callback is read by ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)``: `state` must match,
///   an error response becomes its typed error (`access_denied` is `.accessDenied`).
///
/// The browser is answered with ``successPage`` when the code was delivered and ``failurePage`` otherwise; nothing
/// from the callback is ever echoed into a page or an error.
public struct LoopbackRedirect: Sendable {
    /// The callback path: `/` followed by RFC 3986 path characters, without percent-encoding or a query.
    public var path: String
    /// The page a browser sees when the code was delivered.
    public var successPage: Page
    /// The page a browser sees when the callback was refused (wrong state, an error response, a second one).
    public var failurePage: Page
    /// How long one connection may take from its acceptance to the end of its answer: a connection that
    /// sends nothing, or too slowly, is closed after it (browsers open idle connections speculatively).
    public var connectionTimeout: Duration

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - path: The callback path; `/callback` by default.
    ///   - successPage: The page after a delivered code; ``Page/signedIn`` by default.
    ///   - failurePage: The page after a refused callback; ``Page/signInFailed`` by default.
    ///   - connectionTimeout: The bound on one connection; 10 seconds by default, at most 5 minutes.
    public init(
        path: String = "/callback", successPage: Page = .signedIn, failurePage: Page = .signInFailed,
        connectionTimeout: Duration = .seconds(10)
    ) {
        self.path = path
        self.successPage = successPage
        self.failurePage = failurePage
        self.connectionTimeout = connectionTimeout
    }

    /// An HTML page the listener answers the browser with.
    ///
    /// It is served with `Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'`: the browser
    /// shows it at a URL that carries the authorization code, so it runs no script and loads nothing (inline
    /// styles only), and `Referrer-Policy: no-referrer`.
    public struct Page: Sendable, Equatable {
        /// The longest page, in UTF-8 bytes.
        public static let maximumSize = 65_536

        /// The whole document.
        public let html: String

        /// A page from a whole HTML document the app wrote.
        ///
        /// - Parameter html: The document; at most ``maximumSize`` bytes of UTF-8.
        /// - Throws: `SessionError(.invalidInput)` when it is longer.
        public init(html: String) throws {
            guard html.utf8.count <= Self.maximumSize else {
                throw SessionError(.invalidInput, "a loopback listener page is at most \(Self.maximumSize) bytes")
            }
            self.html = html
        }

        /// A plain page with a title and one paragraph, both escaped as HTML text.
        ///
        /// - Parameters:
        ///   - title: The document's title and heading.
        ///   - message: The paragraph below it.
        public init(title: String, message: String) {
            let title = Self.escaped(String(title.prefix(200)))
            let message = Self.escaped(String(message.prefix(2000)))
            html = """
                <!DOCTYPE html>
                <html lang="en"><head><meta charset="utf-8"><title>\(title)</title>
                <style>body{font:16px system-ui,sans-serif;margin:4em auto;max-width:32em;padding:0 1em}</style>
                </head><body><h1>\(title)</h1><p>\(message)</p></body></html>

                """
        }

        /// "Signed in": the user can close the tab and return to the app.
        public static let signedIn = Page(
            title: "Signed in", message: "You are signed in. You can close this tab and return to the app.")
        /// "Sign-in failed": the user returns to the app, which says why.
        public static let signInFailed = Page(
            title: "Sign-in failed", message: "Sign-in did not complete. Close this tab and return to the app.")

        private static func escaped(_ text: String) -> String {
            var result = ""
            for character in text {
                switch character {
                case "&": result += "&amp;"
                case "<": result += "&lt;"
                case ">": result += "&gt;"
                case "\"": result += "&quot;"
                case "'": result += "&#39;"
                default: result.append(character)
                }
            }
            return result
        }
    }
}

/// Receives the redirect that ends an authorization code grant in a command-line or desktop app, on a loopback
/// address of its own (RFC 8252 §7.3), as ``LoopbackRedirect`` describes: the mechanism behind
/// ``OAuthClient/authorizeInBrowser(scope:additionalParameters:expectedIssuer:listener:timeout:open:)``.
///
/// The listener binds `127.0.0.1` (the IPv4 loopback literal, never `localhost`, which may resolve elsewhere,
/// RFC 8252 §8.3) on a port the system picks, and gives the exact ``redirectURI`` to put in the request.
///
/// - Important: Thread-safe. One wait per listener: the listening socket is closed when the wait ends, however
///   it ends (callback, deadline, cancellation), and when the listener is released without a wait. The wait runs
///   on a thread of its own blocked in `poll`, so it uses neither the cooperative thread pool nor the processor;
///   its deadlines are therefore real time, the system's monotonic clock that `poll` counts in, not an injected
///   ``SessionClock``, which could not wake it.
package final class LoopbackRedirectListener: Sendable, CustomStringConvertible {
    /// What the listener serves and how long a connection may take.
    package typealias Configuration = LoopbackRedirect
    /// An HTML page the listener answers the browser with.
    package typealias Page = LoopbackRedirect.Page

    /// The redirect URI to register and send: `http://127.0.0.1:PORT/path`, exactly.
    package let redirectURI: String
    /// The port the system gave the listener.
    package let port: Int
    /// The configuration the listener was created with.
    package let configuration: Configuration
    private let storage: LoopbackListenerStorage

    /// Binds a listening socket on `127.0.0.1` with a port the system picks.
    ///
    /// Connections that arrive before ``authorizationCode(answering:expectedIssuer:timeout:)`` is called wait in
    /// the kernel's backlog: open the browser first, then wait.
    ///
    /// - Parameter configuration: The path, pages and connection bound.
    /// - Throws: `SessionError(.invalidInput)` for an unacceptable path or connection bound;
    ///   `.networkUnavailable` when the socket cannot be made (the message says which call failed).
    package init(configuration: Configuration = Configuration()) throws {
        guard LoopbackHTTP.isValidPath(configuration.path) else {
            throw SessionError(
                .invalidInput,
                "the loopback callback path must be \"/\" and RFC 3986 path characters, without \"%\", \"?\" or \"#\"")
        }
        guard configuration.connectionTimeout > .zero, configuration.connectionTimeout <= .seconds(300) else {
            throw SessionError(.invalidInput, "the loopback listener's connection timeout must be in (0, 5 min]")
        }
        let descriptors: LoopbackListenerStorage.Descriptors
        let port: Int
        do throws(LoopbackSocket.Failure) {
            let listener = try LoopbackSocket.makeListener(backlog: 32)
            do throws(LoopbackSocket.Failure) {
                let wake = try LoopbackSocket.makeWakePipe()
                descriptors = .init(listener: listener.descriptor, wakeReading: wake.reading, wakeWriting: wake.writing)
                port = listener.port
            } catch {
                LoopbackSocket.close(listener.descriptor)
                throw error
            }
        } catch {
            throw error.sessionError("the loopback redirect listener could not listen on 127.0.0.1")
        }
        self.port = port
        self.redirectURI = "http://127.0.0.1:\(port)\(configuration.path)"
        self.configuration = configuration
        self.storage = LoopbackListenerStorage(descriptors)
    }

    deinit {
        storage.release()
    }

    /// The redirect URI; no code or state ever appears here.
    package var description: String { "LoopbackRedirectListener(\(redirectURI))" }

    /// Waits for the one callback, answers the browser, and returns the authorization code it carries.
    ///
    /// The callback is read by `request`'s ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)``; the
    /// browser sees ``Configuration/successPage`` when it returns a code and ``Configuration/failurePage`` when it
    /// throws, and this method returns once the answer is sent. Whatever ends the wait, the listening socket and
    /// every connection are closed before it returns or throws.
    ///
    /// - Parameters:
    ///   - request: The authorization request the browser was sent with; its redirect URI must be ``redirectURI``.
    ///   - expectedIssuer: The authorization server's issuer, to check `iss` against (RFC 9207), or `nil`.
    ///   - timeout: The listener's own deadline, measured from this call on the system's monotonic clock (time
    ///     asleep included); 5 minutes by default.
    /// - Returns: The authorization code. It is a credential: do not log it.
    /// - Throws: ``SessionError``: what ``AuthorizationRequest/authorizationCode(from:expectedIssuer:)`` throws for
    ///   the callback (`.invalidInput` for a wrong state, `.accessDenied`, …); `.timedOut` when the deadline passes
    ///   first; `.invalidInput` for a request with another redirect URI, a timeout that is not positive, or a
    ///   listener that already waited; `.networkUnavailable` when a system call fails. `CancellationError` when
    ///   the calling task is cancelled.
    package func authorizationCode(
        answering request: AuthorizationRequest, expectedIssuer: String? = nil, timeout: Duration = .seconds(300)
    ) async throws -> String {
        guard request.redirectURI == redirectURI else {
            throw SessionError(.invalidInput, "the authorization request's redirect URI is not this listener's")
        }
        guard timeout > .zero else {
            throw SessionError(.invalidInput, "the loopback listener's timeout must be positive")
        }
        let deadline = ContinuousClock.now.advanced(by: timeout)
        let storage = storage
        let configuration = configuration
        let authority = "127.0.0.1:\(port)"
        let outcome: LoopbackCallbackLoop.Outcome = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let descriptors: LoopbackListenerStorage.Descriptors
                do {
                    descriptors = try storage.beginWaiting()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                // A cancellation that came before the wait began found nothing to wake.
                if Task.isCancelled { storage.cancel() }
                let thread = Thread {
                    var loop = LoopbackCallbackLoop(
                        listener: descriptors.listener, wake: descriptors.wakeReading, path: configuration.path,
                        authority: authority, deadline: deadline, connectionTimeout: configuration.connectionTimeout,
                        successPage: Array(configuration.successPage.html.utf8),
                        failurePage: Array(configuration.failurePage.html.utf8),
                        readCallback: { url in
                            Result { try request.authorizationCode(from: url, expectedIssuer: expectedIssuer) }
                                .mapError { $0 as? SessionError ?? SessionError(.malformedResponse, "\($0)") }
                        },
                        isCancelled: { storage.isCancelled })
                    let outcome = loop.run()
                    storage.finish()
                    continuation.resume(returning: outcome)
                }
                thread.name = "SessionKit loopback redirect listener"
                thread.start()
            }
        } onCancel: {
            storage.cancel()
        }
        switch outcome {
        case .delivered(let result): return try result.get()
        case .timedOut:
            throw SessionError(
                .timedOut, "no authorization callback reached \(redirectURI) within \(timeout); it is closed now")
        case .cancelled: throw CancellationError()
        case .failed(let error): throw error
        }
    }
}
