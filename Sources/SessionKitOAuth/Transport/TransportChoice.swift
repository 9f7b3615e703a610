import Foundation

/// Which transport a session's requests run on: the process's choice (``process``), or a session's own
/// (`UserSession.Configuration.transport`, for tests that must exercise one whatever the process chose).
///
/// On Linux the environment chooses, read once: `SESSIONKIT_TRANSPORT=libcurl` runs the data route on the libcurl
/// transport (`CurlClient`), anything else on FoundationNetworking's `URLSession`. Apple platforms always use
/// `URLSession`. The libcurl transport is not yet the default: only the data route (`data(for:)`) runs on it, and
/// `scripts/test` runs the suites on both.
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
