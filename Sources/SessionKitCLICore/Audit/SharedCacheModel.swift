import Foundation
import SessionKit

/// What real shared caches do, in their default configuration, with a response to a request that carried
/// `Authorization`: not what RFC 9111 allows, but what nginx, Varnish and CDNs are documented to do.
///
/// - nginx `proxy_cache` ignores the request's `Authorization` entirely and keys on the URL. It stores a response
///   whose `X-Accel-Expires` is above 0, or failing that whose `Cache-Control` `s-maxage`/`max-age` or `Expires`
///   gives it a lifetime, unless `Cache-Control` says `private`, `no-cache` or `no-store`, the response sets a
///   cookie, or `Vary` is `*`; it keeps one variant per value of the fields `Vary` names. It has no heuristic
///   freshness: without a lifetime (and without `proxy_cache_valid`) nothing is stored.
/// - Varnish's built-in VCL passes every request carrying `Authorization` or `Cookie` to the server: nothing such a
///   request gets is cached, whatever the response says.
/// - CDNs that follow RFC 9111 §3.5 (Cloudflare, Fastly, CloudFront when `Authorization` is forwarded) store a
///   response to an authorized request only when it says `public`, `s-maxage` or `must-revalidate`; a targeted
///   field (`CDN-Cache-Control`, RFC 9213, or `Surrogate-Control`) replaces `Cache-Control` for them.
enum SharedCacheModel {
    /// One kind of shared cache and what it would do.
    struct Verdict: Sendable, Equatable {
        /// The cache, as printed.
        let cache: String
        /// What it may do with one user's response when the other asks.
        let reuse: CacheAssessment.Reuse
    }

    /// What each modelled shared cache would do with `answer`.
    ///
    /// - Parameter answer: One user's answer.
    /// - Returns: nginx, Varnish, then an RFC 9111 CDN.
    static func verdicts(for answer: HTTPExchange) -> [Verdict] {
        [
            Verdict(cache: "nginx proxy_cache (defaults)", reuse: nginx(answer)),
            Verdict(cache: "Varnish (built-in VCL)", reuse: varnish(answer)),
            Verdict(cache: "CDN following RFC 9111 §3.5 (Cloudflare, Fastly, CloudFront)", reuse: cdn(answer)),
        ]
    }

    /// nginx `proxy_cache` with its defaults (`ngx_http_upstream_process_headers`).
    static func nginx(_ answer: HTTPExchange) -> CacheAssessment.Reuse {
        let cacheControl = CacheControl(fieldValues: answer.header("Cache-Control").map { [$0] } ?? [])
        let vary = Vary(fieldValues: answer.header("Vary").map { [$0] } ?? [])
        if answer.header("Set-Cookie") != nil { return .never("the response sets a cookie: nginx does not store it") }
        if vary.isWildcard { return .never("Vary: * : nginx does not store it") }
        let keyed = vary.fieldNames.contains("authorization")
        if let accel = answer.header("X-Accel-Expires")?.trimmingCharacters(in: .whitespaces) {
            // X-Accel-Expires takes precedence over Cache-Control and Expires.
            if accel == "0" { return .never("X-Accel-Expires: 0 : nginx does not store it") }
            if keyed { return .never("Vary: Authorization : nginx keeps one copy per token") }
            return .acrossUsers(
                "X-Accel-Expires gives it a lifetime; nginx ignores Authorization and keys on the URL")
        }
        if cacheControl.noStore || cacheControl.noCache || cacheControl.isPrivate {
            let which = cacheControl.noStore ? "no-store" : cacheControl.noCache ? "no-cache" : "private"
            return .never("Cache-Control: \(which) : nginx does not store it")
        }
        let lifetime: Int?
        let source: String
        if let shared = cacheControl.sharedMaxAge ?? cacheControl.maxAge {
            lifetime = shared
            source = cacheControl.sharedMaxAge != nil ? "s-maxage" : "max-age"
        } else if let expires = answer.header("Expires") {
            let date = answer.header("Date").flatMap { HTTPDate.parse($0) } ?? Date()
            lifetime = HTTPDate.parse(expires).map { Int($0.timeIntervalSince(date).rounded(.down)) } ?? 0
            source = "Expires"
        } else {
            return .never("no explicit lifetime: nginx stores nothing without one (or a proxy_cache_valid)")
        }
        guard let lifetime, lifetime > 0 else { return .never("\(source) gives no lifetime: nginx does not store it") }
        if keyed { return .never("Vary: Authorization : nginx keeps one copy per token") }
        return .acrossUsers(
            "\(source) gives it a lifetime; nginx ignores Authorization and keys on the URL, so the next user "
                + "gets this answer")
    }

    /// Varnish with its built-in VCL: a request with `Authorization` is passed, never cached.
    static func varnish(_ answer: HTTPExchange) -> CacheAssessment.Reuse {
        .never("the request carries Authorization: the built-in VCL passes it to the server")
    }

    /// A CDN that applies RFC 9111 §3.5, reading a targeted field first.
    static func cdn(_ answer: HTTPExchange) -> CacheAssessment.Reuse {
        for field in ["CDN-Cache-Control", "Surrogate-Control"] {
            guard let value = answer.header(field) else { continue }
            var targeted = answer
            targeted.headers = answer.headers.filter { $0.key.caseInsensitiveCompare("Cache-Control") != .orderedSame }
            targeted.headers["Cache-Control"] = value
            let reuse = CacheAssessment.sharedReuse(of: targeted)
            let prefix = "\(field) replaces Cache-Control for the CDN: "
            return switch reuse {
            case .acrossUsers(let reason): .acrossUsers(prefix + reason)
            case .afterValidation(let reason): .afterValidation(prefix + reason)
            case .never(let reason): .never(prefix + reason)
            }
        }
        return CacheAssessment.sharedReuse(of: answer)
    }
}
