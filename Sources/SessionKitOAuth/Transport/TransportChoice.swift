import Foundation

/// Which transport a session's requests run on: the process's choice (``process``), or a session's own
/// (`UserSession.Configuration.transport`, for tests that must exercise one whatever the process chose).
///
/// On Linux the libcurl transport (`CurlClient`) is the default: `SESSIONKIT_TRANSPORT=urlsession`, read once, runs
/// the process on FoundationNetworking's `URLSession` instead (what Apple platforms always use, and what
/// `scripts/test` runs every suite on a second time). On libcurl a session's data requests, transfers, byte streams
/// and handed-off writes, and the OAuth client's exchanges, run on the transport; a WebSocket stays on `URLSession`,
/// which gives it its own libcurl, since Debian's libcurl 7.88 is built without WebSocket support.
package enum TransportChoice: Sendable, Equatable {
    case urlSession
    case libcurl

    /// This process's choice.
    package static let process: TransportChoice = {
        #if os(Linux)
            ProcessInfo.processInfo.environment["SESSIONKIT_TRANSPORT"] == "urlsession" ? .urlSession : .libcurl
        #else
            .urlSession
        #endif
    }()
}
