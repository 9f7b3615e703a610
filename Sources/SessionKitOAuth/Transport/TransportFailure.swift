import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a failure below HTTP means, whoever sent the request: the one reading of `URLError` codes in SessionKit.
///
/// A session's requests and transfers (`TransportFailure`) and the OAuth client (`OAuthTransport`) phrase their
/// errors differently — a session knows whether a request may be replayed, an OAuth client names its endpoint —
/// but both start from this classification, so the platform's quirks are read in one place.
package enum TransportFailureKind: Equatable {
    /// The task was cancelled: by its session's end, by its caller, or at a deadline SessionKit enforces.
    case cancelled
    /// The task timed out (an idle timeout of `URLSession`).
    case timedOut
    /// The request certainly never reached the server (no connection, no host, a bad URL).
    case notSent
    /// The server answered with something that is not a valid HTTP response.
    case malformedAnswer
    /// The connection closed before any byte of an answer arrived.
    case closedWithoutAnswer
    /// Any other failure below HTTP, or an error that is not a `URLError`.
    case failed

    /// Classifies `error`.
    ///
    /// - Parameters:
    ///   - error: What the task failed with.
    ///   - wasHTTP: Whether the request's URL was `http` or `https`, so that an unsupported-URL failure can only be
    ///     the answer's.
    package init(_ error: any Error, wasHTTP: Bool) {
        guard let code = (error as? URLError)?.code else {
            self = .failed
            return
        }
        switch code {
        case .cancelled: self = .cancelled
        case .timedOut: self = .timedOut
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .badURL:
            self = .notSent
        case .cannotParseResponse, .cannotDecodeRawData, .cannotDecodeContentData: self = .malformedAnswer
        #if canImport(FoundationNetworking)
            // libcurl reports a connection closed before any byte of an answer ("empty reply from server") as
            // badServerResponse, and an answer that is not HTTP/1.x as an unsupported protocol.
            case .badServerResponse: self = .closedWithoutAnswer
            case .unsupportedURL where wasHTTP: self = .malformedAnswer
        #else
            case .badServerResponse: self = .malformedAnswer
        #endif
        default: self = .failed
        }
    }
}

/// A request that failed below HTTP, with what is known about whether it reached the server.
package struct TransportFailure: Error {
    package let underlying: any Error
    /// Whether the request's URL was `http` or `https`, so that an unsupported-URL failure can only be the answer's.
    package let wasHTTP: Bool

    package init(underlying: any Error, request: URLRequest? = nil) {
        self.underlying = underlying
        let scheme = request?.url?.scheme?.lowercased()
        self.wasHTTP = scheme == "http" || scheme == "https"
    }

    private var code: URLError.Code? { (underlying as? URLError)?.code }

    private var kind: TransportFailureKind { TransportFailureKind(underlying, wasHTTP: wasHTTP) }

    /// Whether the request certainly never reached the server.
    package var wasNotSent: Bool { kind == .notSent }

    package var isRetryable: Bool { code != .cancelled && code != .badURL }

    /// Whether the task was cancelled: by `end()`, by the caller, or at its deadline.
    package var isCancellation: Bool { kind == .cancelled }

    /// The error to throw, keeping the `URLError`'s code as its ``SessionError/underlyingError``.
    ///
    /// - Parameter replayable: Whether the request may be sent again: a failure of one that may not, after it may
    ///   have reached the server, is `outcomeUnknown`.
    /// - Returns: The error.
    package func error(replayable: Bool) -> SessionError {
        mapped(replayable: replayable).keeping(Self.copy(of: underlying))
    }

    /// A `URLError` of SessionKit's own with the code of `error`'s, or `nil` when `error` is not one.
    ///
    /// The errors FoundationNetworking hands to completion handlers and delegates are not kept beyond the
    /// callback: held in errors that outlive it, they crashed the process in `swift_release` (Linux; BENCHMARKS.md,
    /// "Figures behind the code's rules"), and fresh ones never did. The code, which is what callers switch on, is
    /// the same.
    package static func copy(of error: any Error) -> URLError? {
        (error as? URLError).map { URLError($0.code) }
    }

    private func mapped(replayable: Bool) -> SessionError {
        switch kind {
        case .cancelled:
            // `end()` and task cancellation both surface as URLError.cancelled; the caller re-checks which.
            return SessionError(.sessionEnded, "the request was cancelled because its session ended")
        case .timedOut where !replayable:
            return SessionError(.outcomeUnknown, "the request timed out after it may have reached the server")
        case .timedOut:
            return SessionError(.timedOut, "the request timed out")
        case .notSent:
            return SessionError(.networkUnavailable, "the request failed: \(code.map { "\($0.rawValue)" } ?? "?")")
        case _ where !replayable:
            // Whatever broke the answer, the server may have had the whole request and applied it.
            return SessionError(
                .outcomeUnknown,
                "the connection failed after the request may have reached the server"
            )
        case .malformedAnswer:
            return SessionError(.malformedResponse, "the server's answer was not valid HTTP")
        case .closedWithoutAnswer:
            return SessionError(.networkUnavailable, "the connection closed before the server answered")
        case .failed:
            return SessionError(.networkUnavailable, "the request failed: \(code.map { "\($0.rawValue)" } ?? "?")")
        }
    }
}
