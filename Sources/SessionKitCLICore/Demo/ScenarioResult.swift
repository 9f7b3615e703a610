/// What one side of a scenario did: whether it leaked, computed from what happened, and how.
struct Verdict: Sendable, Equatable {
    /// Whether one user's data, token or write reached another user or outlived the session.
    var leaked: Bool
    /// What happened, in one or two sentences, without any token.
    var detail: String
}

/// One row of the demo: a scenario run the naive way and with SessionKit.
struct ScenarioResult: Sendable, Equatable {
    /// The scenario's id, such as `late-response`.
    var id: String
    /// What the naive code did.
    var naive: Verdict
    /// What SessionKit did.
    var sessionKit: Verdict
}

/// A scenario of the demo: an id and the work that runs it both ways.
struct DemoScenario: Sendable {
    /// The id, such as `cache-leak/no-store`.
    let id: String
    /// Runs the scenario both ways; the argument is the demo's seed.
    let run: @Sendable (UInt64) async throws -> ScenarioResult
}
