import SessionKit

/// A ``/SessionKit/TokenEndpoint`` whose answers the test writes: it records every refresh token presented to it,
/// can hold each call at a ``Gate``, and answers from a closure.
///
/// Give it to a session or a manager as its token endpoint when a test needs to decide exactly what a refresh
/// returns, or when it returns, without an authorization server:
///
/// ```swift
/// let gate = Gate()
/// let endpoint = ScriptedTokenEndpoint(gate: gate) { _, call in
///     TokenSet(accessToken: "token-alice-\(call)", refreshToken: "refresh-alice-\(call)")
/// }
/// let session = UserSession(account: alice, tokens: tokens, tokenEndpoint: endpoint)
/// // … two requests answered 401 reach the refresh …
/// await gate.waitForArrivals(1)  // the refresh is at the endpoint now
/// gate.open()
/// #expect(endpoint.presented == ["refresh-alice"])  // one refresh for both
/// ```
///
/// For refresh-token rotation with reuse detection and real HTTP, use ``MockAuthorizationServer`` instead.
///
/// - Important: Thread-safe. A call is recorded in ``presented`` before it waits at the gate, so
///   ``Gate/waitForArrivals(_:)`` and ``count`` agree on how many calls arrived.
public final class ScriptedTokenEndpoint: TokenEndpoint {
    private let calls = Lock<[String]>([])
    private let gate: Gate?
    private let answer: @Sendable (_ refreshToken: String, _ call: Int) async throws -> TokenSet

    /// Creates an endpoint that answers every refresh with `answer`.
    ///
    /// - Parameters:
    ///   - gate: A gate each call waits at before it answers; `nil` answers at once.
    ///   - answer: The tokens to return, or the error to throw, given the refresh token presented and the call's
    ///     number (1 for the first call). A ``/SessionKit/SessionError`` thrown here is what the session sees;
    ///     throw `SessionError(.refreshRejected, …)` for a grant the server rejects.
    public init(
        gate: Gate? = nil,
        answer: @escaping @Sendable (_ refreshToken: String, _ call: Int) async throws -> TokenSet
    ) {
        self.gate = gate
        self.answer = answer
    }

    /// The refresh tokens presented so far, oldest first, one for each call.
    public var presented: [String] { calls.withLock { $0 } }

    /// How many calls have arrived so far, answered or not.
    public var count: Int { calls.withLock { $0.count } }

    /// Records `refreshToken`, waits at the gate if there is one, then answers as scripted.
    ///
    /// - Parameter refreshToken: The refresh token the session presents.
    /// - Returns: What the script returns for this call.
    /// - Throws: What the script throws.
    public func refresh(using refreshToken: String) async throws -> TokenSet {
        let call = calls.withLock { calls -> Int in
            calls.append(refreshToken)
            return calls.count
        }
        if let gate { await gate.wait() }
        return try await answer(refreshToken, call)
    }
}
