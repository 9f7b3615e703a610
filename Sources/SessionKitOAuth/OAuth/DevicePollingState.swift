import Foundation

/// The client's side of device authorization polling (RFC 8628 §3.4, §3.5), as a pure state machine.
///
/// The caller owns the clock and the HTTP client: it waits as ``Next/poll(after:)`` says, sends the device code
/// token request, and feeds each answer to ``handle(statusCode:body:receivedAt:receivedAtWall:retryAfter:)``
/// (or a failure to connect to ``handleTransportFailure(at:)``) until the answer is ``Next/finished(_:)`` or
/// ``Next/failed(_:)``.
///
/// | Answer | Next |
/// |---|---|
/// | 200 with a valid token response | `.finished(tokens)` |
/// | 200 with an invalid token response | `.failed(.malformedTokenResponse)` |
/// | `authorization_pending` | `.poll(after: interval)` |
/// | `slow_down` | the interval grows by 5 s for this and every later poll; `.poll(after: interval)` |
/// | `access_denied` | `.failed(.accessDenied)` |
/// | `expired_token` | `.failed(.authorizationExpired)` |
/// | `invalid_grant` | `.failed(.authorizationFailed)`: the device code itself was refused |
/// | 429 or 5xx without one of the codes above, or no connection | `.poll` after an exponential backoff (twice the
///   wait per consecutive failure, at most 5 minutes, never less than `Retry-After`) |
/// | any other answer | `.failed` with ``OAuthErrorResponse/classify(statusCode:body:retryAfter:)``'s error |
///
/// Whatever the answer, when the next poll would happen after the device code expires the result is
/// `.failed(.authorizationExpired)`: polling with an expired code cannot succeed. After a `.finished` or a
/// `.failed`, every further call answers `.failed(.invalidInput)`.
package struct DevicePollingState: Sendable {
    /// What the caller does next.
    package enum Next: Sendable, Equatable {
        /// Wait this long, then send the token request again.
        case poll(after: Duration)
        /// The user approved: these are the tokens.
        case finished(TokenSet)
        /// Polling is over without tokens.
        case failed(SessionError)
    }

    /// The wait between polls, grown by every `slow_down`.
    public private(set) var interval: Duration
    /// When the device code expires on the monotonic clock.
    public let deadline: ContinuousClock.Instant
    /// Whether polling has ended, with tokens or without.
    public private(set) var isFinished = false

    private var consecutiveTransientFailures = 0
    private static let maximumBackoff: Duration = .seconds(300)

    /// Starts polling for a device authorization.
    ///
    /// - Parameters:
    ///   - authorization: The device authorization response.
    ///   - receivedAt: The monotonic instant that response arrived; the code expires `expiresIn` after it.
    public init(authorization: DeviceAuthorizationResponse, receivedAt: ContinuousClock.Instant) {
        self.interval = authorization.interval
        self.deadline = receivedAt.advanced(by: authorization.expiresIn)
    }

    /// The first step: wait one interval before the first poll (RFC 8628 §3.4 polls no sooner than that).
    public var firstPoll: Next {
        .poll(after: interval)
    }

    /// Decides what follows a token endpoint answer.
    ///
    /// - Parameters:
    ///   - statusCode: The HTTP status.
    ///   - body: The response body.
    ///   - receivedAt: The monotonic instant the answer arrived.
    ///   - receivedAtWall: The wall-clock time the answer arrived.
    ///   - retryAfter: The parsed `Retry-After`, if the answer had one.
    /// - Returns: The next step; see the table on ``DevicePollingState``.
    public mutating func handle(
        statusCode: Int,
        body: Data,
        receivedAt: ContinuousClock.Instant,
        receivedAtWall: Date,
        retryAfter: Duration? = nil
    ) -> Next {
        handle(
            statusCode: statusCode, body: body, receivedAt: receivedAt, receivedAtWall: receivedAtWall,
            retryAfter: retryAfter, proofKey: nil)
    }

    /// ``handle(statusCode:body:receivedAt:receivedAtWall:retryAfter:)`` for polls that carried DPoP proofs of
    /// `proofKey`: the tokens must come bound to it.
    package mutating func handle(
        statusCode: Int,
        body: Data,
        receivedAt: ContinuousClock.Instant,
        receivedAtWall: Date,
        retryAfter: Duration?,
        proofKey: DPoPKey?
    ) -> Next {
        guard !isFinished else { return Self.alreadyFinished }
        if statusCode == 200 {
            do {
                let tokens = try TokenResponse.parse(
                    data: body, statusCode: statusCode, receivedAt: receivedAt, receivedAtWall: receivedAtWall,
                    proofKey: proofKey)
                return finish(.finished(tokens))
            } catch let error as SessionError {
                return finish(.failed(error))
            } catch {
                return finish(.failed(SessionError(.malformedTokenResponse, "the token response could not be read")))
            }
        }
        switch OAuthErrorResponse.parse(body)?.error {
        case "authorization_pending"?:
            consecutiveTransientFailures = 0
            return pollOrExpire(after: interval, now: receivedAt)
        case "slow_down"?:
            consecutiveTransientFailures = 0
            interval += .seconds(5)
            return pollOrExpire(after: interval, now: receivedAt)
        case "access_denied"?:
            return finish(
                .failed(
                    SessionError(
                        .accessDenied, "the user denied the device authorization", statusCode: statusCode,
                        oauthError: "access_denied")))
        case "invalid_grant"?:
            // Here it refuses the device code, not a refresh token: the grant failed, nothing to sign out of.
            return finish(
                .failed(
                    SessionError(
                        .authorizationFailed, "the token endpoint refused the device code: invalid_grant",
                        statusCode: statusCode, oauthError: "invalid_grant")))
        case "expired_token"?:
            return finish(
                .failed(
                    SessionError(
                        .authorizationExpired, "the device code expired before the user approved it",
                        statusCode: statusCode, oauthError: "expired_token")))
        default:
            if statusCode == 429 || (500...599).contains(statusCode) {
                return backOff(now: receivedAt, retryAfter: retryAfter)
            }
            return finish(
                .failed(OAuthErrorResponse.classify(statusCode: statusCode, body: body, retryAfter: retryAfter)))
        }
    }

    /// Decides what follows a poll that got no answer (connection refused, reset, timed out).
    ///
    /// - Parameter now: The monotonic instant the failure was seen.
    /// - Returns: A backed-off `.poll`, or `.failed(.authorizationExpired)` when the code would expire first.
    public mutating func handleTransportFailure(at now: ContinuousClock.Instant) -> Next {
        guard !isFinished else { return Self.alreadyFinished }
        return backOff(now: now, retryAfter: nil)
    }

    private static let alreadyFinished = Next.failed(
        SessionError(.invalidInput, "device authorization polling has already ended"))

    private mutating func backOff(now: ContinuousClock.Instant, retryAfter: Duration?) -> Next {
        consecutiveTransientFailures += 1
        // RFC 8628 §3.5: back off exponentially on errors that are not the protocol's own.
        let doublings = min(consecutiveTransientFailures, 16)
        var wait = min(interval * (1 << doublings), max(interval, Self.maximumBackoff))
        if let retryAfter, retryAfter > wait { wait = retryAfter }
        return pollOrExpire(after: wait, now: now)
    }

    private mutating func pollOrExpire(after wait: Duration, now: ContinuousClock.Instant) -> Next {
        guard now.advanced(by: wait) <= deadline else {
            return finish(
                .failed(SessionError(.authorizationExpired, "the device code expires before the next poll")))
        }
        return .poll(after: wait)
    }

    private mutating func finish(_ next: Next) -> Next {
        isFinished = true
        return next
    }
}
