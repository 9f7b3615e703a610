import Foundation

/// The target of the tokens a client asks for: RFC 8707 `resource` indicators and the `audience` parameter
/// (Auth0, Okta and the OAuth 2.0 Token Exchange draft's name for the same idea).
///
/// Both are checked before anything is sent, and both go on the authorization request, on every token grant
/// (code exchange, refresh, device code, password) and on the device authorization request.
package struct ResourceIndicators: Sendable, Equatable {
    /// The `resource` values, in the configured order: each an absolute URI without a fragment.
    package let resources: [String]
    /// The `audience` value, if any.
    package let audience: String?

    /// No resource, no audience: the server's default target.
    package static let none = ResourceIndicators(checked: [], audience: nil)

    private init(checked resources: [String], audience: String?) {
        self.resources = resources
        self.audience = audience
    }

    /// Checks and keeps `resources` and `audience`.
    ///
    /// - Parameters:
    ///   - resources: Absolute URIs (RFC 3986 §4.3) that may have a query but no fragment (RFC 8707 §2).
    ///   - audience: A non-empty audience, or `nil`.
    /// - Throws: `SessionError(.invalidInput)` naming what is wrong.
    package init(resources: [URL], audience: String?) throws {
        self.resources = try resources.map { url in
            let absolute = url.absoluteURL
            guard let components = URLComponents(url: absolute, resolvingAgainstBaseURL: false),
                let scheme = components.scheme, !scheme.isEmpty
            else {
                throw SessionError(.invalidInput, "a resource indicator must be an absolute URI (RFC 8707 §2)")
            }
            guard components.fragment == nil, !absolute.absoluteString.contains("#") else {
                throw SessionError(.invalidInput, "a resource indicator must not have a fragment (RFC 8707 §2)")
            }
            return absolute.absoluteString
        }
        if let audience, audience.isEmpty {
            throw SessionError(.invalidInput, "the audience is empty")
        }
        self.audience = audience
    }

    /// The parameters to send: one `resource` per indicator, in order, then `audience`.
    package var pairs: [(name: String, value: String)] {
        resources.map { ("resource", $0) } + (audience.map { [("audience", $0)] } ?? [])
    }

    /// The names these parameters use, which a caller's additional parameters may never repeat.
    package static let parameterNames: Set<String> = ["resource", "audience"]
}
