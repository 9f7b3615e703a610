import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a session does with an answer that may be a redirect: a pure function of the request as sent, the answer,
/// whether the chain still carries the session's credentials, and the session's ``UserSession/CredentialScope``.
///
/// A session's URLSessions never follow redirects themselves (FoundationNetworking copies every header field of
/// the original request, `Authorization` and `Cookie` included, to whatever origin a `Location` names):
/// ``UserSession/sendAuthorized(_:attempt:discard:)`` asks this function at every hop, for every request kind.
package enum RedirectDecision: Equatable {
    /// Not a redirect SessionKit follows: hand the answer over as it is.
    case deliver
    /// Send `request` next; `carriesCredentials` says whether it gets the session's token (a same-origin hop of a
    /// chain that never left its origin) or goes bare.
    case follow(URLRequest, carriesCredentials: Bool)
    /// Stop: following would be unsafe (`https` to `http`) or endless.
    case refuse(SessionError)

    /// The most redirects one request follows, as browsers and Darwin's URLSession do.
    package static let maximumHops = 20

    /// Decides what follows `response`, the answer to `request`.
    ///
    /// - Parameters:
    ///   - response: The answer.
    ///   - request: The request as sent, credentials included.
    ///   - carriesCredentials: Whether `request` carried the session's token (its chain never left the origin).
    ///   - hops: How many redirects the chain has followed before this answer.
    ///   - scope: The session's rules.
    /// - Returns: What to do: hand the answer over, follow it (with or without the token), or refuse it.
    package static func after(
        _ response: HTTPURLResponse,
        to request: URLRequest,
        carriesCredentials: Bool,
        hops: Int,
        scope: UserSession.CredentialScope
    ) -> RedirectDecision {
        let status = response.statusCode
        switch status {
        case 301, 302, 303, 307, 308: break
        default: return .deliver
        }
        guard
            let location = response.value(forHTTPHeaderField: "Location")?.trimmingCharacters(in: .whitespaces),
            !location.isEmpty, let from = request.url,
            let target = URL(string: location, relativeTo: from)?.absoluteURL,
            let fromOrigin = Origin(from), let toOrigin = Origin(target),
            ["http", "https"].contains(target.scheme?.lowercased() ?? "")
        else { return .deliver }
        guard hops < maximumHops else {
            return .refuse(
                SessionError(
                    .malformedResponse, "the server redirected the request more than \(maximumHops) times",
                    statusCode: status))
        }
        if fromOrigin.isSecure, !toOrigin.isSecure, !scope.followsInsecureRedirects {
            return .refuse(
                SessionError(
                    .insecureTransport,
                    "the server redirected an https request to plain HTTP (\(toOrigin)); it is not followed "
                        + "(CredentialScope.followsInsecureRedirects follows it without credentials)",
                    statusCode: status))
        }

        var next = request
        next.url = target
        let method = HTTPMethod.of(request)
        // RFC 9110 §15.4: a 303 is fetched with GET (HEAD stays HEAD), without a body; a 301 or 302 answering a
        // POST is too, as every client does; 307 and 308 repeat the method and body.
        if status == 303 || ((status == 301 || status == 302) && method == "POST") {
            if method != "HEAD" { next.httpMethod = "GET" }
            next.httpBody = nil
            next.httpBodyStream = nil
            removeFields(
                ["content-type", "content-length", "content-encoding", "content-language", "content-location"],
                from: &next)
        }
        guard carriesCredentials, fromOrigin == toOrigin else {
            removeFields(scope.strippedFields, from: &next)
            return .follow(next, carriesCredentials: false)
        }
        return .follow(next, carriesCredentials: true)
    }

    private static func removeFields(_ names: Set<String>, from request: inout URLRequest) {
        guard let fields = request.allHTTPHeaderFields else { return }
        for name in fields.keys where names.contains(name.lowercased()) {
            request.setValue(nil, forHTTPHeaderField: name)
        }
    }
}
