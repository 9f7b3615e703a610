import Foundation

/// A device authorization endpoint's answer (RFC 8628 §3.2): the codes and the page the user visits.
///
/// What is accepted:
///
/// - Status 200 and one JSON object of at most 1 MiB; a failure status is classified as a token endpoint failure
///   would be (`OAuthErrorResponse`), any other 2xx is `.malformedResponse`.
/// - `device_code`, `user_code`: required non-empty strings. The user code is shown to people, so it must also
///   be at most 128 characters without control or format characters.
/// - `verification_uri`: required, an absolute `http` or `https` URL with a host (anything else, such as
///   `javascript:` or `file:`, is refused: the app opens or shows it). Google's pre-standard name
///   `verification_url` is read when `verification_uri` is absent. `verification_uri_complete` is optional and
///   checked the same way.
/// - `expires_in`: required, a whole number of seconds of at least 1 (a number, or a digit string).
/// - `interval`: optional, 5 seconds when absent (RFC 8628 §3.2); `0` is raised to 1 second so a client never
///   polls in a busy loop.
///
/// Every refusal is `SessionError(.malformedResponse)`, naming the member but never its value.
public struct DeviceAuthorizationResponse: Sendable, Equatable, CustomStringConvertible {
    /// The device verification code, sent when polling. It is a credential until the grant ends.
    public let deviceCode: String
    /// The code the user types on the verification page.
    public let userCode: String
    /// The page where the user enters ``userCode``.
    public let verificationURI: URL
    /// A page that already carries the user code (for a QR code), when the server offers one.
    public let verificationURIComplete: URL?
    /// How long the codes stay valid after the response was received.
    public let expiresIn: Duration
    /// How long to wait between polls.
    public let interval: Duration

    /// Creates a response from already validated values (for tests of code that uses one).
    ///
    /// - Parameters:
    ///   - deviceCode: The device code.
    ///   - userCode: The user code.
    ///   - verificationURI: The verification page.
    ///   - verificationURIComplete: The page with the code filled in, if any.
    ///   - expiresIn: The codes' lifetime.
    ///   - interval: The polling interval.
    public init(
        deviceCode: String,
        userCode: String,
        verificationURI: URL,
        verificationURIComplete: URL? = nil,
        expiresIn: Duration,
        interval: Duration = .seconds(5)
    ) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationURI = verificationURI
        self.verificationURIComplete = verificationURIComplete
        self.expiresIn = expiresIn
        self.interval = interval
    }

    /// Reads a device authorization response.
    ///
    /// - Parameters:
    ///   - data: The response body.
    ///   - statusCode: The HTTP status.
    ///   - retryAfter: The parsed `Retry-After`, used when the status is a failure.
    /// - Returns: The response.
    /// - Throws: `SessionError(.malformedResponse)` for a 200 that breaks the rules above; the classified error for a
    ///   failure status.
    package static func parse(data: Data, statusCode: Int, retryAfter: Duration? = nil) throws
        -> DeviceAuthorizationResponse
    {
        let context = "the device authorization response"
        guard statusCode == 200 else {
            if (200..<300).contains(statusCode) {
                throw SessionError(
                    .malformedResponse, "\(context) has status \(statusCode), not 200", statusCode: statusCode)
            }
            throw OAuthErrorResponse.classify(
                statusCode: statusCode, body: data, retryAfter: retryAfter,
                endpoint: "the device authorization endpoint")
        }
        let members = try JSONParser.object(
            from: data, code: .malformedResponse, context: context, statusCode: statusCode)
        let reader = JSONObjectReader(
            members: members, code: .malformedResponse, context: context, statusCode: statusCode)

        let deviceCode = try reader.requiredString("device_code")
        let userCode = try reader.requiredString("user_code")
        guard userCode.count <= 128, ServerText.sanitized(userCode, limit: 128) == userCode else {
            throw reader.error("\"user_code\" is too long or has control characters")
        }
        let verificationName =
            members["verification_uri"] == nil && members["verification_url"] != nil
            ? "verification_url" : "verification_uri"
        let verificationURI = try webURL(reader.requiredString(verificationName), name: verificationName, reader)
        let verificationURIComplete = try reader.string("verification_uri_complete").map {
            try webURL($0, name: "verification_uri_complete", reader)
        }

        guard let expiresIn = try reader.seconds("expires_in", saturation: OAuthLimits.maximumLifetimeSeconds) else {
            throw reader.error("\"expires_in\" is missing (RFC 8628 §3.2)")
        }
        guard expiresIn > 0 else { throw reader.error("\"expires_in\" is zero: the codes are already expired") }
        let interval = try reader.seconds("interval", saturation: OAuthLimits.maximumLifetimeSeconds) ?? 5

        return DeviceAuthorizationResponse(
            deviceCode: deviceCode,
            userCode: userCode,
            verificationURI: verificationURI,
            verificationURIComplete: verificationURIComplete,
            expiresIn: .seconds(expiresIn),
            interval: .seconds(max(interval, 1))
        )
    }

    /// The user code, the pages and the timings, with the device code redacted.
    public var description: String {
        "DeviceAuthorizationResponse(deviceCode: \(Redaction.redact(deviceCode)), userCode: \(userCode), "
            + "verificationURI: \(verificationURI), expiresIn: \(expiresIn), interval: \(interval))"
    }

    private static func webURL(_ text: String, name: String, _ reader: JSONObjectReader) throws(SessionError) -> URL {
        guard text.utf8.count <= 2048, let url = URL(string: text),
            let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
            let host = components.host, !host.isEmpty
        else { throw reader.error("\"\(name)\" is not an absolute http(s) URL") }
        return url
    }
}
