import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Writes queued while offline, belonging to one account and replayed only as that account.
///
/// The outbox lives in the account's directory. At sign-out it is deleted with the account's data or, if the
/// app asks, set aside for the same account's next sign-in. ``flush(using:)`` refuses a session of any other
/// account, so one user's queued writes are never sent with another user's token. A manager keeps one outbox
/// per account (``SessionManager/outbox(for:)``) and closes it at the account's purge.
public final class Outbox: Sendable {
    /// One queued write. Requests are stored without their credentials (`Authorization`, `Cookie`,
    /// `Proxy-Authorization`).
    package struct Entry: Codable, Sendable, Hashable {
        /// The HTTP method.
        public var method: String
        /// The target URL.
        public var url: URL
        /// Header fields other than those carrying credentials.
        public var headers: [String: String]
        /// The body.
        public var body: Data?

        /// Creates an entry from a request, dropping the header fields that carry credentials.
        ///
        /// - Parameter request: The write to queue.
        /// - Throws: ``SessionError`` (`invalidInput`) when the request has no URL.
        public init(_ request: URLRequest) throws {
            guard let url = request.url else { throw SessionError(.invalidInput, "a queued write needs a URL") }
            self.method = request.httpMethod ?? "POST"
            self.url = url
            var headers = request.allHTTPHeaderFields ?? [:]
            // Credentials are never persisted: the replay carries the replaying session's own.
            for name in headers.keys where Self.credentialHeaders.contains(name.lowercased()) { headers[name] = nil }
            // Assigned once, at enqueue, so a flush that is interrupted and retried cannot apply a write twice.
            if !headers.keys.contains(where: { $0.lowercased() == "idempotency-key" }) {
                headers["Idempotency-Key"] = UUID().uuidString
            }
            self.headers = headers
            self.body = request.httpBody
        }

        /// Header fields that carry credentials, dropped at enqueue.
        static let credentialHeaders: Set<String> = ["authorization", "cookie", "proxy-authorization"]

        var request: URLRequest {
            var request = URLRequest(url: url)
            request.httpMethod = method
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            request.httpBody = body
            return request
        }
    }

    /// The account the outbox belongs to.
    public let account: Account
    private let file: URL?
    /// The queued writes, and whether the account's purge closed the outbox: one lock, so that a write is either
    /// queued before the close (and forgotten by it) or refused after it, never written once the purge has run.
    private let state: Lock<(entries: [Entry], closed: Bool)>

    init(account: Account, file: URL?) {
        self.account = account
        self.file = file
        var loaded: [Entry] = []
        if let file, let data = try? Data(contentsOf: file) {
            loaded = (try? JSONDecoder().decode([Entry].self, from: data)) ?? []
        }
        self.state = Lock((loaded, false))
    }

    /// The queued writes, oldest first, as they will be sent: without credentials (the session that flushes them
    /// adds its own), each with the `Idempotency-Key` it was given at enqueue.
    public var pending: [URLRequest] { state.withLock { $0.entries }.map(\.request) }

    /// Queues a write, and writes the queue to the account's directory before returning.
    ///
    /// A write without an `Idempotency-Key` gets one now, once, so a flush that is interrupted and run again
    /// cannot apply it twice on a server that honours the key.
    ///
    /// - Parameter request: The write; its credential header fields are not stored.
    /// - Throws: ``SessionError`` (`invalidInput`, `storageFailure`; `sessionEnded` once the account was signed
    ///   out and its outbox closed).
    public func enqueue(_ request: URLRequest) throws {
        let entry = try Entry(request)
        try state.withLock { state in
            guard !state.closed else {
                throw SessionError(.sessionEnded, "the account was signed out; its outbox is closed")
            }
            state.entries.append(entry)
            try persist(state.entries)
        }
    }

    /// Sends every queued write through `session`, oldest first, removing each one that got an answer.
    ///
    /// - Parameter session: A session of the outbox's own account.
    /// - Returns: How many writes were sent.
    /// - Throws: ``SessionError`` (`invalidInput`) when `session` belongs to another account, or the error of
    ///   the first write that failed (it stays queued, with the ones after it).
    @discardableResult
    public func flush(using session: UserSession) async throws -> Int {
        guard session.account == account else {
            throw SessionError(.invalidInput, "an outbox is replayed only by a session of its own account")
        }
        var sent = 0
        while let entry = state.withLock({ $0.entries.first }) {
            _ = try await session.write(entry.request, policy: .discard)
            try state.withLock { state in
                // A purge that closed the outbox meanwhile forgot the entries; nothing is written after it.
                guard !state.closed else { return }
                if state.entries.first == entry { state.entries.removeFirst() }
                try persist(state.entries)
            }
            sent += 1
        }
        return sent
    }

    /// Closes the outbox at its account's purge: its entries are forgotten and nothing is written any more.
    func close() {
        state.withLock { state in
            state.closed = true
            state.entries.removeAll()
        }
    }

    /// Writes the queue to the account's directory; called under the lock, only while the outbox is open.
    private func persist(_ entries: [Entry]) throws {
        guard let file else { return }
        do {
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(),
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try JSONEncoder().encode(entries).write(to: file, options: .atomic)
        } catch {
            throw SessionError(.storageFailure, "could not write the outbox: \(error.localizedDescription)")
        }
    }
}
