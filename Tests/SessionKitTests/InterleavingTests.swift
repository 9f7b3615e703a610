import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// A seeded, model-based randomized test: thousands of short schedules drive three accounts through sign-in,
/// requests (GET and POST, fast, or held at server-side gates a later step opens), sign-out (waited for, or
/// with its revocation held so it stays in progress), stale sign-outs, account switches, forced expiry,
/// server-side revocation and invalidation, refresh failures (transient and `invalid_grant`), a store refusing
/// rotated tokens, requests into a redirect loop the session refuses to follow, held refreshes
/// and cancellations of callers, through `SessionManager`, `UserSession` and a registered `SessionScoped`,
/// against a `MockAuthorizationServer` on loopback (token and revocation endpoints, and the resource routes).
/// Concurrency is real: what a step starts runs on real sockets while the next steps happen.
///
/// After every step, and once everything has settled, it checks:
/// - identity at commit: the container holds nothing, or data of the session it is bound to, committed while
///   that session was active;
/// - every request that reached the server carried the token of the session whose call sent it;
/// - no request with an ended session's token reached the server after its `end()`, beyond the requests that
///   were already on their way (each call at most once, and no more than `end()` cancelled minus those already
///   held at the server);
/// - the store and memory agree: a live session's record holds its own current refresh token; an ended session's
///   record is gone once its sign-out completed; nothing is left once every account signed out;
/// - no refresh result that completed after its session ended was stored or sent.
///
/// Every other schedule (by seed) signs in with DPoP (RFC 9449): each sign-in's tokens are bound to a fresh key, and
/// the mock checks every proof at its token endpoint and resources; every other batch the mock also requires its
/// nonce. After every step those schedules also check:
/// - the server saw no proof's `jti` twice;
/// - no proof of a session's key was made after the session ended (its `iat`, whole seconds of the system's wall
///   clock, more than a second after the end), and none reached the token endpoint after the end unless a refresh
///   of the session was in flight then (that request and its one retry with a nonce, no more);
/// - no request of a bound session carried a bearer token, and no refresh of one was asked for without its key.
///
/// And liveness — a user who did nothing wrong stays signed in, and what the app shows follows `current` — while
/// schedules also cancel callers (the caller that started a refresh among them), hold refresh requests and their
/// answers (after the server rotated the refresh token) past the refresh policy's `waitTimeout`, make the
/// registered resource's purge fail, race two switches, and cancel sign-ins:
/// - `reused`: no refresh token reached the token endpoint twice (the mock rotates refresh tokens and, as RFC 9700
///   §4.14.2 describes, a token presented again revokes the grant; it counts every token presented twice);
/// - `spurious`: no session left `manager.sessions` unless a step signed it out or replaced it, or the script made
///   the server reject its grant (a scripted `invalid_grant`, a grant revoked on the server);
/// - `mismatched`: `manager.state` agrees with `manager.current` (active or refreshing for its account when there
///   is one, neither when there is none), `current` is live, and every registered container is bound to it.
///
/// Environment:
/// - `SESSIONKIT_SCHEDULES`: how many schedules (500 by default; `scripts/test` runs 10,000, and 1,000 under
///   ThreadSanitizer).
/// - `SESSIONKIT_BASE_SEED`: the seed schedule seeds are derived from (random by default; printed).
/// - `SESSIONKIT_SEED`: replay one schedule by the seed a failure printed (20 runs: the timing differs each run),
///   optionally with `SESSIONKIT_STEPS` (comma-separated step indices) to keep only the steps of a shrunk trace:
///
///       SESSIONKIT_SEED=1234567 SESSIONKIT_STEPS=0,3,4 swift test --filter InterleavingTests
///
/// - `SESSIONKIT_DPOP_NONCES`: `1` or `0` makes every batch's mock require DPoP nonces, or none (by default every
///   other batch does, the first one not); a failure's replay line says which its batch had.
/// - `SESSIONKIT_LIST_VIOLATIONS`: when set, prints every failing schedule's violations and trace, not only the
///   first one's (to see which kinds of violation a change causes).
///
/// It prints three lines, `schedules: N, violations: V, seed: S`, where V counts the schedules that broke a safety
/// invariant, `liveness: schedules: N, reused: R, spurious: S, mismatched: M, stuck: K`, where R, S and M count the
/// schedules that showed each kind of liveness violation and K those that did not finish within their bound (two
/// minutes: something awaited an answer that never came; printed whole, not shrunk), and `dpop: schedules: D, proofs: P (refused: why N, …),
/// jti replays: J, bound tokens unproven: U`, what the mocks saw of the DPoP schedules (with nonces on, each
/// session's first proof to each endpoint is refused as `wrongNonce` and sent again). On a failure it also prints,
/// for each kind, the first failing schedule's seed, its violations, and the shortest trace it found that still
/// shows that kind, by re-running the schedule with steps removed.
@Suite(.timeLimit(.minutes(TimeLimit.scaled(45, by: "SESSIONKIT_SCHEDULES", reference: 10_000))))
struct InterleavingTests {
    private static let batchSize = 250
    private static let parallelSchedules = 4

    private struct Failure: Sendable {
        let seed: UInt64
        let outcome: ScheduleRun.Outcome
    }

    @Test(.timeLimit(.minutes(20))) func invariantsHoldUnderRandomInterleavings() async throws {
        let environment = ProcessInfo.processInfo.environment
        let replay = environment["SESSIONKIT_SEED"].flatMap { UInt64($0) }
        let base = environment["SESSIONKIT_BASE_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...(1 << 48))
        let count = replay != nil ? 20 : environment["SESSIONKIT_SCHEDULES"].flatMap { Int($0) } ?? 500
        let keep = environment["SESSIONKIT_STEPS"].map { $0.split(separator: ",").compactMap { Int($0) } }
            .flatMap { $0.isEmpty ? nil : $0 }

        /// The steps to run of schedule `seed`, with their indices in the full schedule.
        func steps(of seed: UInt64) -> [(index: Int, step: ScheduleStep)] {
            let all = ScheduleStep.schedule(seed: seed)
            return (keep ?? Array(all.indices)).filter { all.indices.contains($0) }.map { ($0, all[$0]) }
        }

        let forcedNonces = environment["SESSIONKIT_DPOP_NONCES"].map { $0 == "1" }
        var failures: [Failure] = []
        var dpop = (schedules: 0, proofs: 0, replays: 0, unproven: 0)
        var refusals: [MockAuthorizationServer.DPoPRefusal: Int] = [:]
        var redaction = (events: 0, secrets: 0, leaked: 0)
        /// Events of the failure paths the redaction check must cover, by kind.
        var failureEvents: [DiagnosticEvent.Kind: Int] = [:]
        var start = 0
        while start < count {
            let end = min(start + Self.batchSize, count)
            let world = try await InterleavingWorld.start(
                dpopNonces: forcedNonces ?? ((start / Self.batchSize) % 2 == 1))
            let found = try await withThrowingTaskGroup(of: Failure?.self) { group in
                var next = start
                var found: [Failure] = []
                func add() {
                    let seed = replay ?? ScheduleStep.seed(base: base, index: next)
                    next += 1
                    if ScheduleRun.usesDPoP(seed: seed) { dpop.schedules += 1 }
                    group.addTask {
                        let outcome = try await ScheduleRun(world: world, seed: seed).run(steps(of: seed).map(\.step))
                        return outcome.violations.isEmpty ? nil : Failure(seed: seed, outcome: outcome)
                    }
                }
                while next < end && next - start < Self.parallelSchedules { add() }
                while let result = try await group.next() {
                    if let result { found.append(result) }
                    if next < end { add() }
                }
                return found
            }
            if environment["SESSIONKIT_LIST_VIOLATIONS"] != nil {
                for failure in found {
                    print(
                        "seed \(failure.seed): \(failure.outcome.violations)\n    "
                            + failure.outcome.trace.joined(separator: "\n    "))
                }
            }
            // The first failing schedule of each kind is shrunk and printed, once.
            for kind in ScheduleModel.Kind.allCases where !failures.contains(where: { $0.outcome.kinds.contains(kind) })
            {
                guard let first = found.first(where: { $0.outcome.kinds.contains(kind) }) else { continue }
                try await report(first, kind: kind, steps: steps(of: first.seed), world: world)
            }
            failures += found
            let proofs = world.mock.dpopProofs
            dpop.proofs += proofs.count
            for refusal in proofs.compactMap(\.refusal) { refusals[refusal, default: 0] += 1 }
            dpop.replays += world.mock.jtiReplayCount
            dpop.unproven += world.mock.unprovenBoundTokenCount
            // Redaction: no event of any schedule carries a secret the schedules sent or their sessions held (a
            // rotated refresh token the store refused is held and may never be sent), on the failure paths too.
            world.diagnostics.flush()
            let secrets = world.secretsSent().union(world.secretsHeld())
            let lines = world.events.withLock { $0 }
            redaction.events += lines.count
            redaction.secrets += secrets.count
            for kind in [DiagnosticEvent.Kind.storageFailed, .redirectRefused, .refreshRejected] {
                failureEvents[kind, default: 0] += lines.filter { $0.contains(#""kind":"\#(kind.rawValue)""#) }.count
            }
            for line in lines where InterleavingWorld.words(of: line).contains(where: secrets.contains) {
                redaction.leaked += 1
                if redaction.leaked == 1 { print("an event carried a secret: \(line)") }
            }
            await world.stop()
            start = end
        }
        func schedules(_ kind: ScheduleModel.Kind) -> [UInt64] {
            failures.filter { $0.outcome.kinds.contains(kind) }.map(\.seed)
        }
        let violating = schedules(.safety)
        let (reused, spurious, mismatched) = (schedules(.reused), schedules(.spurious), schedules(.mismatched))
        let stuck = schedules(.stuck)
        print("schedules: \(count), violations: \(violating.count), seed: \(replay ?? base)")
        print(
            "liveness: schedules: \(count), reused: \(reused.count), spurious: \(spurious.count), "
                + "mismatched: \(mismatched.count), stuck: \(stuck.count)")
        print(
            "dpop: schedules: \(dpop.schedules), proofs: \(dpop.proofs) (refused: "
                + (refusals.isEmpty
                    ? "none"
                    : refusals.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key) \($0.value)" }
                        .joined(separator: ", ")) + "), "
                + "jti replays: \(dpop.replays), bound tokens unproven: \(dpop.unproven)")
        print(
            "redaction: events: \(redaction.events), secrets sent or held: \(redaction.secrets), "
                + "events carrying one: \(redaction.leaked) (failure paths: "
                + failureEvents.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key.rawValue) \($0.value)" }
                .joined(separator: ", ") + ")")
        #expect(redaction.leaked == 0, "diagnostic events carried a token, code or cookie")
        #expect(redaction.events > 0 && redaction.secrets > 0, "the redaction check saw events and secrets")
        // A store refusing rotated tokens, a refused redirect and a rejected grant each told their story, so the
        // check above read the events of the failure paths, not only of success.
        if replay == nil && count >= 200 {
            for kind in [DiagnosticEvent.Kind.storageFailed, .redirectRefused, .refreshRejected] {
                #expect(failureEvents[kind, default: 0] > 0, "no schedule emitted \(kind.rawValue)")
            }
        }
        #expect(violating.isEmpty, "schedules broke an invariant; first seed \(violating.first ?? 0)")
        // What the schedules' own checks attribute to a seed, counted by the servers as well.
        #expect(dpop.replays == 0, "the servers saw \(dpop.replays) jti replays")
        #expect(dpop.unproven == 0, "the servers saw \(dpop.unproven) bound tokens used without a proof")
        #expect(reused.isEmpty, "schedules presented a refresh token twice; first seed \(reused.first ?? 0)")
        #expect(spurious.isEmpty, "schedules lost a session nobody ended; first seed \(spurious.first ?? 0)")
        #expect(stuck.isEmpty, "schedules did not finish within their bound; first seed \(stuck.first ?? 0)")
        #expect(mismatched.isEmpty, "schedules let state or containers drift; first seed \(mismatched.first ?? 0)")
    }

    /// What `reused` reads: the mock counts each refresh token presented more than once, once, also after its grant
    /// was revoked (which reuse detection does not count).
    @Test(.timeLimit(.minutes(1))) func theMockCountsEveryRefreshTokenPresentedTwice() async throws {
        try await MockAuthorizationServer.withRunning { mock in
            try mock.addUser("alice")
            try mock.addUser("bob")
            let client = mock.makeClient()
            let first = try #require(try mock.issueTokens(for: "alice").refreshToken)
            let second = try #require(try await client.refresh(using: first).refreshToken)
            #expect(mock.repeatedRefreshTokenCount == 0)
            for _ in 0..<2 { await #expect(throws: SessionError.self) { try await client.refresh(using: first) } }
            #expect(mock.repeatedRefreshTokenCount(for: "alice") == 1 && mock.reuseDetectionCount == 1)
            // The grant is revoked now: presenting its newest token once is no reuse, twice is.
            await #expect(throws: SessionError.self) { try await client.refresh(using: second) }
            #expect(mock.repeatedRefreshTokenCount(for: "alice") == 1)
            await #expect(throws: SessionError.self) { try await client.refresh(using: second) }
            #expect(mock.repeatedRefreshTokenCount(for: "alice") == 2 && mock.reuseDetectionCount == 1)
            #expect(mock.repeatedRefreshTokenCount(for: "bob") == 0 && mock.repeatedRefreshTokenCount == 2)
        }
    }

    /// Prints a failure, shrunk: steps are removed while the schedule still shows a violation of `kind` (each
    /// candidate tried up to four times, since the timing differs between runs).
    private func report(
        _ failure: Failure, kind: ScheduleModel.Kind, steps: [(index: Int, step: ScheduleStep)],
        world: InterleavingWorld
    ) async throws {
        var kept = Array(steps.indices)
        var shortest = failure.outcome
        // A stuck schedule is printed whole: each try to shrink it could take the whole bound.
        var budget = kind == .stuck ? 0 : 300
        var chunk = max(kept.count / 2, 1)
        while chunk >= 1 && budget > 0 {
            var index = 0
            while index < kept.count && budget > 0 {
                var candidate = kept
                candidate.removeSubrange(index..<min(index + chunk, kept.count))
                var reproduced: ScheduleRun.Outcome?
                for _ in 0..<4 where reproduced == nil && budget > 0 && !candidate.isEmpty {
                    budget -= 1
                    let outcome = try await ScheduleRun(world: world, seed: failure.seed).run(
                        candidate.map { steps[$0].step })
                    if outcome.kinds.contains(kind) { reproduced = outcome }
                }
                if let reproduced {
                    kept = candidate
                    shortest = reproduced
                } else {
                    index += chunk
                }
            }
            chunk /= 2
        }
        let replay = kept.map { String(steps[$0].index) }.joined(separator: ",")
        print(
            """
            InterleavingTests: schedule \(failure.seed)\(ScheduleRun.usesDPoP(seed: failure.seed) ? " (DPoP)" : "") \
            broke an invariant (\(kind)):
              \(failure.outcome.violations.joined(separator: "\n  "))
            shortest failing trace (\(kept.count) of \(steps.count) steps; \
            replay: SESSIONKIT_SEED=\(failure.seed) SESSIONKIT_STEPS=\(replay) \
            SESSIONKIT_DPOP_NONCES=\(world.dpopNonces ? 1 : 0) swift test --filter InterleavingTests):
              \(shortest.violations.joined(separator: "\n  "))
              \(shortest.trace.joined(separator: "\n  "))
            """
        )
    }
}
