import SessionKitTesting

/// One step of a randomized schedule: what to do, and numbers that choose its target when it runs.
///
/// Targets are chosen at run time among the candidates that exist then (the live sessions, the held gates, the
/// calls in flight), so a step still means something when the steps before it are removed while shrinking; a
/// step without a candidate does nothing.
struct ScheduleStep: Sendable, Hashable, CustomStringConvertible {
    enum Kind: String, Sendable, CaseIterable {
        /// Sign in an account that has no live session; `variant` 0 keeps the current session current.
        case signIn
        /// Sign in again an account that has a live session (it replaces that session).
        case signInAgain
        /// A request from a live session: `variant` bit 0 is POST, bit 1 slow (held at the server), bit 2 held
        /// after its response, before its commit (an app decoding or processing the answer).
        case request
        /// Open one held gate: a slow request, a held refresh or a held revocation.
        case openGate
        /// Sign a session out and wait for it; `variant` 0 the current one, bit 1 without revocation.
        case signOut
        /// Sign a session out with its revocation held at a gate: the sign-out stays in progress.
        case signOutHeld
        /// Call `signOut` again with a session that has already ended.
        case signOutStale
        /// Make another live session current.
        case switchAccount
        /// Make a live session current and sign out every other one.
        case switchEndingOthers
        /// Move the clock past every access token's expiry, so the next request refreshes first.
        case expire
        /// Revoke every grant of an account on the server: its tokens stop working and refreshing is refused.
        case revokeOnServer
        /// Invalidate an account's access tokens on the server: the next request gets 401 and refreshes.
        case invalidateAccess
        /// A forced refresh whose token request fails transiently (`variant` bit 0: twice, beyond the retry).
        case refreshTransient
        /// A forced refresh whose token request is answered `invalid_grant`.
        case refreshRejected
        /// A forced refresh held at a gate: `variant` bit 0 holds its answer (the server has rotated the refresh
        /// token by then), otherwise the request, before it reaches the token endpoint.
        case refreshHeld
        /// Cancel the task of a call in flight.
        case cancelCall
        /// Cancel the task of a forced refresh in flight: the caller that started the refresh, unless it joined one.
        case cancelRefreshCaller
        /// Move the clock past the refresh policy's `waitTimeout`: every caller waiting for a refresh gives up.
        case outwaitRefresh
        /// Make the next purge (`variant` bit 0: the next two) of the registered resource fail.
        case failPurges
        /// Make the store refuse the next save (`variant` bit 0: the next two) of a session's rotated tokens, and
        /// force a refresh of it: the rotation stays in memory only, and the store failure is told.
        case failSaves
        /// A GET from a live session into a same-origin redirect loop, which the session refuses to follow past
        /// its hop limit.
        case refusedRedirect
        /// Switch to two sessions, four times each, all at once; `variant` bit 0: switch to
        /// a session while an account that has none signs in and becomes current.
        case switchRace
        /// Sign in an account that has no live session, preferring one whose sign-out is still in progress (not
        /// let go first), and cancel the sign-in's task at once.
        case signInCancelled
        /// A sign-in whose grant fails (`variant` bit 0: the user cancels it, otherwise the provider refuses) for
        /// any account, live or not, made current unless `variant` bit 1.
        case signInFails
    }

    let kind: Kind
    /// Chooses the target among the candidates.
    let pick: Int
    /// Chooses how (see each kind).
    let variant: Int

    var description: String { "\(kind)(pick \(pick), variant \(variant))" }

    private static let weights: [(Kind, Int)] = [
        (.signIn, 8), (.signInAgain, 2), (.request, 16), (.openGate, 10), (.signOut, 4), (.signOutHeld, 3),
        (.signOutStale, 1), (.switchAccount, 4), (.switchEndingOthers, 1), (.expire, 2), (.revokeOnServer, 2),
        (.invalidateAccess, 2), (.refreshTransient, 2), (.refreshRejected, 2), (.refreshHeld, 4), (.cancelCall, 3),
        (.cancelRefreshCaller, 3), (.outwaitRefresh, 3), (.failPurges, 2), (.switchRace, 2), (.signInCancelled, 2),
        (.signInFails, 2), (.failSaves, 2), (.refusedRedirect, 2),
    ]

    /// The steps of the schedule `seed` names: a sign-in, then 4 to 13 steps drawn by weight.
    static func schedule(seed: UInt64) -> [ScheduleStep] {
        var generator = SeededGenerator(seed: seed)
        let total = weights.reduce(0) { $0 + $1.1 }
        var steps = [ScheduleStep(kind: .signIn, pick: Int.random(in: 0..<1000, using: &generator), variant: 1)]
        for _ in 0..<Int.random(in: 4...13, using: &generator) {
            var roll = Int.random(in: 0..<total, using: &generator)
            var kind = Kind.request
            for (candidate, weight) in weights {
                if roll < weight {
                    kind = candidate
                    break
                }
                roll -= weight
            }
            steps.append(
                ScheduleStep(
                    kind: kind,
                    pick: Int.random(in: 0..<1000, using: &generator),
                    variant: Int.random(in: 0..<8, using: &generator)
                )
            )
        }
        return steps
    }

    /// The seed of schedule `index` of a run whose base seed is `base`.
    static func seed(base: UInt64, index: Int) -> UInt64 {
        var generator = SeededGenerator(seed: base &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
        return generator.next()
    }
}
