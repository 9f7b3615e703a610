import Foundation

/// Which endpoint URLs SessionKit will send OAuth requests (and so credentials) to.
///
/// RFC 6749 §3.1 and §3.2 require TLS for the authorization and token endpoints: a refresh token sent over
/// plain HTTP is readable by anyone on the path. Plain `http` is allowed only to a loopback host
/// (`localhost`, `127.0.0.0/8`, `::1`), where the traffic never leaves the machine: that is how tests and
/// local development servers run.
package enum EndpointPolicy {
    /// Checks that `url` is an absolute `https` URL, or `http` to a loopback host, without a fragment.
    ///
    /// - Parameters:
    ///   - url: The endpoint.
    ///   - role: What the endpoint is, for the error message ("token endpoint").
    /// - Throws: `SessionError(.invalidInput)` when the URL is not acceptable.
    package static func validate(_ url: URL, role: String) throws {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else { throw SessionError(.invalidInput, "the \(role) must be an absolute http(s) URL with a host") }
        guard components.fragment == nil else {
            throw SessionError(.invalidInput, "the \(role) must not have a fragment (RFC 6749 §3.1)")
        }
        switch scheme {
        case "https":
            return
        case "http" where isLoopback(host):
            return
        case "http":
            throw SessionError(.invalidInput, "the \(role) must use https; plain http is allowed only to loopback")
        default:
            throw SessionError(.invalidInput, "the \(role) must use https")
        }
    }

    /// Whether `host` names this machine.
    ///
    /// - Parameter host: A URL host, with or without IPv6 brackets.
    /// - Returns: `true` for `localhost`, `127.x.y.z` and `::1`.
    package static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets[0] == "127" else { return false }
        return octets.allSatisfy { octet in
            octet.count <= 3 && octet.allSatisfy(\.isASCII) && UInt8(octet) != nil
        }
    }
}
