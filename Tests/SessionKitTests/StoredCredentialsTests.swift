import Foundation
import SessionKit
import SessionKitTesting
import Testing

/// What a credential record holds at rest, read from each store's own bytes in every configuration, against the
/// table in Getting Started ("What is stored"). A store keeps the least the configuration needs: every extra token
/// at rest is one more thing a stolen disk, backup or keyring gives away.
@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct StoredCredentialsTests {
    // MARK: - The table

    /// A row of the table: credential material a record may hold.
    enum Material: String, CaseIterable, Sendable {
        case refreshToken = "Refresh token"
        case accessToken = "Access token and its expiry"
        case idToken = "ID token"
        case proofKey = "DPoP private key"

        /// The record's JSON members that hold it.
        var members: Set<String> {
            switch self {
            case .refreshToken: ["refreshToken"]
            case .accessToken: ["accessToken", "accessTokenExpiresAt"]
            case .idToken: ["idToken"]
            case .proofKey: ["proofKey"]
            }
        }
    }

    /// A column of the table: one setting turned on over the default.
    enum Setting: String, CaseIterable, Sendable {
        case storesAccessToken = "`storesAccessToken`"
        case storesIDToken = "`storesIDToken`"
        case sharedStore = "Shared between processes"
        case dpop = "DPoP-bound tokens"
    }

    /// The table, as Getting Started shows it: what the default stores, and what each setting adds. Settings
    /// combine: a record holds what the default or any of its settings stores, and nothing else.
    static let defaultStores: Set<Material> = [.refreshToken]
    static let settingStores: [Setting: Set<Material>] = [
        .storesAccessToken: [.refreshToken, .accessToken],
        .storesIDToken: [.refreshToken, .idToken],
        // Another process adopts a rotation by the access token this one stored; the ID token it does not need.
        .sharedStore: [.refreshToken, .accessToken],
        // The refresh token of a DPoP-bound grant is useless without its key.
        .dpop: [.refreshToken, .proofKey],
    ]

    /// The members every record has, none of them a credential (`provider` too, for an account of a named one;
    /// these tests sign in through the default provider).
    static let bookkeeping: Set<String> = ["version", "account", "scope", "tokenType", "savedAt", "selectedAt"]

    /// The account every record here belongs to.
    static let account = alice

    /// One configuration: which settings are on.
    struct Configuration: Sendable, CustomTestStringConvertible {
        var settings: Set<Setting>

        var expected: Set<Material> {
            settings.reduce(into: StoredCredentialsTests.defaultStores) {
                $0.formUnion(StoredCredentialsTests.settingStores[$1] ?? [])
            }
        }

        var testDescription: String {
            settings.isEmpty
                ? "default" : Setting.allCases.filter(settings.contains).map(\.rawValue).joined(separator: " + ")
        }

        /// Every combination of the settings.
        static let all: [Configuration] = (0..<(1 << Setting.allCases.count)).map { bits in
            Configuration(
                settings: Set(Setting.allCases.enumerated().filter { bits & (1 << $0.offset) != 0 }.map(\.element)))
        }
    }

    /// A store whose bytes the test reads as they are kept.
    enum StoreKind: String, CaseIterable, Sendable {
        case file, inMemory, keychain
    }

    // MARK: - The records, read from each store

    @Test(arguments: StoreKind.allCases, Configuration.all)
    func aRecordHoldsWhatTheTableSaysAndNothingMore(_ kind: StoreKind, _ configuration: Configuration) async throws {
        try await TemporaryDirectory.with { directory in
            let lock =
                configuration.settings.contains(.sharedStore)
                ? CrossProcessLock(file: directory.appendingPathComponent(".refresh.lock")) : nil
            let store: any CredentialStore
            let bytes: @Sendable () async throws -> Data?
            switch kind {
            case .file:
                let records = directory.appendingPathComponent("records")
                let file = try FileCredentialStore(directory: records, coordinatingProcesses: lock != nil)
                store = file
                bytes = { try? Data(contentsOf: records.appendingPathComponent(alice.storageKey)) }
            case .inMemory:
                let memory = InMemoryCredentialStore(refreshLock: lock)
                store = memory
                // It keeps the record itself, not bytes: its fields, as the other stores would encode them.
                bytes = { try await memory.load(for: alice).map { try JSONEncoder().encode($0) } }
            case .keychain:
                let keychain = FakeKeychain()
                store = KeychainCredentialStore(service: "com.example.app", refreshLock: lock, calls: keychain)
                // The account's item is named by its storage key and a generation (`key.N`); a save leaves one.
                bytes = {
                    let items = keychain.withState { state in
                        state.items.filter {
                            $0.account == alice.storageKey || $0.account.hasPrefix(alice.storageKey + ".")
                        }
                    }
                    #expect(items.count <= 1, "one item per account")
                    return items.last?.secret
                }
            }
            try await Self.check(store: store, configuration, bytes: bytes)
        }
    }

    /// Signs in, reads the record's bytes, refreshes, reads them again: each time the record holds exactly the
    /// members the table names for `configuration`, and the value of every token it must not hold appears nowhere
    /// in the bytes.
    static func check(
        store: any CredentialStore, _ configuration: Configuration, bytes: @Sendable () async throws -> Data?
    ) async throws {
        let dpop = configuration.settings.contains(.dpop)
        let key = dpop ? try DPoPKey.generate() : nil
        let endpoint = BindingTokenEndpoint()
        let manager = SessionManager(
            configuration: .init(
                store: store, tokenEndpoint: endpoint,
                sessionConfiguration: .init(
                    storesAccessToken: configuration.settings.contains(.storesAccessToken),
                    storesIDToken: configuration.settings.contains(.storesIDToken))))
        let session = try await manager.signIn(alice, tokens: endpoint.tokens(0, proofKey: key))
        defer { session.end() }
        try await expectRecord(bytes(), holds: configuration, tokens: endpoint.tokens(0, proofKey: key))

        try await session.refreshTokens()
        #expect(session.tokens?.refreshToken == endpoint.tokens(1, proofKey: key).refreshToken)
        try await expectRecord(bytes(), holds: configuration, tokens: endpoint.tokens(1, proofKey: key))
        await manager.signOut(options: .localOnly)
        #expect(try await bytes() == nil, "sign-out deleted the record")
    }

    /// Compares one record's bytes with the table.
    static func expectRecord(
        _ data: Data?, holds configuration: Configuration, tokens: TokenSet,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let data = try #require(data, "no record was stored", sourceLocation: sourceLocation)
        let object = try #require(
            try JSONSerialization.jsonObject(with: data) as? [String: Any], sourceLocation: sourceLocation)
        let expected = configuration.expected
        let members = expected.reduce(into: bookkeeping) { $0.formUnion($1.members) }
        #expect(Set(object.keys) == members, "the record's members", sourceLocation: sourceLocation)
        // A token stored under another name would not show as a member: its value must not be in the bytes.
        let text = String(decoding: data, as: UTF8.self)
        let values: [(Material, String?)] = [
            (.refreshToken, tokens.refreshToken), (.accessToken, tokens.accessToken), (.idToken, tokens.idToken),
        ]
        for (material, value) in values {
            let value = try #require(value, sourceLocation: sourceLocation)
            #expect(
                text.contains(value) == expected.contains(material),
                "\(material.rawValue): in the bytes \(text.contains(value)), in the table \(expected.contains(material))",
                sourceLocation: sourceLocation)
        }
    }

    // MARK: - Sharing a store without the ID token

    /// With a shared store, a session that adopts the tokens another manager's refresh stored keeps the ID token
    /// it signed in with: the record holds none, and the provider's sign-out still has its `id_token_hint`.
    @Test func adoptingARotationFromASharedStoreKeepsTheSessionsOwnIDToken() async throws {
        try await TemporaryDirectory.with { directory in
            let (store, endpoint, signedIn, one, two) = try await BindingTokenEndpoint.aliceInTwoManagers(
                sharingALockIn: directory)
            defer {
                one.end()
                two.end()
            }

            try await one.refreshTokens()
            try await two.refreshTokens()

            #expect(endpoint.presented == [signedIn.refreshToken], "the second manager adopted the rotation")
            #expect(await store.load(for: alice)?.idToken == nil)
            #expect(two.tokens?.accessToken == endpoint.tokens(1, proofKey: nil).accessToken)
            #expect(two.tokens?.idToken == signedIn.idToken, "the ID token it signed in with")
            #expect(one.tokens?.idToken == endpoint.tokens(1, proofKey: nil).idToken)
        }
    }

    // MARK: - The document shows this table

    @Test func gettingStartedShowsThisTable() throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(
            contentsOf: root.appendingPathComponent("Sources/SessionKit/SessionKit.docc/GettingStarted.md"),
            encoding: .utf8)
        let lines = document.components(separatedBy: "\n")
        let start = try #require(lines.firstIndex(of: "<!-- table: stored-credentials -->"))
        let rows = lines[(start + 1)...].prefix { $0.hasPrefix("|") }.map { line in
            line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let columns = ["Default"] + Setting.allCases.map(\.rawValue)
        #expect(rows.first.map { Array($0.dropFirst()) } == columns, "the columns")
        let shown = rows.dropFirst(2).map { $0.first ?? "" }
        #expect(shown == Material.allCases.map(\.rawValue) + ["Account, scope, token type, provider, times"])
        for row in rows.dropFirst(2) {
            let material = Material(rawValue: row[0])
            let cells = row.dropFirst().map { $0 == "yes" }
            let tested =
                [material.map(Self.defaultStores.contains) ?? true]
                + Setting.allCases.map { setting in
                    material.map { Self.settingStores[setting]?.contains($0) ?? false } ?? true
                }
            #expect(cells == tested, "the row \(row[0])")
        }
    }
}

/// A token endpoint that rotates every token at each refresh and keeps the DPoP key the grant is bound to, as a
/// DPoP authorization server's answer does.
final class BindingTokenEndpoint: TokenEndpoint {
    /// Two managers on one store and its refresh lock (in `directory`), as two processes share them, each with its
    /// own diagnostics sink, and alice signed in to both with a new endpoint's first tokens: whichever refreshes
    /// second adopts the other's rotation. The caller ends both sessions.
    static func aliceInTwoManagers(
        sharingALockIn directory: URL, diagnostics: (first: Diagnostics?, second: Diagnostics?) = (nil, nil)
    ) async throws -> (
        store: InMemoryCredentialStore, endpoint: BindingTokenEndpoint, signedIn: TokenSet, one: UserSession,
        two: UserSession
    ) {
        let store = InMemoryCredentialStore(
            refreshLock: CrossProcessLock(file: directory.appendingPathComponent(".refresh.lock")))
        let endpoint = BindingTokenEndpoint()
        func manager(_ diagnostics: Diagnostics?) -> SessionManager {
            SessionManager(
                configuration: .init(
                    store: store, tokenEndpoint: endpoint, sessionConfiguration: .init(diagnostics: diagnostics)))
        }
        let signedIn = endpoint.tokens(0, proofKey: nil)
        let one = try await manager(diagnostics.first).signIn(alice, tokens: signedIn)
        let two = try await manager(diagnostics.second).signIn(alice, tokens: signedIn)
        return (store, endpoint, signedIn, one, two)
    }

    private let calls = Locked<[String]>([])

    var presented: [String] { calls.withLock { $0 } }

    /// The tokens of the `generation`th grant answer (0: the sign-in's).
    func tokens(_ generation: Int, proofKey: DPoPKey?) -> TokenSet {
        TokenSet(
            accessToken: "access-token-\(generation)", refreshToken: "refresh-token-\(generation)",
            idToken: "id-token-\(generation)", scope: "openid profile", tokenType: proofKey == nil ? "Bearer" : "DPoP",
            proofKey: proofKey, lifetime: .seconds(3600))
    }

    func refresh(using refreshToken: String) async throws -> TokenSet {
        try await refresh(using: refreshToken, for: alice, proofKey: nil)
    }

    func refresh(using refreshToken: String, for account: Account, proofKey: DPoPKey?) async throws -> TokenSet {
        let generation = calls.withLock {
            $0.append(refreshToken)
            return $0.count
        }
        return tokens(generation, proofKey: proofKey)
    }
}
