import Foundation
import SessionKit
import SessionKitTesting

/// The HTTP side: routes on SessionKitTesting's ``LocalServer``, which keeps the example inside this package. A
/// deployment puts ``BrowserSessions`` behind Hummingbird or Vapor; only ``BrowserSessions`` carries over, and
/// these routes become that framework's handlers.
struct Routes: Sendable {
    let sessions: BrowserSessions
    /// This instance's name, sent as `X-Instance` on every answer so a test sees which instance served it.
    let instance: String
    /// Whether the browser reaches the server over `https`: the cookie is then `__Host-` and `Secure`.
    let secure: Bool

    /// The cookie's name: `__Host-` makes a browser refuse it unless it is `Secure`, host-only and `Path=/`, which
    /// plain HTTP (a loopback test) cannot give.
    var cookieName: String { secure ? "__Host-session" : "session" }

    func install(on server: LocalServer) {
        server.route("GET", "/health") { _ in
            answer(.json(#"{"instance":"\#(instance)","sessions":\#(sessions.manager.sessions.count)}"#))
        }
        server.route("GET", "/login") { _ in
            do {
                return answer(redirect: try await sessions.beginSignIn().absoluteString)
            } catch {
                return answer(.json(#"{"error":"provider_unavailable"}"#, status: 502))
            }
        }
        server.route("GET", "/callback") { request in
            // The query is the browser's (anyone's): one that makes no URL is refused, never unwrapped.
            guard let callback = URL(string: "\(sessions.redirectURI)?\(request.query ?? "")") else {
                return answer(.json(#"{"error":"invalid_callback"}"#, status: 400))
            }
            do {
                let cookie = try await sessions.finishSignIn(callback: callback)
                return answer(redirect: "/", setting: cookie)
            } catch BrowserSessions.CallbackError.signInFailed {
                return answer(.json(#"{"error":"sign_in_failed"}"#, status: 502))
            } catch {
                return answer(.json(#"{"error":"invalid_callback"}"#, status: 400))
            }
        }
        server.route("GET", "/api/me") { request in
            guard let cookie = cookie(of: request), let (status, body) = await sessions.callAPI(cookie: cookie) else {
                return answer(.json(#"{"error":"not_signed_in"}"#, status: 401))
            }
            return answer(.init(status: status, headers: [("Content-Type", "application/json")], body: body))
        }
        server.route("POST", "/logout") { request in
            if let cookie = cookie(of: request) { await sessions.signOut(cookie: cookie) }
            return answer(.status(204), setting: "", maxAge: 0)
        }
        server.route("GET", "/") { _ in answer(.text("signed in: call /api/me\n")) }
    }

    /// The value of this server's cookie in `request`, if it sent one.
    private func cookie(of request: LocalServer.Request) -> String? {
        for header in request.headers(named: "Cookie") {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == cookieName, !parts[1].isEmpty { return String(parts[1]) }
            }
        }
        return nil
    }

    private func answer(redirect location: String, setting cookie: String? = nil) -> LocalServer.Response {
        answer(.init(status: 302, headers: [("Location", location)]), setting: cookie)
    }

    /// `response` with the instance's name, no caching, and the cookie set (or cleared with `maxAge` 0).
    private func answer(
        _ response: LocalServer.Response, setting cookie: String? = nil, maxAge: Int? = nil
    ) -> LocalServer.Response {
        var response = response
        response.headers += [("X-Instance", instance), ("Cache-Control", "no-store")]
        if let cookie {
            // HttpOnly: no script reads it. SameSite=Lax: no other site's form can POST /logout (or anything else)
            // with it, while the provider's redirect back to /callback still works.
            var attributes = ["\(cookieName)=\(cookie)", "Path=/", "HttpOnly", "SameSite=Lax"]
            if secure { attributes.append("Secure") }
            if let maxAge { attributes.append("Max-Age=\(maxAge)") }
            response.headers.append(("Set-Cookie", attributes.joined(separator: "; ")))
        }
        return response
    }
}
