import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Where the OAuth client reports what it does for a session or a manager: the caller's sink and account, set
/// for the duration of a refresh's token request (``TokenRefresher``) or a sign-in's closure, so that a client that
/// knows no sink of its own (``ExchangeEvents``) tells the story of whoever called it.
enum DiagnosticContext {
    /// Runs `operation` with `configuration`'s sink, if it has one, observing the OAuth client's exchanges.
    static func with<T>(
        _ configuration: UserSession.Configuration, account: Account?, _ operation: () async throws -> T
    ) async rethrows -> T {
        guard let diagnostics = configuration.diagnostics else { return try await operation() }
        let clock = configuration.clock
        let events = ExchangeEvents { endpoint, origin in
            diagnostics.emit(
                .info, .dpopNonceRetry, account: account, at: clock.wallNow,
                ["endpoint": endpoint, "origin": origin])
        }
        return try await ExchangeEvents.$current.withValue(events, operation: operation)
    }
}

extension SessionState {
    /// The state's name without its account, for an event's field (the account is the event's own).
    var diagnosticName: String {
        switch self {
        case .restoring: "restoring"
        case .signedOut: "signedOut"
        case .authenticating: "authenticating"
        case .active(_, let offline): offline ? "active(offline)" : "active"
        case .refreshing: "refreshing"
        case .reauthenticationRequired: "reauthenticationRequired"
        case .accountEnded(_, let ending): "accountEnded(\(ending))"
        case .failed(let error): "failed(\(error.code))"
        }
    }
}

extension UserSession {
    /// Emits an event about this session's account, when the configuration has a sink.
    func diagnose(
        _ level: DiagnosticEvent.Level, _ kind: DiagnosticEvent.Kind,
        _ fields: @autoclosure () -> [String: String] = [:]
    ) {
        guard let diagnostics = configuration.diagnostics else { return }
        diagnostics.emit(level, kind, account: account, at: configuration.clock.wallNow, fields())
    }
}

extension UserSession {
    /// Emits that a redirect left the request's origin and the session's credentials stayed behind: the two
    /// origins (scheme, host, port; never a path or query) and the status.
    func diagnoseWithheld(from request: URLRequest, to next: URLRequest, status: Int) {
        guard configuration.diagnostics != nil else { return }
        let from = request.url.flatMap(Origin.init).map { "\($0)" } ?? "?"
        let to = next.url.flatMap(Origin.init).map { "\($0)" } ?? "?"
        diagnose(.notice, .credentialsWithheld, ["from": from, "to": to, "status": "\(status)"])
    }

    /// Emits that a resource refused a request's DPoP proof for its nonce (RFC 9449 §9) and the request goes once
    /// more, with the nonce: the origin, never the path.
    func diagnoseNonceResend(of request: URLRequest) {
        guard configuration.diagnostics != nil else { return }
        let origin = request.url.flatMap(Origin.init).map { "\($0)" } ?? "?"
        diagnose(.info, .dpopNonceRetry, ["endpoint": "resource", "origin": origin])
    }

    /// Emits that a redirect was refused: the origins it left and named (never a path or query), the status and
    /// the refusal's code.
    func diagnoseRefusedRedirect(from request: URLRequest, response: HTTPURLResponse, error: SessionError) {
        guard configuration.diagnostics != nil else { return }
        let from = request.url.flatMap(Origin.init).map { "\($0)" } ?? "?"
        let location = response.value(forHTTPHeaderField: "Location").flatMap {
            URL(string: $0, relativeTo: request.url)
        }
        let to = location.flatMap { Origin($0.absoluteURL) }.map { "\($0)" } ?? "?"
        diagnose(
            .warning, .redirectRefused,
            ["from": from, "to": to, "status": "\(response.statusCode)", "code": "\(error.code)"])
    }
}
