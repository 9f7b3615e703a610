import Foundation
import SessionKitOAuth

extension SessionManager.Configuration {
    /// The provider a sign-in or a stored record names: `nil` is the default one (the configuration's own token
    /// endpoint and revoker), any other name must be configured exactly once and accept `account`'s issuer.
    ///
    /// - Throws: `SessionError(.invalidInput)` for a name configured no time or several times, or an account of
    ///   another issuer than the provider's.
    func provider(_ id: Provider.ID?, for account: Account) throws(SessionError) -> Provider? {
        guard let id else { return nil }
        let matching = providers.filter { $0.id == id }
        guard matching.count == 1, let provider = matching.first else {
            throw SessionError(
                .invalidInput,
                matching.isEmpty
                    ? "no provider named \(id) is configured"
                    : "the provider name \(id) is configured \(matching.count) times")
        }
        if let issuer = provider.issuer, issuer != account.issuer {
            throw SessionError(
                .invalidInput, "the provider \(id) signs in accounts of \(issuer), not of \(account.issuer)")
        }
        return provider
    }

    /// The token endpoint of `provider`, or the default one.
    func tokenEndpoint(of provider: Provider?) -> (any TokenEndpoint)? {
        provider.map(\.tokenEndpoint) ?? tokenEndpoint
    }

    /// The revoker of `provider`, or the default one.
    func revoker(of provider: Provider?) -> (any TokenRevoker)? {
        provider.map(\.revoker) ?? revoker
    }
}
