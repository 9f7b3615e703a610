import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension UserSession {
    /// Opens a WebSocket as this session's account: the opening handshake carries this session's token, and the
    /// connection belongs to the session.
    ///
    /// The token is refreshed first if it is about to expire. The task is resumed before it is returned; send and
    /// receive on it as on any `URLSessionWebSocketTask`. ``end()`` cancels it (a receive in progress fails), and a
    /// call after `end()` is refused.
    ///
    /// A handshake the server refuses with 401 is not retried: the WebSocket fails, and the next call to this
    /// method presents a refreshed token if the old one had expired. A handshake the server redirects is not
    /// followed: the WebSocket fails, and its token went nowhere but the handshake's own origin. The handshake's
    /// URL must be one the session's ``Configuration/credentialScope`` serves (`ws` counts as `http`, `wss` as
    /// `https`: plain `ws` only to loopback).
    ///
    /// - Parameter request: The handshake request, with a `ws` or `wss` URL; its `Authorization` header is
    ///   replaced.
    /// - Returns: The started WebSocket task.
    /// - Throws: ``SessionError/Code/sessionEnded`` after ``end()``; ``SessionError/Code/invalidInput`` for a URL
    ///   that is not `ws`, `wss`, `http` or `https`; ``SessionError/Code/insecureTransport`` or
    ///   ``SessionError/Code/originNotServed`` for a URL outside the credential scope; refresh errors.
    /// - Important: On Linux, FoundationNetworking runs WebSockets through libcurl, and only a libcurl built with
    ///   WebSocket support (8.11 or later by default; Debian 12's 7.88 has none) can open one. Elsewhere the task
    ///   fails with `URLError.unsupportedURL` ("WebSockets not supported by libcurl") at its first receive or send.
    ///   What this method promises — the token on the handshake, cancellation by ``end()``, refusal after it — holds
    ///   either way.
    public func webSocket(for request: URLRequest) async throws -> URLSessionWebSocketTask {
        let scheme = request.url?.scheme?.lowercased()
        guard let scheme, ["ws", "wss", "http", "https"].contains(scheme) else {
            throw SessionError(.invalidInput, "a WebSocket needs a ws or wss URL")
        }
        if let refusal = configuration.credentialScope.refusal(of: request.url) { throw refusal }
        try Task.checkCancellation()
        if let refresher { try await refresher.refreshIfExpiring(self) }
        let handle = RequestHandle()
        let proofKey = tokens?.proofKey
        if proofKey != nil, request.url.flatMap(DPoPProof.targetURI(of:)) == nil {
            throw SessionError(.invalidInput, "a DPoP proof needs an absolute URL with a host")
        }
        let created = try startTransfer(handle: handle, events: TransferEvents { _ in }, nonceFor: request.url) {
            urlSession, credential, nonce in
            // The token is read where the task is made, under the lock that `end()` takes to forget it.
            var outgoing = request
            outgoing.setValue(nil, forHTTPHeaderField: "Authorization")
            // Cannot fail: the URL was checked above, and signing with a valid key does not.
            if let credential {
                try? applyCredential(to: &outgoing, token: credential.token, proofKey: proofKey, nonce: nonce)
            }
            return urlSession.webSocketTask(with: outgoing)
        }
        guard let task = created.task as? URLSessionWebSocketTask else {
            throw SessionError(.malformedResponse, "the URLSession did not make a WebSocket task")
        }
        return task
    }
}
