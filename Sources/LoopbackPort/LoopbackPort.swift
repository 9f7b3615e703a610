#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A loopback TCP port that nothing listened on a moment ago, for the test fixtures that start a server of their
/// own (nginx, PostgreSQL) or need a port that refuses connections. Built for the tests, not shipped.
///
/// The kernel chooses it (a socket bound to port 0 on 127.0.0.1, then closed), so two fixtures asking at once get
/// different ports; another process may still take it before the caller binds, which a fixture meets as its own
/// server failing to start.
public enum LoopbackPort {
    /// Why no port could be found.
    public struct Failure: Error, CustomStringConvertible {
        /// The call that failed, and its `errno`.
        public let description: String
    }

    /// A loopback port nothing listens on right now.
    ///
    /// - Returns: The port number.
    /// - Throws: ``Failure`` when no socket can be made or bound.
    public static func free() throws(Failure) -> Int {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { throw Failure(description: "bind() failed: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else { throw Failure(description: "getsockname() failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
