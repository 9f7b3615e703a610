import Foundation

/// A web origin (RFC 6454 §4): a scheme, a host and a port. Two URLs share an origin when all three are equal, and
/// a session's credentials never cross from one origin to another (``UserSession/CredentialScope``).
///
/// Schemes and hosts are compared lowercased; a missing port is the scheme's default (80 for `http`, 443 for
/// `https`), so `https://api.example.com` and `https://API.example.com:443/v1` are one origin. A WebSocket URL's
/// origin is that of its handshake: `ws` counts as `http`, `wss` as `https`. Host names are compared as written,
/// never resolved: `localhost` and `127.0.0.1` are two origins, as `example.com` and `example.com.` are.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// The host, lowercased; an IPv6 address without its brackets.
    public let host: String
    /// The port, explicit or the scheme's default.
    public let port: Int

    /// The origin of `url`, or `nil` when it has none SessionKit can send to: a scheme other than `http`, `https`,
    /// `ws` or `wss`, or no host.
    public init?(_ url: URL) {
        guard let scheme = url.scheme, let host = url.host, !host.isEmpty else { return nil }
        self.init(scheme: scheme, host: host, port: url.port)
    }

    /// The origin of the URL `string`, such as `"https://api.example.com"`; `nil` when it is not a URL with an
    /// origin (see ``init(_:)-(URL)``).
    public init?(_ string: String) {
        guard let url = URL(string: string) else { return nil }
        self.init(url)
    }

    /// An origin from its parts; `nil` for a scheme other than `http`, `https`, `ws` or `wss`, an empty host, or a
    /// port outside 1–65535.
    ///
    /// - Parameters:
    ///   - scheme: `http`, `https`, `ws` or `wss`, in any case.
    ///   - host: The host name or address (an IPv6 address with or without brackets).
    ///   - port: The port; `nil` for the scheme's default.
    public init?(scheme: String, host: String, port: Int? = nil) {
        let secure: Bool
        switch Self.asciiLowercased(scheme) {
        case "http", "ws": secure = false
        case "https", "wss": secure = true
        default: return nil
        }
        var host = Self.asciiLowercased(host)
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        let port = port ?? (secure ? 443 : 80)
        guard (1...65535).contains(port) else { return nil }
        self.scheme = secure ? "https" : "http"
        self.host = host
        self.port = port
    }

    /// Whether the origin uses TLS.
    public var isSecure: Bool { scheme == "https" }

    /// Whether the host is this machine's loopback interface (`localhost`, `127.0.0.0/8`, `::1`): plain HTTP to it
    /// never leaves the machine, so a session may send its token there without TLS.
    public var isLoopback: Bool {
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        // A dotted quad whose first number is 127, read byte by byte: this runs before every plain HTTP request.
        var octets = 0
        var value = 0
        var digits = 0
        for byte in host.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, value <= 255, octets > 0 || value == 127 else { return false }
                octets += 1
                (value, digits) = (0, 0)
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 3 {
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
            } else {
                return false
            }
        }
        return octets == 3 && digits > 0 && value <= 255
    }

    /// `string` with ASCII letters lowercased, without a copy when it has none in upper case (the usual URL).
    private static func asciiLowercased(_ string: String) -> String {
        guard string.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
            return string
        }
        return string.lowercased()
    }

    /// `scheme://host` with the port when it is not the scheme's default, IPv6 addresses bracketed.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let defaultPort = isSecure ? 443 : 80
        return port == defaultPort ? "\(scheme)://\(shownHost)" : "\(scheme)://\(shownHost):\(port)"
    }
}
