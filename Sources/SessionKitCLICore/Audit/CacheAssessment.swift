import Foundation
import SessionKit

/// What RFC 9111 lets caches do with the responses two users got for the same URL, and what would fix it.
///
/// The question is whether a cache holding user A's response may answer user B's request with it without asking
/// the server (the server would see B's token, and a correct server would answer for B). For each kind of cache:
///
/// - A **private cache** (an app's URL cache, a browser's) may store the response unless `no-store`
///   (RFC 9111 §3), reuses it while it is fresh (`max-age`, `Expires`, or a heuristic lifetime when the response
///   gives none, §4.2.2), unless it must validate first (`no-cache`) or `Vary` names a field the two requests
///   differ in (§4.1: `Authorization` does, and `*` matches nothing). `private` does not stop it: a private cache
///   is assumed to serve one user, which a shared device, a second account or an account switch breaks.
/// - A **shared cache** (a CDN, a reverse proxy) must not store a response to a request with `Authorization`
///   unless the response says `public`, `s-maxage` or `must-revalidate` (§3.5), nor one marked `private`.
///
/// A leak is possible when some cache could reuse a response across the users and the bodies differ: identical
/// bodies carry nothing personal (for these two users, at least).
struct CacheAssessment: Sendable, Equatable {
    /// What a kind of cache may do with one user's response when the other user asks.
    enum Reuse: Sendable, Equatable {
        /// It may answer the other user with it, without asking the server; the reason says why.
        case acrossUsers(String)
        /// It may keep it but must ask the server first, which sees the other user's token.
        case afterValidation(String)
        /// It must not keep it, or must not use it for the other user.
        case never(String)

        /// Whether the other user may be answered from the cache.
        var isAcrossUsers: Bool {
            if case .acrossUsers = self { return true }
            return false
        }

        /// The reason.
        var reason: String {
            switch self {
            case .acrossUsers(let reason), .afterValidation(let reason), .never(let reason): reason
            }
        }
    }

    /// Statuses a cache may store without explicit freshness (RFC 9110 §15.1, "heuristically cacheable").
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// What a private cache may do.
    let privateCache: Reuse
    /// What a shared cache may do.
    let sharedCache: Reuse
    /// Whether the two users got different statuses or bodies.
    let bodiesDiffer: Bool
    /// Whether a cache could show one user's response to the other.
    let leakPossible: Bool
    /// The header changes that would make it safe, best first; empty when nothing needs fixing.
    let fixes: [String]
    /// Things worth knowing that do not change the verdict.
    let notes: [String]

    /// Assesses the two users' answers.
    ///
    /// - Parameters:
    ///   - first: User A's answer.
    ///   - second: User B's answer.
    init(first: HTTPExchange, second: HTTPExchange) {
        // A cache may hold either user's answer when the other asks: the worse of the two decides.
        let privateReuse = [first, second].map { Self.privateReuse(of: $0) }
        let sharedReuse = [first, second].map { Self.sharedReuse(of: $0) }
        privateCache = Self.worst(privateReuse)
        sharedCache = Self.worst(sharedReuse)
        bodiesDiffer = first.status != second.status || first.body != second.body
        let reusable = privateCache.isAcrossUsers || sharedCache.isAcrossUsers
        leakPossible = reusable && bodiesDiffer

        var notes: [String] = []
        var fixes: [String] = []
        if leakPossible {
            fixes.append(
                "Cache-Control: private, no-store (personal data: no cache keeps it, on any device or proxy)")
            if sharedCache.isAcrossUsers {
                fixes.append(
                    "remove public and s-maxage: they let CDNs and proxies answer every user with one user's data")
            }
            fixes.append(
                "or, to stay cacheable for the same user: Cache-Control: private, max-age=N with Vary: "
                    + "Authorization (it protects only caches that honour Vary; FoundationNetworking's URLCache "
                    + "does not on manual lookup, and one app cache shared by two accounts still mixes them)")
        } else if reusable {
            notes.append(
                "a cache could reuse these responses across users, but both users got the same body: harmless "
                    + "only if this resource never depends on who asks")
        }
        if [first, second].contains(where: { Self.directives($0).0.isMalformed }) {
            notes.append("a Cache-Control field is malformed; caches may read it differently")
        }
        if first.header("Cache-Control") != second.header("Cache-Control")
            || first.header("Vary") != second.header("Vary")
        {
            notes.append("the two users got different Cache-Control or Vary fields; the worse one decides")
        }
        self.fixes = fixes
        self.notes = notes
    }

    private static func worst(_ reuses: [Reuse]) -> Reuse {
        reuses.first(where: \.isAcrossUsers)
            ?? reuses.first { if case .afterValidation = $0 { true } else { false } }
            ?? reuses[0]
    }

    private static func directives(_ answer: HTTPExchange) -> (CacheControl, Vary) {
        (
            CacheControl(fieldValues: answer.header("Cache-Control").map { [$0] } ?? []),
            Vary(fieldValues: answer.header("Vary").map { [$0] } ?? [])
        )
    }

    /// The lifetime the response states for a private cache (`max-age`, else `Expires` minus `Date`).
    private static func explicitLifetime(_ answer: HTTPExchange, _ cacheControl: CacheControl) -> (Int, String)? {
        if let maxAge = cacheControl.maxAge { return (maxAge, "max-age=\(maxAge)") }
        guard let expiresText = answer.header("Expires") else { return nil }
        guard let expires = HTTPDate.parse(expiresText) else { return (0, "Expires is not a valid date") }
        let date = answer.header("Date").flatMap { HTTPDate.parse($0) } ?? Date()
        return (Int(expires.timeIntervalSince(date).rounded(.down)), "Expires")
    }

    private static func age(_ answer: HTTPExchange) -> Int {
        answer.header("Age").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    static func privateReuse(of answer: HTTPExchange) -> Reuse {
        let (cacheControl, vary) = directives(answer)
        if cacheControl.noStore { return .never("no-store: nothing is stored") }
        let lifetime = explicitLifetime(answer, cacheControl)
        let storable =
            cacheControl.isPublic || cacheControl.isPrivate || lifetime != nil
            || heuristicallyCacheable.contains(answer.status)
        guard storable else {
            return .never("status \(answer.status) is not stored without an explicit lifetime")
        }
        if vary.isWildcard { return .never("Vary: * matches no later request") }
        if vary.fieldNames.contains("authorization") {
            return .never("Vary: Authorization keeps each token's response apart (in caches that honour Vary)")
        }
        if cacheControl.noCache && cacheControl.noCacheFieldNames.isEmpty {
            return .afterValidation("no-cache: every reuse is checked with the server first")
        }
        let privateNote = cacheControl.isPrivate ? "; private does not stop a private cache" : ""
        guard let lifetime else {
            return .acrossUsers(
                "no explicit lifetime, so a cache may pick a heuristic one (RFC 9111 §4.2.2)\(privateNote)")
        }
        let (seconds, source) = lifetime
        guard seconds > age(answer) else { return .afterValidation("stale on arrival (\(source))") }
        return .acrossUsers(
            "fresh for \(seconds - age(answer)) s (\(source)), and Vary does not name Authorization\(privateNote)")
    }

    static func sharedReuse(of answer: HTTPExchange) -> Reuse {
        let (cacheControl, vary) = directives(answer)
        if cacheControl.noStore { return .never("no-store: nothing is stored") }
        if cacheControl.isPrivate && cacheControl.privateFieldNames.isEmpty {
            return .never("private: shared caches must not store it")
        }
        guard cacheControl.isPublic || cacheControl.sharedMaxAge != nil || cacheControl.mustRevalidate else {
            return .never(
                "the request carried Authorization and the response has no public, s-maxage or "
                    + "must-revalidate (RFC 9111 §3.5)")
        }
        if vary.isWildcard { return .never("Vary: * matches no later request") }
        if vary.fieldNames.contains("authorization") {
            return .never("Vary: Authorization keeps each token's response apart")
        }
        if cacheControl.noCache && cacheControl.noCacheFieldNames.isEmpty {
            return .afterValidation("no-cache: every reuse is checked with the server first")
        }
        let allowedBy =
            cacheControl.isPublic ? "public" : cacheControl.sharedMaxAge != nil ? "s-maxage" : "must-revalidate"
        let lifetime: (Int, String)? =
            cacheControl.sharedMaxAge.map { ($0, "s-maxage=\($0)") } ?? explicitLifetime(answer, cacheControl)
        guard let lifetime else {
            return .acrossUsers("\(allowedBy) allows storing it, and a cache may pick a heuristic lifetime")
        }
        let (seconds, source) = lifetime
        guard seconds > age(answer) else { return .afterValidation("stale on arrival (\(source))") }
        return .acrossUsers(
            "\(allowedBy) allows storing it despite Authorization; fresh for \(seconds - age(answer)) s (\(source))")
    }
}
