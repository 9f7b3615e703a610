import Foundation
import SessionKit

/// A redirect chain as `sessionkit audit redirects` walks it, and what it means: the pure half of
/// ``RedirectAudit``, driven by plain calls and tested without a network.
///
/// The chain says which URL to request next and whether that request may carry the token: only on the audited
/// URL's own origin, and never again once the chain has left it (as SessionKit's sessions do: a hop back could
/// be anything the other origin chose). It is told each answer (``answered(status:location:)``) or failure
/// (``failed(_:)``), and ends at an answer that is not a redirect, a failure, a `Location` that is not an http(s)
/// URL, or more than ``maximumRedirects`` redirects.
struct RedirectChain: Sendable, Equatable {
    /// The most redirects followed; one more ends the chain without a verdict.
    static let maximumRedirects = 10
    /// The statuses a client follows (RFC 9110 §15.4); others (300, 304, 305) are final answers.
    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The origin of an http(s) URL (RFC 6454 §4, as SessionKit compares them), or `nil`: a `Location` with
    /// another scheme, or without a host, is not followed.
    static func origin(of url: URL) -> Origin? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return nil }
        return Origin(url)
    }

    /// `origin` as printed: `scheme://host[:port]`, without control characters.
    static func shown(_ origin: Origin) -> String {
        TextLayout.printable(origin.description, limit: 100)
    }

    /// One request of the chain and what came back.
    struct Hop: Sendable, Equatable {
        /// Where the request went.
        var url: URL
        /// Its origin.
        var origin: Origin
        /// Whether it is the audited URL's origin.
        var sameOrigin: Bool
        /// Whether the audit sent the token with it: on the audited origin, before the chain left it.
        var tokenSent: Bool
        /// The status, `nil` when no answer came.
        var status: Int?
        /// Where a redirect pointed, resolved against ``url``; `nil` for a final answer.
        var location: URL?
        /// Why no answer came.
        var failure: String?

        /// Whether its redirect leaves https for plain http.
        var downgrades: Bool {
            origin.isSecure && location.flatMap(RedirectChain.origin(of:)).map { !$0.isSecure } == true
        }
    }

    /// Why the chain ended.
    enum End: Sendable, Equatable {
        /// An answer that is not a redirect.
        case answered
        /// No answer: the network, TLS, a timeout (the message says which).
        case failed(String)
        /// A redirect whose `Location` is missing or not an http(s) URL with a host.
        case badLocation
        /// More than ``RedirectChain/maximumRedirects`` redirects.
        case tooManyRedirects
    }

    /// What the chain shows.
    enum Verdict: String, Sendable, Equatable {
        /// The answer comes from the audited origin, without a hop to another.
        case safe
        /// A redirect points to another origin: a client copying headers hands it the token.
        case crossOrigin = "cross-origin"
        /// A redirect leaves https for http: the token would cross the network in clear text.
        case downgrade
        /// The chain ended before it showed either.
        case inconclusive

        /// The exit status it means.
        var exitCode: ExitCode {
            switch self {
            case .safe: .ok
            case .crossOrigin, .downgrade: .leak
            case .inconclusive: .failure
            }
        }
    }

    /// The audited URL.
    let url: URL
    /// Its origin.
    let home: Origin
    /// The requests made so far, in order.
    private(set) var hops: [Hop] = []
    /// Why the chain ended; `nil` while it goes on.
    private(set) var end: End?
    private var pending: URL?
    private var leftOrigin = false

    /// A chain starting at `url`; `nil` when it is not an http(s) URL with a host.
    init?(url: URL) {
        guard let home = Self.origin(of: url) else { return nil }
        self.url = url
        self.home = home
        pending = url
    }

    /// The request to make next, and whether it carries the token; `nil` once the chain has ended.
    var nextRequest: (url: URL, sendsToken: Bool)? {
        guard end == nil, let pending, let origin = Self.origin(of: pending) else { return nil }
        return (pending, origin == home && !leftOrigin)
    }

    /// The answer to ``nextRequest``: a redirect goes on to its `Location`, anything else ends the chain.
    ///
    /// - Parameters:
    ///   - status: The status.
    ///   - location: The `Location` field, if any.
    mutating func answered(status: Int, location: String?) {
        guard var hop = takePending() else { return }
        hop.status = status
        guard Self.redirectStatuses.contains(status), let location else {
            hops.append(hop)
            end = .answered
            return
        }
        guard let target = Self.resolve(location, against: hop.url) else {
            hops.append(hop)
            end = .badLocation
            return
        }
        hop.location = target
        hops.append(hop)
        if hops.count > Self.maximumRedirects {
            end = .tooManyRedirects
        } else {
            pending = target
        }
    }

    /// No answer to ``nextRequest``; the chain ends.
    ///
    /// - Parameter message: Why, naming the host and port, never a token.
    mutating func failed(_ message: String) {
        guard var hop = takePending() else { return }
        hop.failure = message
        hops.append(hop)
        end = .failed(message)
    }

    private mutating func takePending() -> Hop? {
        guard end == nil, let url = pending, let origin = Self.origin(of: url) else { return nil }
        pending = nil
        let sameOrigin = origin == home
        defer { leftOrigin = leftOrigin || !sameOrigin }
        return Hop(url: url, origin: origin, sameOrigin: sameOrigin, tokenSent: sameOrigin && !leftOrigin)
    }

    /// `location` resolved against `base` (RFC 9110 §10.2.2), when that is an http(s) URL with a host.
    static func resolve(_ location: String, against base: URL) -> URL? {
        let text = location.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, let url = URL(string: text, relativeTo: base)?.absoluteURL, origin(of: url) != nil else {
            return nil
        }
        return url
    }

    // MARK: - What it shows

    /// The redirects seen (followed, or the one past the limit).
    var redirects: Int { hops.filter { $0.location != nil }.count }

    /// The origins other than ``home`` that a redirect pointed to, each once, in order.
    var foreignOrigins: [Origin] {
        var seen: [Origin] = []
        for origin in hops.compactMap({ $0.location.flatMap(RedirectChain.origin(of:)) }) where origin != home {
            if !seen.contains(origin) { seen.append(origin) }
        }
        return seen
    }

    /// The verdict: a downgrade or a hop to another origin wins over how the chain ended.
    var verdict: Verdict {
        if hops.contains(where: \.downgrades) { return .downgrade }
        if !foreignOrigins.isEmpty { return .crossOrigin }
        guard end == .answered, let status = hops.last?.status else { return .inconclusive }
        // A refused token shows where an anonymous request goes, not where the user's does.
        return [401, 403].contains(status) ? .inconclusive : .safe
    }

    /// The verdict in a sentence, without a token or a query.
    var reason: String {
        switch verdict {
        case .downgrade:
            let index = hops.firstIndex(where: \.downgrades) ?? 0
            let hop = hops[index]
            let target = hop.location.flatMap(Self.origin(of:)).map(Self.shown) ?? "http"
            return "hop \(index + 1) (\(Self.shown(hop.origin)), \(hop.status ?? 0)) redirects from https to plain "
                + "http, \(target): a client that follows it sends the token in clear text, readable by anyone on the "
                + "way"
        case .crossOrigin:
            let foreign = foreignOrigins
            let index = hops.firstIndex { $0.location.flatMap(Self.origin(of:)).map { $0 != home } == true } ?? 0
            let also =
                foreign.count > 1 ? " (then \(foreign.dropFirst().map(Self.shown).joined(separator: ", ")))" : ""
            return "the bearer request to \(Self.shown(home)) is redirected to another origin, "
                + "\(Self.shown(foreign[0]))\(also), by hop \(index + 1) (\(hops[index].status ?? 0)): a client that "
                + "copies the request's headers to every hop hands the token to it"
        case .safe:
            let status = hops.last?.status ?? 0
            let via =
                redirects == 0
                ? "without a redirect" : "after \(redirects) redirect\(redirects == 1 ? "" : "s") within it"
            return "the answer (\(status)) comes from \(Self.shown(home)) itself, \(via)"
        case .inconclusive:
            return problem ?? "the chain ended without an answer"
        }
    }

    /// Why the chain shows nothing, or `nil` when it ended with an answer that counts.
    var problem: String? {
        let hop = hops.count
        switch end {
        case .failed(let message):
            return hop == 1 ? message : "hop \(hop) got no answer: \(message)"
        case .badLocation:
            return "hop \(hop) answered \(hops.last?.status ?? 0) with a Location that is not an http(s) URL, so "
                + "where it leads cannot be told"
        case .tooManyRedirects:
            let urls = hops.map(\.url)
            let loop = urls.indices.first { urls[..<$0].contains(urls[$0]) }
            let detail =
                loop.map { index in
                    let first = (urls.firstIndex(of: urls[index]) ?? 0) + 1
                    return " (a loop: hop \(index + 1) asks for hop \(first)'s URL again)"
                } ?? ""
            return "more than \(Self.maximumRedirects) redirects\(detail): no final answer"
        case .answered:
            guard let last = hops.last, last.sameOrigin, let status = last.status, [401, 403].contains(status) else {
                return nil
            }
            return "the token was refused (\(status)) by \(Self.shown(last.origin)), so where "
                + "the user's requests are redirected cannot be seen: the audit needs a live token (check --token "
                + "or --token-env)"
        case nil:
            return nil
        }
    }

    /// What to change, for a leak.
    var fixes: [String] {
        var fixes: [String] = []
        if verdict == .downgrade {
            fixes.append(
                "Redirect to https only, and send Strict-Transport-Security so that clients never ask over http.")
        }
        if verdict == .downgrade || verdict == .crossOrigin {
            fixes.append(
                "Keep the answers to bearer requests on the API's own origin: return the data, or the other URL in "
                    + "the body (a presigned URL needs no token), instead of redirecting there.")
            fixes.append(
                "In clients, drop Authorization (and Cookie) on a redirect to another origin, or refuse it: "
                    + "SessionKit's UserSession does; with a bare URLSession, in urlSession(_:task:"
                    + "willPerformHTTPRedirection:newRequest:completionHandler:).")
        }
        return fixes
    }

    /// What else to know: how a chain with a leak ended, when it ended without an answer.
    var notes: [String] {
        guard verdict == .crossOrigin || verdict == .downgrade, end != .answered, let problem else { return [] }
        return ["then " + problem + "."]
    }
}
