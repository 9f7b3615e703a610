/// What a resource server's `WWW-Authenticate: Bearer …` challenge says (RFC 6750 §3, RFC 9728 §5.1).
///
/// A 401 with `error="invalid_token"` means the access token is expired or revoked: refresh and retry once. A 403
/// with `error="insufficient_scope"` means the token is fine but not enough: refreshing will not help. A 400 with
/// `error="invalid_request"` is a client bug.
///
/// The header is read with RFC 9110 §11.6.1's challenge syntax: several challenges in one value (or several
/// header lines joined with commas), parameters whose values are tokens or quoted strings with `\` escapes, and
/// token68 challenges such as `Basic`'s. Parsing never throws and never traps; it is linear in the header's
/// length, and a header over 16 KiB is not read.
package struct BearerChallenge: Sendable, Equatable {
    /// Every parameter of the challenge: names lowercased (they are case-insensitive), values unquoted.
    ///
    /// Values are as the server sent them: a quoted string cannot hold control characters other than tab, but
    /// the text is still untrusted (clean it before showing it).
    public let parameters: [String: String]

    /// Creates a challenge from its parameters.
    ///
    /// - Parameter parameters: Parameter names (lowercased here) and values.
    public init(parameters: [String: String]) {
        var lowercased: [String: String] = [:]
        for (name, value) in parameters where lowercased[name.lowercased()] == nil {
            lowercased[name.lowercased()] = value
        }
        self.parameters = lowercased
    }

    /// The error code: `invalid_token`, `insufficient_scope`, `invalid_request`, or another the server defines.
    public var error: String? { parameters["error"] }
    /// The server's explanation of the error.
    public var errorDescription: String? { parameters["error_description"] }
    /// The scope the resource needs, space-separated (with `insufficient_scope`).
    public var scope: String? { parameters["scope"] }
    /// The protection space.
    public var realm: String? { parameters["realm"] }
    /// The URL of the resource's protected resource metadata (RFC 9728 §5.1).
    public var resourceMetadata: String? { parameters["resource_metadata"] }

    /// The first `Bearer` challenge in a `WWW-Authenticate` value.
    ///
    /// - Parameter header: The field value.
    /// - Returns: The challenge, or `nil` when the value has no `Bearer` challenge (the scheme is matched in any
    ///   letter case) or is over 16 KiB.
    public static func parse(_ header: String) -> BearerChallenge? {
        guard header.utf8.count <= OAuthLimits.maximumHeaderBytes else { return nil }
        let challenges = AuthenticationChallengeParser.challenges(in: header)
        guard let bearer = challenges.first(where: { $0.scheme.lowercased() == "bearer" }) else { return nil }
        return BearerChallenge(parameters: bearer.parameters)
    }
}
