import Foundation
import SessionKit
import SessionKitOAuth
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What a batch of schedules shares: one authorization server (which is also the resource server) in its DPoP mode,
/// two OAuth clients (one for bearer tokens, one that signs in with DPoP), and the log of what reached the resource
/// routes, kept per schedule.
///
/// The mock binds the tokens of a sign-in that sent a DPoP proof to its key and checks every proof (RFC 9449); a
/// schedule's sessions use bearer tokens or DPoP-bound tokens, as the schedule's seed says. With `dpopNonces` every
/// proof must carry the server's nonce.
///
/// Resource routes: `/fast` answers at once; `/slow` waits at the gate the schedule registered for the call, so
/// the scheduler decides when it answers. Both check the token (and proof) with the mock (revoked and invalidated
/// tokens get 401 and a challenge) and log every arrival before anything else, with the arrival instant
/// LocalServer stamped when the whole request had been read.
final class InterleavingWorld: Sendable {
    /// One request that reached a resource route.
    struct Arrival: Sendable {
        /// The schedule's call that sent it (`X-Call`).
        let call: Int
        /// The access token it carried, as a bearer token or a DPoP-bound one.
        let token: String?
        /// Its `Authorization` scheme: `Bearer` or `DPoP`.
        let scheme: String?
        /// When the whole request had arrived.
        let arrivedAt: ContinuousClock.Instant
        /// When its handler answered (or gave up because the client left); `nil` while it has not.
        var answeredAt: ContinuousClock.Instant?
    }

    let mock: MockAuthorizationServer
    /// Refreshes (with a proof when the session's tokens are bound) and revocations, for every schedule.
    let client: OAuthClient
    /// Signs in with a fresh DPoP key per sign-in, for the schedules whose sessions use DPoP.
    let dpopClient: OAuthClient
    /// Whether the mock asks every proof for its nonce.
    let dpopNonces: Bool
    private let arrivals = Locked<[Int: [Arrival]]>([:])
    private let gates = Locked<[String: Gate]>([:])
    /// Every diagnostic event of every schedule run in this world, as JSON lines: the redaction check reads them.
    let events = Locked<[String]>([])
    /// Every token the schedules saw issued to their sessions, sent or not (a rotated refresh token the store
    /// refused may never be sent): the redaction check looks for these too.
    private let tokensIssued = Locked<Set<String>>([])
    /// The sink each schedule's manager and sessions send their events to, at every level.
    let diagnostics: Diagnostics

    private init(mock: MockAuthorizationServer, dpopNonces: Bool) {
        let events = events
        self.diagnostics = Diagnostics(level: .debug) { event in
            events.withLock { $0.append(event.jsonLine + "\n" + event.description) }
        }
        self.mock = mock
        self.client = mock.makeClient(usesDPoP: false)
        self.dpopClient = mock.makeClient(usesDPoP: true)
        self.dpopNonces = dpopNonces
    }

    static func start(dpopNonces: Bool) async throws -> InterleavingWorld {
        let mock = try await MockAuthorizationServer.start(
            configuration: .init(dpop: true, requiresDPoPNonce: dpopNonces))
        let world = InterleavingWorld(mock: mock, dpopNonces: dpopNonces)
        for (path, slow) in [("/fast", false), ("/slow", true)] {
            world.mock.server.route(path) { [weak world] request in
                await world?.serve(request, slow: slow) ?? .status(503)
            }
        }
        // Same-origin redirects without end, each carrying the session's credentials, until it stops following:
        // the refused redirect's path, whose event must name origins only.
        world.mock.server.route("/loop") { request in
            let hop = (request.query?.split(separator: "=").last.flatMap { Int($0) } ?? 0) + 1
            return .text("", status: 302, headers: [("Location", "/loop?hop=\(hop)"), ("Cache-Control", "no-store")])
        }
        return world
    }

    func stop() async {
        await mock.stop()
    }

    /// The maximal runs of token characters (letters, digits, `-._~+/`) in `line`: an event that carried a token,
    /// a proof or a code carries it as one such run (between quotes in JSON, after `=` in text), so a set lookup per
    /// run finds it in time linear in the events, where a substring search per secret took minutes per batch.
    static func words(of line: String) -> [Substring] {
        let tokenCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~+/")
        return line.split(whereSeparator: { !tokenCharacters.contains($0) })
    }

    /// Every secret that went over the wire to the mock: the credential of each `Authorization` field, `DPoP`
    /// proofs, cookies, and the form fields that carry tokens, codes and verifiers. At least 8 characters each, so
    /// that a short common word is never taken for one.
    func secretsSent() -> Set<Substring> {
        var secrets: Set<String> = []
        let formFields: Set<String> = [
            "refresh_token", "code", "code_verifier", "token", "device_code", "client_assertion", "password",
            "client_secret", "id_token_hint",
        ]
        for request in mock.requests {
            for (name, value) in request.headers {
                switch name.lowercased() {
                case "authorization":
                    secrets.insert(String(value.split(separator: " ", maxSplits: 1).last ?? ""))
                case "dpop", "cookie":
                    secrets.insert(value)
                default:
                    break
                }
            }
            for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, formFields.contains(String(parts[0])) else { continue }
                secrets.insert(String(parts[1]).removingPercentEncoding ?? String(parts[1]))
            }
        }
        return Set(secrets.filter { $0.count >= 8 }.map { Substring($0) })
    }

    /// Adds a schedule's issued tokens to those the redaction check looks for.
    func noteTokensIssued(_ tokens: Set<String>) {
        tokensIssued.withLock { $0.formUnion(tokens) }
    }

    /// Every token the schedules' sessions held, at least 8 characters each.
    func secretsHeld() -> Set<Substring> {
        tokensIssued.withLock { Set($0.filter { $0.count >= 8 }.map { Substring($0) }) }
    }

    /// A request for `call` of `schedule`; a slow one is held at a gate the caller opens, and one into the redirect
    /// loop is redirected until the session refuses to follow.
    func request(schedule: Int, call: Int, method: String, slow: Bool, redirectLoop: Bool = false) -> (
        URLRequest, Gate?
    ) {
        var request = URLRequest(url: mock.url(redirectLoop ? "/loop" : slow ? "/slow" : "/fast"))
        request.httpMethod = method
        if method == "POST" { request.httpBody = Data(#"{"n":\#(call)}"#.utf8) }
        let tag = "\(schedule).\(call)"
        request.setValue(tag, forHTTPHeaderField: "X-Call")
        guard slow, !redirectLoop else { return (request, nil) }
        let gate = Gate()
        gates.withLock { $0[tag] = gate }
        return (request, gate)
    }

    /// What reached the resource routes for `schedule`, in arrival order.
    func arrivals(of schedule: Int) -> [Arrival] {
        arrivals.withLock { $0[schedule] ?? [] }
    }

    /// What the process's libcurl loop holds, when requests run on it: for a schedule that waited too long.
    func transportReport() async -> String? {
        #if os(Linux)
            guard TransportChoice.process == .libcurl else { return nil }
            return await CurlClient.loopReport()
        #else
            return nil
        #endif
    }

    /// Drops what is kept for `schedule`.
    func forget(_ schedule: Int) {
        arrivals.withLock { _ = $0.removeValue(forKey: schedule) }
        gates.withLock { gates in gates = gates.filter { !$0.key.hasPrefix("\(schedule).") } }
    }

    private func serve(_ request: LocalServer.Request, slow: Bool) async -> LocalServer.Response {
        guard let tag = request.header("X-Call"), let dot = tag.firstIndex(of: "."),
            let schedule = Int(tag[..<dot]), let call = Int(tag[tag.index(after: dot)...])
        else { return .status(400) }
        let index = arrivals.withLock { all -> Int in
            let scheme = request.bearerToken != nil ? "Bearer" : request.dpopToken != nil ? "DPoP" : nil
            all[schedule, default: []].append(
                Arrival(
                    call: call, token: request.bearerToken ?? request.dpopToken, scheme: scheme,
                    arrivedAt: request.arrivedAt))
            return all[schedule, default: []].count - 1
        }
        defer {
            arrivals.withLock { all in
                if let count = all[schedule]?.count, index < count {
                    all[schedule]?[index].answeredAt = ContinuousClock.now
                }
            }
        }
        let user: String
        switch mock.checkAccess(request) {
        case .granted(let granted):
            user = granted
        case .refused(var refusal):
            refusal.headers.append(("Cache-Control", "no-store"))
            return refusal
        }
        if slow, let gate = gates.withLock({ $0[tag] }) { await gate.wait() }
        return .json(#"{"user":"\#(user)"}"#, headers: [("Cache-Control", "no-store")])
    }
}
