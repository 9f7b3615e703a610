import Foundation

extension OAuthClient {
    /// Starts a device authorization grant (RFC 8628 §3.1): asks for a device code and a user code.
    ///
    /// The request carries the configured ``Configuration/resources`` and ``Configuration/audience``, and a
    /// confidential client authenticates as ``Configuration/clientAuthentication`` says; `client_id` is in the body
    /// whatever the method (RFC 8628 §3.1 allows it, and some servers require it).
    ///
    /// Show ``DeviceAuthorizationResponse/userCode`` and ``DeviceAuthorizationResponse/verificationURI`` to the
    /// user, then call ``pollDeviceAuthorization(_:receivedAt:)`` with the response.
    ///
    /// - Parameter scope: The scope to ask for, or `nil` for the server's default.
    /// - Returns: The codes and the verification page.
    /// - Throws: ``SessionError``: `invalidInput` when no device authorization endpoint is configured,
    ///   `malformedResponse` for an answer that is not a valid device authorization response, the classified error
    ///   for a refusal (`authorizationFailed`, `providerOutage`, …), `networkUnavailable`, `timedOut`;
    ///   `CancellationError` when the calling task is cancelled.
    public func startDeviceAuthorization(scope: String? = nil) async throws -> DeviceAuthorizationResponse {
        guard let endpoint = configuration.deviceAuthorizationEndpoint else {
            throw SessionError(.invalidInput, "the OAuth client has no device authorization endpoint configured")
        }
        guard !configuration.clientID.isEmpty else { throw SessionError(.invalidInput, "the client ID is empty") }
        let authentication = configuration.clientAuthentication
        try authentication.validate()
        var pairs: [(name: String, value: String)] = []
        if let scope, !scope.isEmpty { pairs.append(("scope", scope)) }
        pairs += try indicators().pairs
        // RFC 8628 §3.1 wants client_id only from a client that does not authenticate, and allows it always;
        // django-oauth-toolkit (oauthlib) refuses a device authorization request without it, Basic or not.
        pairs += authentication.bodyPairs(clientID: configuration.clientID, keepsClientID: true)
        var request = try FormPostRequest.make(
            endpoint: endpoint, pairs: pairs, role: "device authorization endpoint")
        try authentication.authorize(&request, clientID: configuration.clientID, now: configuration.clock.wallNow)
        let answer = try await transport.send(request, to: "the device authorization endpoint")
        do {
            return try DeviceAuthorizationResponse.parse(
                data: answer.body, statusCode: answer.statusCode, retryAfter: answer.retryAfter)
        } catch let error as SessionError {
            // A server's error_description may quote the secret it was sent.
            throw error.redacting(authentication.secrets(clientID: configuration.clientID))
        }
    }

    /// Polls the token endpoint until the user approves or denies the device authorization, or its code expires
    /// (RFC 8628 §3.4, §3.5).
    ///
    /// Each wait is on ``Configuration/clock``: one interval before the first poll, the interval again after
    /// `authorization_pending`, five seconds more for this and every later poll after `slow_down`, and an
    /// exponential backoff after a 5xx, a 429 or a lost connection (see `DevicePollingState`). Polling stops
    /// without a request once the next poll would come after the device code expires.
    ///
    /// - Parameters:
    ///   - authorization: The answer of ``startDeviceAuthorization(scope:)``.
    ///   - receivedAt: When that answer arrived on ``Configuration/clock``, which the code's lifetime counts
    ///     from; `nil` means now.
    /// - Returns: The tokens, once the user approved.
    /// - Throws: ``SessionError``: `accessDenied` (the user said no), `authorizationExpired` (`expired_token`, or
    ///   the code expires before the next poll), `authorizationFailed` (the server refused the device code),
    ///   `malformedTokenResponse`, or another classified refusal; `CancellationError` when the calling task is
    ///   cancelled, which stops polling at once.
    public func pollDeviceAuthorization(
        _ authorization: DeviceAuthorizationResponse,
        receivedAt: ContinuousClock.Instant? = nil
    ) async throws -> TokenSet {
        let clock = configuration.clock
        var state = DevicePollingState(authorization: authorization, receivedAt: receivedAt ?? clock.now)
        let tokenRequest = try makeTokenRequest(.deviceCode(authorization.deviceCode))
        // Refused before the first wait.
        _ = try tokenRequest.urlRequest(endpoint: configuration.tokenEndpoint, now: clock.wallNow)
        let key = try grantKey(for: .deviceCode(authorization.deviceCode))
        var retriedForNonce = false
        var next = state.firstPoll
        while true {
            switch next {
            case .finished(let tokens):
                return tokens
            case .failed(let error):
                // A server's error_description may quote the device code or the client secret it was sent.
                throw error.redacting(tokenRequest.secrets)
            case .poll(let wait):
                try await clock.sleep(for: wait)
                do {
                    // Made for each poll: a client assertion is single-use and short-lived (RFC 7523 §3).
                    let request = try tokenURLRequest(tokenRequest, proofKey: key)
                    let answer = try await transport.send(request, to: "the token endpoint")
                    if key != nil, !retriedForNonce, answerAsksForNonce(answer) {
                        retriedForNonce = true
                        diagnoseNonceRetry()
                        next = .poll(after: .zero)  // the proof's nonce, not the grant, was refused: once more
                        continue
                    }
                    retriedForNonce = false
                    next = state.handle(
                        statusCode: answer.statusCode, body: answer.body, receivedAt: answer.receivedAt,
                        receivedAtWall: answer.receivedAtWall, retryAfter: answer.retryAfter, proofKey: key)
                } catch let error as SessionError
                    where [.networkUnavailable, .timedOut, .malformedResponse].contains(error.code)
                {
                    // No answer to read: the server may be restarting. Back off; the code's expiry bounds this.
                    next = state.handleTransportFailure(at: clock.now)
                }
            }
        }
    }
}
