#if os(Linux)
    import Foundation

    /// The proxies a libcurl client sends through, read from the environment as curl and most HTTP clients read it.
    ///
    /// The rules, and why:
    /// - An `http` URL goes through `http_proxy`, in lower case only: a CGI server puts a request's `Proxy` field in
    ///   `HTTP_PROXY`, so an upper-case name could be the attacker's ("httpoxy").
    /// - An `https` URL goes through `https_proxy` or `HTTPS_PROXY`, tunnelled with `CONNECT`: the proxy sees the
    ///   host and port, never the request, its token or its answer, and the server is verified through the tunnel.
    /// - `all_proxy` or `ALL_PROXY` serves either scheme that has no proxy of its own.
    /// - `no_proxy` or `NO_PROXY` lists the hosts reached directly (names, domains, addresses; `*` for all), with
    ///   libcurl's matching.
    /// - An empty value is no value. Read once per process, when the first client is made: every request takes one
    ///   route.
    package struct CurlProxies: Sendable, Equatable {
        /// The proxy for `http` URLs.
        package var http: String?
        /// The proxy for `https` URLs.
        package var https: String?
        /// The hosts reached directly, as libcurl's `CURLOPT_NOPROXY` reads them.
        package var noProxy: String?

        package init(http: String? = nil, https: String? = nil, noProxy: String? = nil) {
            self.http = http
            self.https = https
            self.noProxy = noProxy
        }

        /// No proxy for any request.
        package static let none = CurlProxies()

        /// The proxies the process's environment names, read once: reading the environment costs more than making
        /// a session, and every client takes the same route.
        package static let fromEnvironment = CurlProxies(environment: ProcessInfo.processInfo.environment)

        /// The proxies `environment` names, by the rules above.
        package init(environment: [String: String]) {
            func value(_ names: String...) -> String? {
                names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
            }
            let all = value("all_proxy", "ALL_PROXY")
            http = value("http_proxy") ?? all
            https = value("https_proxy", "HTTPS_PROXY") ?? all
            noProxy = value("no_proxy", "NO_PROXY")
        }
    }
#endif
