// An example backend-for-frontend: browsers sign in with the authorization code and PKCE at an OpenID Connect
// provider, their sessions live in a credential store shared by every instance behind an opaque cookie, and their
// API calls go out with the session's token. Several instances run behind a load balancer; any of them serves any
// request. `BrowserSessions.swift` is the SessionKit part; the rest is this example's plumbing.
import Foundation
import SessionKit
import SessionKitPostgres
import SessionKitTesting

let options: Options
do {
    options = try Options(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
} catch {
    FileHandle.standardError.write(Data("sessionkit-example-bff: \(error)\n".utf8))
    exit(2)
}

do {
    let shared = options.stateDirectory
    let store: any CredentialStore
    if let database = options.database {
        // Every instance connects to the same database: refreshes of an account are single-flight across them (an
        // advisory lock per account), and a sign-out is announced to all of them (`NOTIFY`).
        store = try await PostgresCredentialStore.connect(to: database)
    } else {
        // Every instance opens the same directory: the same promises through `.refresh.lock` and the change notice
        // beside it, for the instances of one machine.
        store = try FileCredentialStore(directory: shared.appendingPathComponent("credentials", isDirectory: true))
    }
    let own = shared.appendingPathComponent("instances/\(options.instance)", isDirectory: true)
    try FileManager.default.createDirectory(at: own, withIntermediateDirectories: true)
    let sessions = BrowserSessions(
        store: store,
        provider: OpenIDProvider(configuration: .init(issuer: options.issuer, clientID: options.clientID)),
        redirectURI: options.redirectURI,
        userinfo: options.userinfo ?? options.issuer.appendingPathComponent("userinfo/"),
        tables: try SharedTables(directory: shared, database: options.database),
        dataDirectory: own)
    // Finishes a sign-out this instance was killed in the middle of, before anything authenticates.
    await sessions.manager.restore()
    // No request log: requests carry the users' cookies.
    let server = try await LocalServer.start(configuration: .init(recordsRequests: false))
    Routes(sessions: sessions, instance: options.instance, secure: options.redirectURI.hasPrefix("https:"))
        .install(on: server)
    // Unbuffered, so whoever started the process (a test, a supervisor) reads it at once.
    FileHandle.standardOutput.write(Data("listening \(server.port)\n".utf8))
    // Serves until the process is stopped.
    while true { try await Task.sleep(for: .seconds(3600)) }
} catch {
    FileHandle.standardError.write(Data("sessionkit-example-bff: \(error)\n".utf8))
    exit(1)
}
