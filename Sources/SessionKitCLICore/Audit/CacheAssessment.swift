import Foundation
import SessionKit

/// What caches do and did with the responses two users got for the same URL, and what would fix it.
///
/// Two questions, answered apart:
///
/// - **Leaking now** (observed): did a cache in front of the server answer one user with the other's response
///   during the audit? The audit fetched the resource as A, then as B, then as B and as A again with the origin
///   forced (a unique query and `no-cache`: no cache holds that URL). B's answer byte for byte A's while B's own
///   origin answer differs means a cache served A's response to B, whatever the headers say (caches can be set
///   to ignore them).
/// - **Could leak** (inferred from the headers): would some cache reuse one user's response for the other?
///   - A **private cache** (an app's URL cache, a browser's) may store the response unless `no-store`
///     (RFC 9111 §3), reuses it while it is fresh (`max-age`, `Expires`, or a heuristic lifetime when the response
///     gives none, §4.2.2), unless it must validate first (`no-cache`) or `Vary` names a field the two requests
///     differ in (§4.1: `Authorization` does, and `*` matches nothing). `private` does not stop it: a private
///     cache is assumed to serve one user, which a shared device, a second account or an account switch breaks.
///   - **Shared caches** as deployed: nginx, Varnish and RFC 9111 CDNs, each with its defaults
///     (``SharedCacheModel``).
///
/// A response that is the same for both users at the origin carries nothing personal (for these two, at least).
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

        /// The reuse as a word for JSON.
        var name: String {
            switch self {
            case .acrossUsers: "across-users"
            case .afterValidation: "after-validation"
            case .never: "never"
            }
        }
    }

    /// The overall finding, in order of precedence.
    enum Verdict: String, Sendable, Equatable {
        /// A cache served one user's response to the other during the audit.
        case leakingNow = "leaking-now"
        /// No cache did during the audit, but one could: the headers allow it and the answers are personal.
        case couldLeak = "could-leak"
        /// No cache may reuse the answers across the users.
        case safe
        /// The origin gave both users the same answer: nothing personal to leak.
        case sameForBoth = "same-for-both"
        /// Both users got the same answer and the origin could not be asked apart: the audit cannot tell a
        /// leaking cache from a resource that is the same for everyone.
        case unobservable

        /// The exit status it means.
        var exitCode: ExitCode {
            switch self {
            case .leakingNow, .couldLeak: .leak
            case .safe, .sameForBoth: .ok
            case .unobservable: .failure
            }
        }
    }

    /// Statuses a cache may store without explicit freshness (RFC 9110 §15.1, "heuristically cacheable").
    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// What a private cache may do.
    let privateCache: Reuse
    /// What a shared cache following RFC 9111 §3.5 to the letter may do.
    let sharedCache: Reuse
    /// What each modelled shared cache would do, the worse of the two answers for each.
    let sharedCaches: [SharedCacheModel.Verdict]
    /// Whether the two users got different statuses or bodies.
    let bodiesDiffer: Bool
    /// Whether the origin answers the two users differently: from the origin-forced answers when there are some,
    /// else from the two answers when they differ; `nil` when unknown.
    let personal: Bool?
    /// Whether a cache served one user's answer to the other during the audit.
    let leakingNow: Bool
    /// Why ``leakingNow`` is true, or `nil`.
    let leakEvidence: String?
    /// Whether some cache could show one user's response to the other.
    let leakPossible: Bool
    /// The overall finding.
    let verdict: Verdict
    /// The changes that would make it safe, best first; empty when nothing needs fixing.
    let fixes: [String]
    /// Things worth knowing that do not change the verdict.
    let notes: [String]

    /// Assesses the two users' answers.
    ///
    /// - Parameters:
    ///   - first: User A's answer.
    ///   - second: User B's answer.
    ///   - originFirst: A's answer with the origin forced, if one was obtained.
    ///   - originSecond: B's answer with the origin forced, if one was obtained.
    init(first: HTTPExchange, second: HTTPExchange, originFirst: HTTPExchange? = nil, originSecond: HTTPExchange? = nil)
    {
        // A cache may hold either user's answer when the other asks: the worse of the two decides.
        privateCache = Self.worst([first, second].map { Self.privateReuse(of: $0) })
        sharedCache = Self.worst([first, second].map { Self.sharedReuse(of: $0) })
        let perAnswer = [first, second].map { SharedCacheModel.verdicts(for: $0) }
        sharedCaches = perAnswer[0].indices.map { index in
            SharedCacheModel.Verdict(
                cache: perAnswer[0][index].cache, reuse: Self.worst(perAnswer.map { $0[index].reuse }))
        }
        func same(_ one: HTTPExchange, _ other: HTTPExchange) -> Bool {
            one.status == other.status && one.body == other.body
        }
        bodiesDiffer = !same(first, second)
        if let originFirst, let originSecond {
            personal = !same(originFirst, originSecond)
        } else {
            personal = bodiesDiffer ? true : nil
        }
        var evidence: String?
        if let originSecond, same(second, first), !same(originSecond, second) {
            let origin =
                (200..<300).contains(originSecond.status)
                ? "the origin answers B differently" : "the origin refuses B's token (\(originSecond.status))"
            evidence =
                "user B was answered with user A's response: byte for byte A's, while \(origin)" + Self.hitNote(second)
        } else if let originFirst, let originSecond, same(first, originSecond), !same(originFirst, first) {
            evidence =
                "user A was answered with a response the origin gives user B: a cache held B's answer from "
                + "earlier" + Self.hitNote(first)
        }
        leakEvidence = evidence
        leakingNow = evidence != nil
        let shared = sharedCaches.filter { $0.reuse.isAcrossUsers }
        let reusable = privateCache.isAcrossUsers || !shared.isEmpty
        leakPossible = leakingNow || (reusable && personal != false)
        verdict =
            leakingNow
            ? .leakingNow
            : leakPossible ? .couldLeak : personal == false ? .sameForBoth : personal == nil ? .unobservable : .safe

        var notes: [String] = []
        var fixes: [String] = []
        if leakingNow && shared.isEmpty && !sharedCache.isAcrossUsers {
            fixes.append(
                "the cache in front of this server stores what these headers forbid: it ignores them (nginx "
                    + "proxy_ignore_headers with proxy_cache_valid, a CDN \"cache everything\" rule) or obeys a "
                    + "field it removes before the client sees it (nginx's X-Accel-Expires): keep authorized requests "
                    + "out of it (nginx: proxy_no_cache $http_authorization; proxy_cache_bypass "
                    + "$http_authorization;), key it on the user, or drop X-Accel-Expires from personal responses")
        }
        if leakPossible {
            fixes.append(
                "Cache-Control: private, no-store (personal data: no cache keeps it, on any device or proxy)")
            if shared.contains(where: { $0.cache.hasPrefix("CDN") }) || sharedCache.isAcrossUsers {
                fixes.append(
                    "remove public and s-maxage: they let CDNs and proxies answer every user with one user's data")
            }
            if shared.contains(where: { $0.cache.hasPrefix("nginx") }) {
                fixes.append(
                    "nginx ignores Authorization and caches any response with a lifetime (max-age, s-maxage, "
                        + "Expires, X-Accel-Expires) unless it is private, no-cache or no-store")
            }
            if [first, second].contains(where: {
                $0.header("CDN-Cache-Control") != nil || $0.header("Surrogate-Control") != nil
            }) {
                fixes.append("drop the lifetime in CDN-Cache-Control / Surrogate-Control on personal responses")
            }
            fixes.append(
                "or, to stay cacheable for the same user: Cache-Control: private, max-age=N with Vary: "
                    + "Authorization (it protects only caches that honour Vary; FoundationNetworking's URLCache "
                    + "does not on manual lookup, and one app cache shared by two accounts still mixes them)")
        } else if reusable && personal == false {
            notes.append(
                "a cache could reuse these responses across users, but the origin gave both users the same "
                    + "answer: harmless only if this resource never depends on who asks")
        }
        if originFirst == nil || originSecond == nil {
            notes.append(
                "the origin could not be asked apart from any cache (the control requests were refused or "
                    + "answered from a cache): a leak happening now may go unseen")
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

    private static func hitNote(_ answer: HTTPExchange) -> String {
        let hints = answer.cacheHints
        return hints.isEmpty ? "" : " (" + hints.map { "\($0.name): \($0.value)" }.joined(separator: ", ") + ")"
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
