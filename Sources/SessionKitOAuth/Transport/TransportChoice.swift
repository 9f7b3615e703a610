import Foundation

/// Which transport a session's requests run on: the process's choice (``process``), or a session's own
/// (`UserSession.Configuration.transport`, for tests that must exercise one whatever the process chose).
///
/// On Linux the environment chooses, read once: `SESSIONKIT_TRANSPORT=libcurl` runs a process on the libcurl
/// transport (`CurlClient`): a session's data requests, transfers, byte streams and handed-off writes, and the OAuth
/// client's exchanges (a WebSocket stays on `URLSession`: Debian's libcurl 7.88 has no WebSocket support). Anything
/// else runs on FoundationNetworking's `URLSession`, as Apple platforms always do. It is not the default yet: at
/// 10,000 randomized schedules (`InterleavingTests`) a run on libcurl can stop with an await never answered, not yet
/// explained (issue 49). `scripts/test` runs every suite on both.
package enum TransportChoice: Sendable, Equatable {
    case urlSession
    case libcurl

    /// This process's choice.
    package static let process: TransportChoice = {
        #if os(Linux)
            ProcessInfo.processInfo.environment["SESSIONKIT_TRANSPORT"] == "libcurl" ? .libcurl : .urlSession
        #else
            .urlSession
        #endif
    }()
}
