import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A request's method as SessionKit's request rules compare it: upper-cased, so that `get` follows the rules of
/// `GET` (RFC 9110 §9.1 makes methods case-sensitive and registers them in upper case; a lower-case one is a caller's
/// slip, not another method). The cache keys entries by the method exactly as sent.
package enum HTTPMethod {
    /// The method of `request` (`GET` when it has none), upper-cased; a method already in upper case, as nearly
    /// every one is, is returned without a new string.
    ///
    /// - Parameter request: The request.
    /// - Returns: The method in upper case.
    @inline(__always)
    package static func of(_ request: URLRequest) -> String {
        guard let method = request.httpMethod else { return "GET" }
        if method == "GET" || !method.utf8.contains(where: { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }) {
            return method
        }
        return method.uppercased()
    }
}
