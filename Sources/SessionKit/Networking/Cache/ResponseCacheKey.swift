import Foundation
import SessionKitOAuth

/// The primary cache key (RFC 9111 §2): the request method and the target URI, normalized.
///
/// GET and HEAD are kept apart: a HEAD is answered only by a stored HEAD response, never from a GET entry.
/// Normalization lower-cases the scheme and host, drops a default port and the fragment, and writes an empty
/// path as `/`, so spellings of one URI share an entry, and an unsafe request invalidates all of them.
struct ResponseCacheKey: Hashable, Sendable {
    /// The request method, upper-cased (`GET` or `HEAD` for anything stored).
    let method: String
    /// The normalized absolute URI.
    let uri: String

    init(method: String, url: URL) {
        self.init(method: method, normalizedURI: Self.normalized(url))
    }

    init(method: String, normalizedURI: String) {
        self.method = method
        self.uri = normalizedURI
    }

    static func normalized(_ url: URL) -> String {
        let string = url.absoluteString
        return isNormalized(string) ? string : rebuilt(string)
    }

    /// Whether `string` needs no change: the common case, checked in one pass without allocating.
    ///
    /// An explicit port other than the scheme's default is already normal, so a URI such as
    /// `http://127.0.0.1:8080/me` takes this path too; a default port (`:80` for http, `:443` for https) is not.
    static func isNormalized(_ string: String) -> Bool {
        var sawSchemeEnd = false
        var inAuthority = false
        var slashes = 0
        var inPort = false
        var portDigits = 0
        var port = 0
        for byte in string.utf8 {
            if byte == UInt8(ascii: "#") { return false }
            if !sawSchemeEnd {
                if byte == UInt8(ascii: ":") {
                    sawSchemeEnd = true
                } else if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") {
                    return false
                }
            } else if !inAuthority {
                guard byte == UInt8(ascii: "/") else { return false }
                slashes += 1
                inAuthority = slashes == 2
            } else if byte == UInt8(ascii: "/") {
                if inPort {
                    // An empty or default port is rewritten; any other port is kept as written.
                    guard portDigits > 0, !isDefaultPort(port, digits: portDigits, of: string) else { return false }
                }
                // The path has started; the rest may hold anything but a fragment.
                return !string.utf8.contains(UInt8(ascii: "#"))
            } else if inPort {
                guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"), portDigits < 5 else { return false }
                portDigits += 1
                port = port * 10 + Int(byte - UInt8(ascii: "0"))
            } else if byte == UInt8(ascii: ":") {
                inPort = true
            } else if byte == UInt8(ascii: "?") || byte == UInt8(ascii: "@")
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            {
                // An empty path, user information or upper case: take the careful route.
                return false
            }
        }
        return false
    }

    /// Whether the port written as `digits` digits with value `port` is the default of the scheme `string`
    /// starts with, as ``rebuilt(_:)`` spells it: exactly `80` for http, exactly `443` for https.
    private static func isDefaultPort(_ port: Int, digits: Int, of string: String) -> Bool {
        if port == 80 && digits == 2 { return string.utf8.starts(with: "http:".utf8) }
        if port == 443 && digits == 3 { return string.utf8.starts(with: "https:".utf8) }
        return false
    }

    static func rebuilt(_ string: String) -> String {
        var bytes = Array(string.utf8)
        if let fragment = bytes.firstIndex(of: UInt8(ascii: "#")) {
            bytes.removeSubrange(fragment...)
        }
        let separator = Array("://".utf8)
        guard let schemeEnd = firstRange(of: separator, in: bytes) else {
            return String(decoding: bytes, as: UTF8.self)
        }
        let authorityStart = schemeEnd + separator.count
        let authorityEnd =
            bytes[authorityStart...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") })
            ?? bytes.count
        let scheme = lowercased(bytes[..<schemeEnd])
        // User information is case-sensitive; only the host and port after the last "@" are normalized.
        let hostStart =
            (bytes[authorityStart..<authorityEnd].lastIndex(of: UInt8(ascii: "@")).map { $0 + 1 })
            ?? authorityStart
        var host = lowercased(bytes[hostStart..<authorityEnd])
        let defaultPort = scheme == Array("https".utf8) ? ":443" : scheme == Array("http".utf8) ? ":80" : nil
        if let defaultPort, host.count > defaultPort.utf8.count,
            host.suffix(defaultPort.utf8.count).elementsEqual(
                defaultPort.utf8)
        {
            host.removeLast(defaultPort.utf8.count)
        }
        var result = scheme
        result += separator
        result += bytes[authorityStart..<hostStart]
        result += host
        if authorityEnd == bytes.count || bytes[authorityEnd] != UInt8(ascii: "/") {
            result.append(UInt8(ascii: "/"))
        }
        result += bytes[authorityEnd...]
        return String(decoding: result, as: UTF8.self)
    }

    private static func lowercased(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }

    private static func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)] == needle[...] {
            return start
        }
        return nil
    }
}
