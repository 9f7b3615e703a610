import Foundation

/// What a provider's discovery document says about it (OpenID Connect Discovery 1.0 §3, RFC 8414 §2).
///
/// Read strictly: `issuer` must be exactly the issuer that was asked for (Discovery §4.3: otherwise a document
/// served elsewhere could name another provider's endpoints), and every endpoint must be `https` (plain `http` only
/// to a loopback host, for tests), with no fragment.
package struct OpenIDProviderMetadata: Sendable, Hashable {
    /// `issuer`.
    package let issuer: String
    /// `authorization_endpoint`, if the provider has one.
    package let authorizationEndpoint: URL?
    /// `token_endpoint`.
    package let tokenEndpoint: URL
    /// `jwks_uri`: where the provider's signing keys are.
    package let keySetURL: URL
    /// `userinfo_endpoint`, if any.
    package let userInfoEndpoint: URL?
    /// `end_session_endpoint` (OpenID Connect RP-Initiated Logout 1.0 §2.1), if any.
    package let endSessionEndpoint: URL?
    /// `revocation_endpoint` (RFC 7009), if any.
    package let revocationEndpoint: URL?
    /// `device_authorization_endpoint` (RFC 8628 §4), if any.
    package let deviceAuthorizationEndpoint: URL?
    /// `id_token_signing_alg_values_supported`, as written.
    package let idTokenSigningAlgorithms: [String]
    /// `dpop_signing_alg_values_supported` (RFC 9449 §5.1), as written; empty when the provider does not say.
    package let dpopSigningAlgorithms: [String]
    /// `scopes_supported`, as written; empty when the provider does not say.
    package let scopes: [String]

    /// Reads a discovery document.
    ///
    /// - Parameters:
    ///   - body: The JSON document.
    ///   - expectedIssuer: The issuer that was asked for.
    /// - Throws: `SessionError(.providerMetadataRejected)` naming the member at fault.
    package init(json body: [UInt8], expectedIssuer: String) throws(SessionError) {
        guard case .object(let members)? = try? JSONParser.parse(body) else {
            throw Self.rejected("the discovery document is not a JSON object")
        }
        let reader = JSONObjectReader(
            members: members, code: .providerMetadataRejected, context: "the discovery document", statusCode: nil)
        let issuer = try reader.requiredString("issuer")
        guard issuer == expectedIssuer else {
            throw Self.rejected("the discovery document names another issuer than the one asked for")
        }
        func endpoint(_ name: String, required: Bool = false) throws(SessionError) -> URL? {
            guard let text = try reader.string(name) else {
                if required { throw Self.rejected("the discovery document has no \"\(name)\"") }
                return nil
            }
            guard let url = URL(string: text) else { throw Self.rejected("\"\(name)\" is not a URL") }
            do {
                try EndpointPolicy.validate(url, role: name)
            } catch {
                throw Self.rejected("\"\(name)\" is not an https URL (http only to loopback) without a fragment")
            }
            return url
        }
        func strings(_ name: String) throws(SessionError) -> [String] {
            switch members[name] {
            case nil, .null?: return []
            case .array(let values)? where values.allSatisfy({ $0.stringValue != nil }):
                return values.compactMap(\.stringValue)
            case _?: throw Self.rejected("\"\(name)\" is not an array of strings")
            }
        }
        self.issuer = issuer
        self.authorizationEndpoint = try endpoint("authorization_endpoint")
        // Both are required of an OpenID provider (Discovery §3) and of every use SessionKit makes of one.
        guard let tokenEndpoint = try endpoint("token_endpoint", required: true),
            let keySetURL = try endpoint("jwks_uri", required: true)
        else { throw Self.rejected("the discovery document lacks an endpoint") }
        self.tokenEndpoint = tokenEndpoint
        self.keySetURL = keySetURL
        self.userInfoEndpoint = try endpoint("userinfo_endpoint")
        self.endSessionEndpoint = try endpoint("end_session_endpoint")
        self.revocationEndpoint = try endpoint("revocation_endpoint")
        self.deviceAuthorizationEndpoint = try endpoint("device_authorization_endpoint")
        self.idTokenSigningAlgorithms = try strings("id_token_signing_alg_values_supported")
        self.dpopSigningAlgorithms = try strings("dpop_signing_alg_values_supported")
        self.scopes = try strings("scopes_supported")
    }

    /// Reads the `revocation_endpoint` of an RFC 8414 authorization server metadata document, as strictly as
    /// discovery: its `issuer` must be exactly the one asked for (RFC 8414 §3.3), and the endpoint `https` (plain
    /// `http` only to a loopback host) without a fragment.
    ///
    /// - Parameters:
    ///   - body: The JSON document.
    ///   - expectedIssuer: The issuer that was asked for.
    /// - Returns: The endpoint, or `nil` when the document names none.
    /// - Throws: `SessionError(.providerMetadataRejected)` naming the member at fault.
    package static func revocationEndpoint(
        inAuthorizationServerMetadata body: [UInt8], expectedIssuer: String
    ) throws(SessionError) -> URL? {
        guard case .object(let members)? = try? JSONParser.parse(body) else {
            throw rejected("the authorization server metadata is not a JSON object")
        }
        let reader = JSONObjectReader(
            members: members, code: .providerMetadataRejected, context: "the authorization server metadata",
            statusCode: nil)
        guard try reader.requiredString("issuer") == expectedIssuer else {
            throw rejected("the authorization server metadata names another issuer than the one asked for")
        }
        guard let text = try reader.string("revocation_endpoint") else { return nil }
        guard let url = URL(string: text), (try? EndpointPolicy.validate(url, role: "revocation_endpoint")) != nil
        else {
            throw rejected("\"revocation_endpoint\" is not an https URL (http only to loopback) without a fragment")
        }
        return url
    }

    private static func rejected(_ reason: String) -> SessionError {
        SessionError(.providerMetadataRejected, reason)
    }
}
