import Foundation

/// An OAuth 2.0 error response (RFC 6749 §5.2), and the mapping of token endpoint failures to ``SessionError``.
///
/// ``classify(statusCode:body:retryAfter:)`` decides, in this order:
///
/// | Answer | ``SessionError/Code`` |
/// |---|---|
/// | 429, or any 5xx, whatever the body | `.providerOutage`, with `retryAfter` |
/// | 408 | `.timedOut` |
/// | 4xx with `invalid_grant` | `.refreshRejected` (terminal: sign in again) |
/// | 4xx with `access_denied` | `.accessDenied` |
/// | 4xx with `expired_token` | `.authorizationExpired` |
/// | 4xx with `server_error` or `temporarily_unavailable` | `.providerOutage` |
/// | 4xx with any other error code (`invalid_client`, `invalid_request`, …) | `.authorizationFailed` |
/// | 4xx whose body is not an OAuth error | `.authorizationFailed`, without `oauthError` |
/// | anything else (1xx, 2xx, 3xx, out of range) | `.malformedResponse` |
///
/// A 4xx without an OAuth body is `.authorizationFailed` rather than `.malformedResponse` because the server
/// did refuse the request (a proxy's 401 or a wrong endpoint's 404); the caller's recovery is the same as for
/// `invalid_client`: not to retry. The ``SessionError/oauthError`` carries the error code whenever the body had
/// a valid one, even on a 5xx. One exception is made by ``OAuthClient``, which knows the grant: a `400` without an
/// OAuth body to a refresh is `.refreshRejected`, as `invalid_grant` (`OAuthClient.refusedGrant(_:_:)`).
package struct OAuthErrorResponse: Sendable, Equatable {
    /// The error code, such as `invalid_grant`; only the characters RFC 6749 §5.2 allows.
    public let error: String
    /// The server's human-readable explanation, without control or format characters and cut to 256 characters.
    public let errorDescription: String?
    /// A page about the error, as the server sent it (cleaned like ``errorDescription``).
    public let errorURI: String?

    /// Reads an error response body.
    ///
    /// - Parameter body: The response body.
    /// - Returns: The error, or `nil` when the body is not a JSON object whose `error` is a valid error code
    ///   (RFC 6749 §5.2: `%x20-21 / %x23-5B / %x5D-7E`, at most 128 characters here).
    public static func parse(_ body: Data) -> OAuthErrorResponse? {
        guard body.count <= OAuthLimits.maximumBodyBytes,
            case .object(let members)? = try? JSONParser.parse([UInt8](body))
        else { return nil }
        return OAuthErrorResponse(members: members)
    }

    /// Reads an error from a parsed JSON object.
    ///
    /// - Parameter members: The object's members.
    package init?(members: [String: JSONValue]) {
        guard case .string(let code)? = members["error"], Self.isValidErrorCode(code) else { return nil }
        self.error = code
        self.errorDescription = members["error_description"]?.stringValue.map { ServerText.sanitized($0) }
            .flatMap { $0.isEmpty ? nil : $0 }
        self.errorURI = members["error_uri"]?.stringValue.map { ServerText.sanitized($0, limit: 2048) }
            .flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Creates an error from an already validated code and description.
    ///
    /// - Parameters:
    ///   - error: The code; must satisfy ``isValidErrorCode(_:)``.
    ///   - errorDescription: Server text, cleaned here.
    package init?(error: String, errorDescription: String?) {
        guard Self.isValidErrorCode(error) else { return nil }
        self.error = error
        self.errorDescription = errorDescription.map { ServerText.sanitized($0) }.flatMap { $0.isEmpty ? nil : $0 }
        self.errorURI = nil
    }

    /// Maps a failed token endpoint answer to the error to throw.
    ///
    /// - Parameters:
    ///   - statusCode: The HTTP status.
    ///   - body: The response body.
    ///   - retryAfter: The parsed `Retry-After`, if the response had one.
    /// - Returns: The error; see the table on ``OAuthErrorResponse`` for which code.
    public static func classify(statusCode: Int, body: Data, retryAfter: Duration?) -> SessionError {
        classify(statusCode: statusCode, body: body, retryAfter: retryAfter, endpoint: "the token endpoint")
    }

    /// Maps a failed answer from `endpoint` to the error to throw, as the public overload does for the token
    /// endpoint.
    ///
    /// - Parameters:
    ///   - statusCode: The HTTP status.
    ///   - body: The response body.
    ///   - retryAfter: The parsed `Retry-After`, if any.
    ///   - endpoint: What answered, for messages ("the device authorization endpoint").
    /// - Returns: The error.
    package static func classify(statusCode: Int, body: Data, retryAfter: Duration?, endpoint: String) -> SessionError {
        let response = parse(body)
        switch statusCode {
        case 429, 500...599:
            return SessionError(
                .providerOutage, "\(endpoint) is unavailable (\(statusCode))" + (response?.detail ?? ""),
                statusCode: statusCode, oauthError: response?.error, retryAfter: retryAfter)
        case 408:
            return SessionError(.timedOut, "\(endpoint) timed out reading the request", statusCode: statusCode)
        case 400...499:
            guard let response else {
                return SessionError(
                    .authorizationFailed, "\(endpoint) refused the request (\(statusCode)) without an OAuth error",
                    statusCode: statusCode)
            }
            return response.sessionError(
                "\(endpoint) refused the request (\(statusCode))", statusCode: statusCode, retryAfter: retryAfter)
        default:
            return SessionError(
                .malformedResponse, "\(endpoint) answered \(statusCode), which is not an error status",
                statusCode: statusCode)
        }
    }

    /// The error for this OAuth error code, whether it came from a token endpoint or a redirect.
    ///
    /// - Parameters:
    ///   - prefix: What refused, for the message.
    ///   - statusCode: The HTTP status, if the error came in a response.
    ///   - retryAfter: The server's requested wait, kept for outages.
    /// - Returns: The error.
    package func sessionError(_ prefix: String, statusCode: Int?, retryAfter: Duration?) -> SessionError {
        let code: SessionError.Code
        switch error {
        case "invalid_grant": code = .refreshRejected
        case "access_denied": code = .accessDenied
        case "expired_token": code = .authorizationExpired
        // RFC 6749 §4.1.2.1: what an authorization server says instead of a 500 or 503 it cannot redirect.
        case "server_error", "temporarily_unavailable": code = .providerOutage
        default: code = .authorizationFailed
        }
        return SessionError(
            code, "\(prefix): \(error)" + detail, statusCode: statusCode, oauthError: error,
            retryAfter: code == .providerOutage ? retryAfter : nil)
    }

    /// `" (description)"` when there is a description, otherwise empty.
    private var detail: String {
        errorDescription.map { " (\($0))" } ?? ""
    }

    /// Whether `code` is a valid OAuth error code: 1 to 128 characters of `%x20-21 / %x23-5B / %x5D-7E`.
    ///
    /// - Parameter code: A candidate error code.
    /// - Returns: Whether it may be reported as ``SessionError/oauthError``.
    package static func isValidErrorCode(_ code: String) -> Bool {
        let bytes = code.utf8
        return !bytes.isEmpty && bytes.count <= 128
            && bytes.allSatisfy { byte in
                (0x20...0x7E).contains(byte) && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
            }
    }
}
