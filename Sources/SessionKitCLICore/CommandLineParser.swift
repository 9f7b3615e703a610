import Foundation

/// Turns `sessionkit`'s arguments into a ``Command``, by hand (swift-argument-parser cannot be fetched here).
///
/// Options are `--name value` or `--name=value`; `-h` and `--help` anywhere ask for the help of the command
/// they follow. Errors never repeat a value the user typed: a misplaced token would otherwise be printed.
enum CommandLineParser {
    /// The longest `--timeout` accepted, in seconds.
    static let maximumTimeoutSeconds = 600.0
    /// The default `--timeout`.
    static let defaultTimeout = Duration.seconds(10)

    /// One option a command accepts.
    struct Option: Sendable {
        /// `--name`.
        let name: String
        /// Whether it takes a value.
        let takesValue: Bool
        /// Whether it may be given more than once.
        let repeatable: Bool

        static func flag(_ name: String) -> Option { Option(name: name, takesValue: false, repeatable: false) }
        static func value(_ name: String, repeatable: Bool = false) -> Option {
            Option(name: name, takesValue: true, repeatable: repeatable)
        }
    }

    static let demoOptions: [Option] = [.flag("--json"), .value("--only"), .value("--seed")]
    static let cacheOptions: [Option] = [
        .value("--url"), .value("--token", repeatable: true), .value("--token-env", repeatable: true),
        .value("--timeout"), .flag("--json"),
    ]
    static let logoutOptions: [Option] = [
        .value("--resource"), .value("--revocation-endpoint"), .value("--client-id"), .value("--access-token"),
        .value("--access-token-env"), .value("--refresh-token"), .value("--refresh-token-env"),
        .value("--token-endpoint"), .value("--timeout"), .flag("--json"),
    ]
    static let redirectOptions: [Option] = [
        .value("--url"), .value("--token"), .value("--token-env"), .value("--timeout"), .flag("--json"),
    ]

    /// Parses the arguments that follow the program name.
    ///
    /// - Parameter arguments: `CommandLine.arguments` without its first element.
    /// - Returns: The command.
    /// - Throws: ``UsageError`` naming what is wrong and which help to show.
    static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        guard let first = arguments.first else { throw UsageError("missing command") }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "-h", "--help":
            return .help(.tool)
        case "--version", "version":
            return .version
        case "help":
            return .help(try helpTopic(rest))
        case "demo":
            if wantsHelp(rest) { return .help(.demo) }
            return .demo(try demo(rest))
        case "timeline":
            if wantsHelp(rest) { return .help(.timeline) }
            switch rest.count {
            case 0: return .timeline(TimelineOptions(file: nil))
            case 1 where !rest[0].hasPrefix("-") || rest[0] == "-":
                return .timeline(TimelineOptions(file: rest[0] == "-" ? nil : rest[0]))
            default:
                throw UsageError("timeline takes one file of JSON lines, or none for standard input", topic: .timeline)
            }
        case "audit":
            guard let kind = rest.first else {
                throw UsageError("audit needs a kind: cache, logout or redirects", topic: .audit)
            }
            let options = Array(rest.dropFirst())
            switch kind {
            case "-h", "--help":
                return .help(.audit)
            case "cache":
                if wantsHelp(options) { return .help(.auditCache) }
                return .auditCache(try cache(options))
            case "logout":
                if wantsHelp(options) { return .help(.auditLogout) }
                return .auditLogout(try logout(options))
            case "redirects":
                if wantsHelp(options) { return .help(.auditRedirects) }
                return .auditRedirects(try redirects(options))
            default:
                throw UsageError(
                    "unknown audit \(shown(kind, as: "kind")); use cache, logout or redirects", topic: .audit)
            }
        default:
            if first.hasPrefix("-") { throw UsageError("unknown option \(shown(first, as: "option"))") }
            throw UsageError("unknown command \(shown(first, as: "command"))")
        }
    }

    private static func helpTopic(_ words: [String]) throws(UsageError) -> HelpTopic {
        switch words {
        case []: return .tool
        case ["demo"]: return .demo
        case ["audit"]: return .audit
        case ["audit", "cache"]: return .auditCache
        case ["audit", "logout"]: return .auditLogout
        case ["audit", "redirects"]: return .auditRedirects
        case ["timeline"]: return .timeline
        default: throw UsageError("no help for that; try `sessionkit help audit cache`")
        }
    }

    private static func wantsHelp(_ arguments: [String]) -> Bool {
        arguments.contains("-h") || arguments.contains("--help")
    }

    // MARK: - Commands

    private static func demo(_ arguments: [String]) throws(UsageError) -> DemoOptions {
        let parsed = try scan(arguments, options: demoOptions, topic: .demo)
        var options = DemoOptions()
        options.json = parsed.has("--json")
        if let only = parsed.value("--only") {
            guard !only.isEmpty else { throw UsageError("--only needs a scenario id prefix", topic: .demo) }
            options.only = only
        }
        if let seed = parsed.value("--seed") {
            guard let value = UInt64(seed) else {
                throw UsageError("--seed needs a whole number from 0 to \(UInt64.max)", topic: .demo)
            }
            options.seed = value
        }
        return options
    }

    private static func cache(_ arguments: [String]) throws(UsageError) -> CacheAuditOptions {
        let parsed = try scan(arguments, options: cacheOptions, topic: .auditCache)
        guard let url = parsed.value("--url") else { throw UsageError("--url is required", topic: .auditCache) }
        let tokens = parsed.values.compactMap { name, value -> TokenSource? in
            switch name {
            case "--token": value == "-" ? .standardInput : .literal(value)
            case "--token-env": .environment(value)
            default: nil
            }
        }
        guard tokens.count <= 2 else {
            throw UsageError("give two tokens (--token or --token-env), not \(tokens.count)", topic: .auditCache)
        }
        if tokens.contains(.environment("")) {
            throw UsageError("--token-env needs a variable name", topic: .auditCache)
        }
        return CacheAuditOptions(
            url: try httpURL(url, flag: "--url", topic: .auditCache),
            tokens: tokens,
            timeout: try timeout(parsed, topic: .auditCache),
            json: parsed.has("--json")
        )
    }

    private static func logout(_ arguments: [String]) throws(UsageError) -> LogoutAuditOptions {
        let topic = HelpTopic.auditLogout
        let parsed = try scan(arguments, options: logoutOptions, topic: topic)
        func required(_ flag: String) throws(UsageError) -> String {
            guard let value = parsed.value(flag), !value.isEmpty else {
                throw UsageError("\(flag) is required", topic: topic)
            }
            return value
        }
        return LogoutAuditOptions(
            resource: try httpURL(try required("--resource"), flag: "--resource", topic: topic),
            revocationEndpoint: try httpURL(
                try required("--revocation-endpoint"), flag: "--revocation-endpoint", topic: topic),
            clientID: try required("--client-id"),
            accessToken: try token(parsed, "--access-token", topic: topic),
            refreshToken: try token(parsed, "--refresh-token", topic: topic),
            tokenEndpoint: try parsed.value("--token-endpoint").map { (value) throws(UsageError) in
                try httpURL(value, flag: "--token-endpoint", topic: topic)
            },
            timeout: try timeout(parsed, topic: topic),
            json: parsed.has("--json")
        )
    }

    private static func redirects(_ arguments: [String]) throws(UsageError) -> RedirectAuditOptions {
        let topic = HelpTopic.auditRedirects
        let parsed = try scan(arguments, options: redirectOptions, topic: topic)
        guard let url = parsed.value("--url"), !url.isEmpty else { throw UsageError("--url is required", topic: topic) }
        return RedirectAuditOptions(
            url: try httpURL(url, flag: "--url", topic: topic),
            token: try token(parsed, "--token", topic: topic),
            timeout: try timeout(parsed, topic: topic),
            json: parsed.has("--json")
        )
    }

    // MARK: - Values

    /// The source of the token `flag` (`--token`) and `flag-env` (`--token-env`) name: `-` is standard input;
    /// `nil` when neither is given.
    private static func token(_ parsed: Scanned, _ flag: String, topic: HelpTopic) throws(UsageError) -> TokenSource? {
        let literal = parsed.value(flag)
        let variable = parsed.value(flag + "-env")
        switch (literal, variable) {
        case (nil, nil): return nil
        case (let literal?, nil): return literal == "-" ? .standardInput : .literal(literal)
        case (nil, let variable?):
            guard !variable.isEmpty else { throw UsageError("\(flag)-env needs a variable name", topic: topic) }
            return .environment(variable)
        case (.some, .some): throw UsageError("give \(flag) or \(flag)-env, not both", topic: topic)
        }
    }

    private static func timeout(_ parsed: Scanned, topic: HelpTopic) throws(UsageError) -> Duration {
        guard let text = parsed.value("--timeout") else { return defaultTimeout }
        guard let seconds = Double(text), seconds.isFinite, seconds > 0, seconds <= maximumTimeoutSeconds else {
            throw UsageError(
                "--timeout needs a number of seconds above 0 and at most \(Int(maximumTimeoutSeconds))", topic: topic)
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }

    /// An absolute `https` URL, or `http` to this machine: a bearer token sent over plain HTTP to another host is
    /// readable by anyone on the path.
    static func httpURL(_ text: String, flag: String, topic: HelpTopic) throws(UsageError) -> URL {
        guard var components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else {
            if text.range(of: #"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*:-"#, options: .regularExpression) != nil {
                throw UsageError("\(flag) has a port out of range: a port is 1 to 65535", topic: topic)
            }
            throw UsageError("\(flag) needs an absolute http(s) URL with a host", topic: topic)
        }
        if let port = components.port, !(1...65535).contains(port) {
            throw UsageError("\(flag) has a port out of range: a port is 1 to 65535", topic: topic)
        }
        // Schemes are case-insensitive (RFC 3986 §3.1); URLSession only knows the lower-case ones.
        components.scheme = scheme
        guard let url = components.url else {
            throw UsageError("\(flag) needs an absolute http(s) URL with a host", topic: topic)
        }
        switch scheme {
        case "https":
            return url
        case "http" where isLoopback(host):
            return url
        case "http":
            throw UsageError(
                "\(flag) must use https: a token sent over plain http to another machine can be read on the way "
                    + "(http is accepted for localhost and 127.x.x.x only)", topic: topic)
        default:
            throw UsageError("\(flag) needs an http(s) URL", topic: topic)
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// `value` itself when it looks like a command or option name (lower-case letters and hyphens, short), else a
    /// placeholder: an unknown "option" may be a token pasted in the wrong place, and is never printed.
    static func shown(_ value: String, as kind: String) -> String {
        let name =
            value.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let word = name.drop { $0 == "-" }
        let plausible =
            name.count <= 32 && !word.isEmpty && word.first != "-"
            && word.utf8.allSatisfy { ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "-") }
        return plausible ? "'\(name)'" : "(not shown: it may be a secret)"
    }

    // MARK: - Scanning

    /// The options found, in order.
    struct Scanned {
        var values: [(name: String, value: String)] = []

        func has(_ name: String) -> Bool { values.contains { $0.name == name } }
        func value(_ name: String) -> String? { values.first { $0.name == name }?.value }
    }

    /// Splits `arguments` into known options and their values.
    static func scan(_ arguments: [String], options: [Option], topic: HelpTopic) throws(UsageError) -> Scanned {
        var scanned = Scanned()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw UsageError(
                    "unexpected argument in position \(index) (not shown: it may be a secret); every value "
                        + "follows its option, as in --url URL", topic: topic)
            }
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard let option = options.first(where: { $0.name == name }) else {
                throw UsageError("unknown option \(shown(name, as: "option"))", topic: topic)
            }
            if !option.repeatable && scanned.has(name) {
                throw UsageError("\(name) is given more than once", topic: topic)
            }
            guard option.takesValue else {
                guard parts.count == 1 else { throw UsageError("\(name) takes no value", topic: topic) }
                scanned.values.append((name, ""))
                continue
            }
            if parts.count == 2 {
                scanned.values.append((name, String(parts[1])))
                continue
            }
            // A following option is never taken for a value: `--token --url x` is a missing token.
            guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                throw UsageError("\(name) needs a value", topic: topic)
            }
            scanned.values.append((name, arguments[index]))
            index += 1
        }
        return scanned
    }
}
