import Foundation
import SessionKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The SessionKit part of the backend-for-frontend, the part to copy: browsers sign in with the authorization code
/// and PKCE, their tokens stay on the server in a ``CredentialStore`` every instance shares, and the browser holds
/// only an opaque cookie.
///
/// Every instance runs one ``SessionManager`` on the shared store. A user's requests land on any instance:
/// ``SessionManager/session(for:)`` gives the instance the account's live session from the store the first time (the
/// tokens another instance refreshed included), refreshes are single-flight across instances through the store's
/// coordination, and a sign-out on one instance deletes the record and announces it, which ends the account's live
/// session on every other instance at once.
final class BrowserSessions: Sendable {
    /// Why a callback was refused.
    enum CallbackError: Error {
        /// No instance issued the state, or it was used or is too old: a forged or replayed callback.
        case unknownState
        /// The callback carries an error, or a state that does not match (``AuthorizationRequest`` checks it).
        case refused
        /// The code exchange or the ID token's validation failed.
        case signInFailed
    }

    /// The provider's name in the manager's configuration.
    static let providerID: Provider.ID = "idp"

    let manager: SessionManager
    private let provider: OpenIDProvider
    /// The callback URL as the browser reaches it.
    let redirectURI: String
    private let userinfo: URL
    private let tables: SharedTables

    /// - Parameters:
    ///   - store: The credential store every instance shares (a `FileCredentialStore` on one machine's directory,
    ///     or PostgreSQL).
    ///   - provider: The OpenID Connect provider browsers sign in at.
    ///   - redirectURI: The callback URL as the browser reaches it (through the load balancer).
    ///   - userinfo: The API the browser calls through this server.
    ///   - tables: The pending sign-ins and the cookie table, shared by the instances.
    ///   - dataDirectory: This instance's own directory (the purge journal of its sign-outs).
    init(
        store: any CredentialStore, provider: OpenIDProvider, redirectURI: String, userinfo: URL,
        tables: SharedTables, dataDirectory: URL
    ) {
        var sessionConfiguration = UserSession.Configuration()
        // Tokens go to the provider's origin and nowhere else, whatever URL a request is given.
        if let origin = Origin(userinfo) { sessionConfiguration.credentialScope = .only([origin]) }
        manager = SessionManager(
            configuration: .init(
                store: store, providers: [Provider(id: Self.providerID, openID: provider)],
                sessionConfiguration: sessionConfiguration, dataDirectory: dataDirectory))
        self.provider = provider
        self.redirectURI = redirectURI
        self.userinfo = userinfo
        self.tables = tables
    }

    /// `GET /login`: a new authorization request (state, PKCE S256, nonce), kept server-side where every instance
    /// finds it; returns the URL to redirect the browser to.
    func beginSignIn() async throws -> URL {
        let request = try await provider.authorizationRequest(
            redirectURI: redirectURI, scope: "openid profile email read")
        try tables.savePendingSignIn(request)
        return request.url
    }

    /// `GET /callback`: takes the pending sign-in of the callback's state (once, on any instance), exchanges the
    /// code, signs the account the validated ID token names in, and returns a new opaque cookie for it.
    ///
    /// - Parameter callback: The callback URL with its query (`code`, `state`, or `error`).
    /// - Returns: The cookie's value.
    /// - Throws: ``CallbackError``; nothing is signed in then.
    func finishSignIn(callback: URL) async throws(CallbackError) -> String {
        let state = URLComponents(url: callback, resolvingAgainstBaseURL: false)?.queryItems?
            .first { $0.name == "state" }?.value
        guard let state, let request = tables.takePendingSignIn(state: state) else { throw CallbackError.unknownState }
        let code: String
        do {
            code = try request.authorizationCode(from: callback)
        } catch {
            throw CallbackError.refused
        }
        do {
            let session = try await manager.signIn(through: Self.providerID, makeCurrent: false) {
                [provider] in try await provider.signIn(code: code, for: request)
            }
            // The cookie is random and stands for the account only through the shared table: it is no token and
            // holds none, and the table keeps only its hash.
            let cookie = Digest.randomOpaqueValue()
            try tables.remember(cookie, for: session.account)
            return cookie
        } catch {
            throw CallbackError.signInFailed
        }
    }

    /// `GET /api/me`: the user's call to the API, sent with their session's token (refreshed by SessionKit when it
    /// must be, once across the instances); `nil` when the cookie stands for no live session.
    func callAPI(cookie: String) async -> (status: Int, body: Data)? {
        guard let session = await session(for: cookie) else { return nil }
        do {
            let (body, response) = try await session.data(for: URLRequest(url: userinfo))
            return (response.statusCode, body)
        } catch let error as SessionError where [.sessionEnded, .refreshRejected, .sessionRevoked].contains(error.code)
        {
            return nil
        } catch {
            return (502, Data(#"{"error":"upstream"}"#.utf8))
        }
    }

    /// `POST /logout`: signs the account out (its record deleted, which every instance hears of; its tokens revoked)
    /// and forgets the cookie.
    func signOut(cookie: String) async {
        if let session = await session(for: cookie) { await manager.signOut(session) }
        tables.forget(cookie)
    }

    /// The live session `cookie` stands for, restored from the shared store on an instance that has not served it
    /// yet; `nil` for an unknown cookie or an account no longer signed in.
    private func session(for cookie: String) async -> UserSession? {
        guard let account = tables.account(for: cookie) else { return nil }
        // A store that cannot be read proves nothing; the request is refused, nobody is signed out.
        return try? await manager.session(for: account)
    }
}
