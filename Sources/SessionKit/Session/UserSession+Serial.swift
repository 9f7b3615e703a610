import SessionKitOAuth

extension UserSession {
    /// A session's number, unique per sign-in within the process and never reused: what SessionKit's own records
    /// of a session compare, where an object identifier could name a later session at the same address.
    package struct Serial: Hashable, Sendable, CustomStringConvertible {
        private static let counter = Lock<UInt64>(0)

        /// The sign-in's number: it increases within the process and is never reused, so two sign-ins of the
        /// same account always differ.
        package let rawValue: UInt64

        static func next() -> Serial {
            Serial(
                rawValue: counter.withLock { count in
                    count &+= 1
                    return count
                })
        }

        /// `session-<n>`.
        package var description: String { "session-\(rawValue)" }
    }
}
