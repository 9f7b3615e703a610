/// What the OAuth client tells whoever called it about an exchange, set by the caller for the duration of its call.
///
/// The client has no sink of its own and knows nothing of sessions; a session or a manager that calls it sets an
/// observer here (as a task-local value), so the story of a refresh or a sign-in includes what the client did for it.
package struct ExchangeEvents: Sendable {
    /// The `endpoint` (`"token"`) at `origin` refused a DPoP proof for its nonce (`use_dpop_nonce`, RFC 9449 §8),
    /// and the request goes once more with the nonce it gave.
    package var nonceRetry: @Sendable (_ endpoint: String, _ origin: String) -> Void

    package init(nonceRetry: @escaping @Sendable (_ endpoint: String, _ origin: String) -> Void) {
        self.nonceRetry = nonceRetry
    }

    /// The calling task's observer, if its caller set one.
    @TaskLocal package static var current: ExchangeEvents?
}
