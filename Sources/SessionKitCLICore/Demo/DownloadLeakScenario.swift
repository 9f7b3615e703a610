import Foundation
import SessionKit
import SessionKitTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Alice downloads her bank statement; she signs out, Bob signs in on the same device, and opens the app's
/// downloads folder.
enum DownloadLeakScenario {
    static let id = "download-leak"

    static let scenario = DemoScenario(id: id) { _ in
        ScenarioResult(id: id, naive: try await naive(), sessionKit: try await withSessionKit())
    }

    private static func install(on server: LocalServer) {
        server.route("GET", "/me/statement.pdf") { request in
            .text("%PDF statement of account holder \(DemoSupport.user(of: request))")
        }
    }

    /// Runs `body` with a new empty folder that is removed afterwards.
    private static func withFolder<T>(_ body: (URL) async throws -> T) async throws -> T {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("sessionkit-demo-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(folder)
    }

    /// The files under `folder` whose contents name `user`.
    private static func files(under folder: URL, naming user: String) -> [String] {
        let names = FileManager.default.enumerator(atPath: folder.path)?.allObjects as? [String] ?? []
        return names.filter { name in
            let contents = (try? Data(contentsOf: folder.appendingPathComponent(name))) ?? Data()
            return DemoSupport.text(contents).contains("holder \(user)")
        }.sorted()
    }

    /// The app downloads with the shared URLSession and "the current token" into its Downloads folder, one folder
    /// whoever is signed in; signing out forgets the token and nothing else.
    static func naive() async throws -> Verdict {
        try await withFolder { folder in
            try await LocalServer.withRunning { server in
                install(on: server)
                let urlSession = DemoSupport.appURLSession()
                defer { urlSession.invalidateAndCancel() }
                let downloads = folder.appendingPathComponent("Downloads")
                try FileManager.default.createDirectory(at: downloads, withIntermediateDirectories: true)
                let request = DemoSupport.get(server, "/me/statement.pdf", token: "token-alice")
                let (temporary, _) = try await urlSession.download(for: request)
                try FileManager.default.moveItem(at: temporary, to: downloads.appendingPathComponent("statement.pdf"))
                // Alice signs out (the app forgets her token), Bob signs in and opens Downloads.
                let seen = files(under: downloads, naming: "alice")
                return Verdict(
                    leaked: !seen.isEmpty,
                    detail: seen.isEmpty
                        ? "Bob's Downloads folder held nothing of Alice's"
                        : "Bob opened Downloads and found Alice's statement: \(DemoSupport.list(seen))"
                )
            }
        }
    }

    /// Alice's session downloads into her account's own directory; sign-out purges it with the rest of her data.
    static func withSessionKit() async throws -> Verdict {
        try await withFolder { folder in
            try await LocalServer.withRunning { server in
                install(on: server)
                let manager = SessionManager(
                    configuration: .init(store: InMemoryCredentialStore(), dataDirectory: folder))
                let aliceSession = try await manager.signIn(DemoSupport.alice, tokens: DemoSupport.tokens("alice"))
                let (file, _) = try await aliceSession.download(for: DemoSupport.get(server, "/me/statement.pdf"))
                let downloadedInHerDirectory = file.path.hasPrefix(aliceSession.downloadsDirectory.path)
                await manager.signOut(options: .localOnly)
                let bobSession = try await manager.signIn(DemoSupport.bob, tokens: DemoSupport.tokens("bob"))
                _ = try await bobSession.download(for: DemoSupport.get(server, "/me/statement.pdf"))
                // Everything Bob's device holds: his downloads, and the whole data directory besides.
                let seen = files(under: folder, naming: "alice")
                let his = files(under: bobSession.downloadsDirectory, naming: "bob")
                await manager.signOut(options: .localOnly)
                return Verdict(
                    leaked: !seen.isEmpty,
                    detail: seen.isEmpty
                        ? "Alice's statement went to her own account directory"
                            + (downloadedInHerDirectory ? "" : " (elsewhere?)")
                            + " and was purged at her sign-out; Bob's downloads hold \(DemoSupport.count(his.count, "file")), his own"
                        : "Bob's device still holds Alice's statement: \(DemoSupport.list(seen))"
                )
            }
        }
    }
}
