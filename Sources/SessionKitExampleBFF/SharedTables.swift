import Foundation
import SessionKit

/// The two small tables every instance reads and writes: pending sign-ins and the cookie table. With a PostgreSQL
/// store they are tables in the same database (``DatabaseTables``), so instances on several machines share them;
/// otherwise files in a directory the instances of one machine share.
///
/// Both must be shared: the callback of a sign-in begun on one instance may reach any other (the load balancer
/// knows no user yet), and a cookie set by one instance comes back to all of them. Each entry is named by the
/// SHA-256 of its key (``Digest``), so a value from a request is never a path, and the cookie table holds no
/// cookie: whoever reads it learns which accounts are signed in, never a value a browser could send.
struct SharedTables: Sendable {
    /// How long a sign-in may take between the redirect and the callback.
    static let pendingLifetime: TimeInterval = 600

    /// The folders of the two tables under the shared directory; unused with a database.
    private let pending: URL
    private let cookies: URL
    /// The database's tables, when the instances share a database.
    private let database: DatabaseTables?

    /// Opens (and creates) the tables under `directory`, or, given a connection string, in that PostgreSQL
    /// database (the directory is then not touched).
    init(directory: URL, database connectionString: String? = nil) throws {
        pending = directory.appendingPathComponent("pending-sign-ins", isDirectory: true)
        cookies = directory.appendingPathComponent("cookies", isDirectory: true)
        database = try connectionString.map { try DatabaseTables(connectionString: $0) }
        guard database == nil else { return }
        for folder in [pending, cookies] {
            try FileManager.default.createDirectory(
                at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
    }

    // MARK: Pending sign-ins

    /// Keeps a pending sign-in (the encoded ``AuthorizationRequest``, its PKCE verifier with it) under its state.
    func savePendingSignIn(_ request: AuthorizationRequest) throws {
        if let database {
            return try database.savePendingSignIn(
                String(decoding: try JSONEncoder().encode(request), as: UTF8.self),
                state: Digest.sha256Hex(request.state))
        }
        sweepPendingSignIns()
        try write(JSONEncoder().encode(request), to: pending.appendingPathComponent(Digest.sha256Hex(request.state)))
    }

    /// Takes the pending sign-in of `state`, once: the first callback with it, on any instance, gets it, and it is
    /// gone for every later one. `nil` for a state no instance issued, one already used, or one too old.
    func takePendingSignIn(state: String) -> AuthorizationRequest? {
        if let database {
            guard let text = database.takePendingSignIn(state: Digest.sha256Hex(state)) else { return nil }
            return try? JSONDecoder().decode(AuthorizationRequest.self, from: Data(text.utf8))
        }
        let file = pending.appendingPathComponent(Digest.sha256Hex(state))
        // A rename is atomic: of two callbacks with one state, exactly one finds the file.
        let claimed = pending.appendingPathComponent(".taken-\(Digest.randomOpaqueValue())")
        guard (try? FileManager.default.moveItem(at: file, to: claimed)) != nil else { return nil }
        defer { try? FileManager.default.removeItem(at: claimed) }
        let attributes = try? FileManager.default.attributesOfItem(atPath: claimed.path)
        guard let made = attributes?[.modificationDate] as? Date,
            Date().timeIntervalSince(made) < Self.pendingLifetime,
            let data = try? Data(contentsOf: claimed)
        else { return nil }
        return try? JSONDecoder().decode(AuthorizationRequest.self, from: data)
    }

    /// Removes the sign-ins nobody came back from in time (the browser closed at the provider's page).
    private func sweepPendingSignIns() {
        let entries = (try? FileManager.default.contentsOfDirectory(at: pending, includingPropertiesForKeys: nil)) ?? []
        for entry in entries {
            let made = (try? FileManager.default.attributesOfItem(atPath: entry.path))?[.modificationDate] as? Date
            if let made, Date().timeIntervalSince(made) > Self.pendingLifetime {
                try? FileManager.default.removeItem(at: entry)
            }
        }
    }

    // MARK: The cookie table

    /// Records that `cookie` stands for `account`.
    func remember(_ cookie: String, for account: Account) throws {
        if let database {
            return try database.remember(
                Digest.sha256Hex(cookie), account: String(decoding: try JSONEncoder().encode(account), as: UTF8.self))
        }
        try write(JSONEncoder().encode(account), to: cookies.appendingPathComponent(Digest.sha256Hex(cookie)))
    }

    /// The account `cookie` stands for, or `nil` for a cookie no instance set (or one signed out).
    func account(for cookie: String) -> Account? {
        if let database {
            guard let text = database.account(for: Digest.sha256Hex(cookie)) else { return nil }
            return try? JSONDecoder().decode(Account.self, from: Data(text.utf8))
        }
        guard let data = try? Data(contentsOf: cookies.appendingPathComponent(Digest.sha256Hex(cookie))) else {
            return nil
        }
        return try? JSONDecoder().decode(Account.self, from: data)
    }

    /// Forgets `cookie`.
    func forget(_ cookie: String) {
        if let database { return database.forget(Digest.sha256Hex(cookie)) }
        try? FileManager.default.removeItem(at: cookies.appendingPathComponent(Digest.sha256Hex(cookie)))
    }

    /// Writes `data` whole or not at all, readable by this user only.
    private func write(_ data: Data, to file: URL) throws {
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".new-\(Digest.randomOpaqueValue())")
        guard
            FileManager.default.createFile(
                atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600])
        else { throw CocoaError(.fileWriteUnknown) }
        guard rename(temporary.path, file.path) == 0 else {
            try? FileManager.default.removeItem(at: temporary)
            throw CocoaError(.fileWriteUnknown)
        }
    }
}
