import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The form `POST` every OAuth endpoint call is (RFC 6749 §3.2, RFC 7009 §2.1, RFC 8628 §3.4).
package enum FormPostRequest {
    /// A `POST` of `pairs`, form-encoded, to `endpoint`.
    ///
    /// The request asks for JSON, carries `Cache-Control: no-store` (a credential exchange must never be
    /// answered from, or kept in, a cache) and ignores any local cache.
    ///
    /// - Parameters:
    ///   - endpoint: `https`, or `http` to a loopback host.
    ///   - pairs: The body's names and values, in order.
    ///   - role: What the endpoint is, for error messages.
    /// - Returns: The request.
    /// - Throws: `SessionError(.invalidInput)` when the endpoint is not acceptable (see ``EndpointPolicy``).
    package static func make(endpoint: URL, pairs: [(name: String, value: String)], role: String) throws -> URLRequest {
        try EndpointPolicy.validate(endpoint, role: role)
        var request = URLRequest(url: endpoint, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData)
        request.httpMethod = "POST"
        request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("no-store", forHTTPHeaderField: "Cache-Control")
        request.httpBody = Data(FormURLEncoding.encode(pairs).utf8)
        return request
    }

    /// `additional`, in name order, after checking that none of them is in `reserved` or has an empty name.
    ///
    /// - Parameters:
    ///   - additional: The caller's extra parameters.
    ///   - reserved: The names SessionKit sets for this request.
    /// - Returns: The pairs to append.
    /// - Throws: `SessionError(.invalidInput)` naming the offending parameter.
    package static func extraPairs(_ additional: [String: String], reserved: Set<String>) throws -> [(
        name: String, value: String
    )] {
        try additional.keys.sorted().map { name in
            guard !name.isEmpty else { throw SessionError(.invalidInput, "an additional parameter has an empty name") }
            guard !reserved.contains(name) else {
                throw SessionError(
                    .invalidInput, "\"\(name)\" is set by SessionKit and cannot be an additional parameter")
            }
            return (name, additional[name] ?? "")
        }
    }
}
