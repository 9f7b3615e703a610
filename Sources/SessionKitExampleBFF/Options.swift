import Foundation

/// The command line: `SessionKitExampleBFF --issuer URL --client-id ID --redirect-uri URL --state-dir DIR
/// [--instance NAME] [--userinfo URL] [--postgres CONNECTION]`.
///
/// The credential store is PostgreSQL when a connection string is given, by `--postgres` or, better (a command line
/// is visible to every user of the machine), by `SESSIONKIT_BFF_DATABASE`; else a `FileCredentialStore` in the
/// state directory, which coordinates the instances of one machine only. The pending sign-ins and the cookie table
/// follow the store: tables in the database (``DatabaseTables``), or files in the state directory.
///
/// There is no `--port`: ``LocalServer`` listens on a port the system picks, printed as `listening <port>` once the
/// server is ready; a load balancer's configuration is written after that.
struct Options {
    /// The OpenID Connect issuer browsers sign in at, such as `http://127.0.0.1:8000/o`.
    var issuer: URL
    /// The client, registered with the redirect URI below.
    var clientID: String
    /// The callback as the browser reaches it: through the load balancer, not an instance's own port.
    var redirectURI: String
    /// The directory every instance shares: the credential store, pending sign-ins, the cookie table.
    var stateDirectory: URL
    /// This instance's name, sent as `X-Instance`.
    var instance = "1"
    /// The API the browser calls through the server; the issuer's `userinfo/` by default.
    var userinfo: URL?
    /// The libpq connection string of the PostgreSQL database holding the credential records, if any. Never printed.
    var database: String?

    /// Reads `arguments` (without the program's name).
    init(_ arguments: [String], environment: [String: String]) throws {
        var values: [String: String] = [:]
        var rest = arguments[...]
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else {
                throw UsageError(description: "expected --option value, found \(name)")
            }
            values[String(name.dropFirst(2))] = value
        }
        func required(_ name: String) throws -> String {
            guard let value = values.removeValue(forKey: name) else {
                throw UsageError(description: "--\(name) is required")
            }
            return value
        }
        guard let issuer = URL(string: try required("issuer")), issuer.host != nil else {
            throw UsageError(description: "--issuer must be an absolute URL")
        }
        self.issuer = issuer
        clientID = try required("client-id")
        redirectURI = try required("redirect-uri")
        stateDirectory = URL(fileURLWithPath: try required("state-dir"), isDirectory: true)
        instance = values.removeValue(forKey: "instance") ?? instance
        userinfo = try values.removeValue(forKey: "userinfo").map { text in
            guard let url = URL(string: text), url.host != nil else {
                throw UsageError(description: "--userinfo must be an absolute URL")
            }
            return url
        }
        database = values.removeValue(forKey: "postgres") ?? environment["SESSIONKIT_BFF_DATABASE"]
        if let unknown = values.keys.sorted().first { throw UsageError(description: "unknown option --\(unknown)") }
    }

    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }
}
