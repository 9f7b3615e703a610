import Foundation
import SessionKit

/// Runs the demo's scenarios in order and collects their rows.
enum DemoRunner {
    /// Every scenario, in the order the table shows them.
    static let scenarios: [DemoScenario] =
        [LateResponseScenario.scenario] + CacheLeakScenario.scenarios + [
            RefreshAfterLogoutScenario.scenario,
            ReloginScenario.scenario,
            LogoutInFlightScenario.scenario,
            AccountSwitchScenario.scenario,
            WritesInFlightScenario.scenario,
            DownloadLeakScenario.scenario,
            RedirectTokenLeakScenario.scenario,
        ]

    /// The longest one scenario may take before the demo gives up on it (a hang is a bug, not a result).
    static let scenarioTimeout = Duration.seconds(30)

    /// A scenario that could not be run to the end.
    struct Failure: Error, Sendable, Equatable {
        /// The scenario's id.
        var id: String
        /// What went wrong.
        var message: String
    }

    /// The scenarios whose id starts with `prefix`, or all of them.
    ///
    /// - Parameter prefix: The `--only` value.
    /// - Returns: The scenarios, possibly none.
    static func selected(_ prefix: String?) -> [DemoScenario] {
        guard let prefix else { return scenarios }
        return scenarios.filter { $0.id.hasPrefix(prefix) }
    }

    /// Runs `scenarios` one after the other.
    ///
    /// - Parameters:
    ///   - scenarios: What to run.
    ///   - seed: The seed of the randomized scenario.
    ///   - progress: Told each scenario's id as it starts.
    /// - Returns: Each scenario's row, or why it could not run.
    static func run(
        _ scenarios: [DemoScenario],
        seed: UInt64,
        progress: (Int, String) -> Void = { _, _ in }
    ) async -> [Result<ScenarioResult, Failure>] {
        var results: [Result<ScenarioResult, Failure>] = []
        for (index, scenario) in scenarios.enumerated() {
            progress(index, scenario.id)
            do {
                results.append(.success(try await withTimeout(scenarioTimeout) { try await scenario.run(seed) }))
            } catch {
                results.append(.failure(Failure(id: scenario.id, message: describe(error))))
            }
        }
        return results
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? SessionError { return error.description }
        if error is CancellationError { return "it did not finish within \(scenarioTimeout)" }
        return String(describing: error)
    }

    /// Runs `body`, cancelling it and throwing `CancellationError` if it takes longer than `limit`.
    private static func withTimeout<T: Sendable>(
        _ limit: Duration,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else { throw CancellationError() }
            return value
        }
    }
}
