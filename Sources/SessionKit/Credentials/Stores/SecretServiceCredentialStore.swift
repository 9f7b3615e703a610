import SessionKitOAuth

#if os(Linux)
    import Foundation
    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    /// A credential store in the freedesktop Secret Service (GNOME Keyring, KWallet), for Linux desktops and
    /// sessions that run a keyring.
    ///
    /// Each account's record is one item of the schema `dev.sessionkit.credentials` with the attributes `service` (this
    /// store's ``service``) and `account` (the account's ``Account/storageKey``); the secret is the record as
    /// JSON. Items are stored in the default collection, which the keyring encrypts at rest and unlocks with
    /// the user's login.
    ///
    /// libsecret is loaded at run time (`libsecret-1.so.0`, with GLib), so a program using SessionKit builds
    /// and runs without it; this store then throws ``SessionError/Code/storeUnavailable`` naming the missing
    /// library. It throws the same code when there is no D-Bus session bus or no Secret Service answers on
    /// it. Call ``checkAvailability()`` to choose another store up front (``FileCredentialStore`` on a server).
    ///
    /// A record that fails its checks (garbage, another format version, another account) makes ``load(for:)``
    /// throw ``SessionError/Code/corruptCredentials`` and is left in the keyring, where ``delete(for:)``
    /// removes it.
    ///
    /// - Important: libsecret's calls block on D-Bus round trips. They run one at a time, in call order, on a
    ///   dispatch queue of this store's own, never on the cooperative thread pool, so an unlock prompt that holds
    ///   one store's calls holds no other store's. A call whose task is cancelled still completes.
    public final class SecretServiceCredentialStore: CredentialStore {
        /// The Secret Service schema name of SessionKit's items.
        package static let schemaName = "dev.sessionkit.credentials"

        /// The name that scopes this store's items, such as your app's identifier.
        public let service: String
        /// The lock file that makes refreshes single-flight across the processes sharing these items, if any: the
        /// Secret Service has no lock of its own to offer.
        public let refreshLock: CrossProcessLock?

        private let queue = BlockingWorkQueue(label: "SessionKit.SecretServiceCredentialStore")

        /// Creates a store for the items of `service`; nothing is loaded or contacted until the first call.
        ///
        /// - Parameters:
        ///   - service: The name that scopes the items, such as `com.example.app`. Two stores with the same service
        ///     share their items; ``deleteAll()`` deletes the items of this service only.
        ///   - refreshLock: For several processes using the same items: a lock file they all name, such as
        ///     `$XDG_RUNTIME_DIR/<app>/refresh.lock`, so that each account's refresh is single-flight across them.
        ///     `nil` (the default) for one process.
        public init(service: String, refreshLock: CrossProcessLock? = nil) {
            self.service = service
            self.refreshLock = refreshLock
        }

        /// Checks that libsecret can be loaded, that a Secret Service answers on the session bus, and that it
        /// has a default keyring to store records in.
        ///
        /// A locked default keyring passes: on a desktop, the first use asks the user to unlock it.
        ///
        /// - Throws: ``SessionError`` `storeUnavailable` saying what is missing: the library, the session bus
        ///   (`DBUS_SESSION_BUS_ADDRESS` unset), the service (it did not answer, with D-Bus's reason), or its
        ///   default keyring.
        public func checkAvailability() async throws {
            try await queue.run {
                let library = try Self.prepare()
                try Self.requireDefaultCollection(library)
            }
        }

        /// Replaces the record of `record.account` with `record`; the Secret Service replaces items atomically.
        ///
        /// - Parameter record: The record to store; it must be of the version this build writes.
        /// - Throws: ``SessionError`` `storeUnavailable` (library, bus or service missing, or the keyring locked
        ///   with no way to unlock it), `userCancelled` (an unlock prompt was dismissed), `storageFailure`
        ///   (the service refused, with its message), `invalidInput` (a record of another version).
        public func save(_ record: CredentialRecord) async throws {
            try await queue.run { [service] in
                let library = try Self.prepare()
                var json = try CredentialRecordCoding.encode(record)
                defer { SecureWipe.wipe(&json) }
                // Sized once, NUL included, so no reallocation leaves an unwiped copy behind.
                var secret = [UInt8](repeating: 0, count: json.count + 1)
                defer { SecureWipe.wipe(&secret) }
                secret.withUnsafeMutableBytes { _ = json.copyBytes(to: $0) }
                let key = record.account.storageKey
                let label = "SessionKit credentials (\(service))"
                try Self.withSchema(library) { schema throws(SessionError) in
                    try Self.withAttributes(library, ["service": service, "account": key]) {
                        attributes throws(SessionError) in
                        var error: UnsafeMutableRawPointer?
                        let stored = secret.withUnsafeBufferPointer { buffer in
                            buffer.withMemoryRebound(to: CChar.self) { password in
                                label.withCString { label in
                                    library.passwordStorev(
                                        schema, attributes, nil, label, password.baseAddress, nil, &error)
                                }
                            }
                        }
                        if let error = library.takeError(error) {
                            throw Self.failure(error, action: "storing the record \(key)")
                        }
                        guard stored != 0 else {
                            throw SessionError(.storageFailure, "the Secret Service did not store the record \(key)")
                        }
                    }
                }
            }
        }

        /// The record stored for `account`, or `nil` when there is none.
        ///
        /// - Parameter account: The account to look up.
        /// - Returns: The record, or `nil`.
        /// - Throws: ``SessionError`` `corruptCredentials` (the item fails its checks; it is left in place),
        ///   `storeUnavailable`, `userCancelled`, `storageFailure`.
        public func load(for account: Account) async throws -> CredentialRecord? {
            try await queue.run { [service] () throws -> CredentialRecord? in
                let library = try Self.prepare()
                return try Self.record(library, service: service, account: account)
            }
        }

        /// Deletes the record of `account`; deleting a missing record succeeds.
        ///
        /// - Parameter account: The account whose record to delete.
        /// - Throws: ``SessionError`` `storeUnavailable`, `userCancelled`, `storageFailure`.
        public func delete(for account: Account) async throws {
            try await queue.run { [service] in
                let library = try Self.prepare()
                try Self.clear(
                    library,
                    ["service": service, "account": account.storageKey],
                    action: "deleting the record \(account.storageKey)"
                )
            }
        }

        /// Deletes every record of this store's ``service``; items of other services are left alone.
        ///
        /// - Throws: ``SessionError`` `storeUnavailable`, `userCancelled`, `storageFailure`.
        public func deleteAll() async throws {
            try await queue.run { [service] in
                let library = try Self.prepare()
                try Self.clear(library, ["service": service], action: "deleting the records of service \(service)")
            }
        }

        /// The accounts of this store's ``service`` that have a valid record.
        ///
        /// - Returns: The accounts, in no particular order.
        /// - Throws: ``SessionError`` `storeUnavailable`, `userCancelled`, `storageFailure`.
        public func accounts() async throws -> [Account] {
            try await queue.run { [service] in
                let library = try Self.prepare()
                var accounts: [Account] = []
                for key in try Self.accountKeys(library, service: service) {
                    guard let account = Account(storageKey: key) else { continue }
                    do {
                        if let record = try Self.record(library, service: service, account: account) {
                            accounts.append(record.account)
                        }
                    } catch let error as SessionError where error.code == .corruptCredentials {
                        continue
                    }
                }
                return accounts
            }
        }

        // MARK: - Calls, on the queue

        /// The loaded library, once a session bus is known to exist.
        private static func prepare() throws(SessionError) -> LibSecret {
            let library = try LibSecret.shared.get()
            let environment = ProcessInfo.processInfo.environment
            if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return library }
            // GDBus also finds the bus at $XDG_RUNTIME_DIR/bus (systemd user sessions). Checking first also keeps
            // it from autolaunching a stray bus through X11.
            if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
                var status = stat()
                if stat("\(runtime)/bus", &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK { return library }
            }
            throw SessionError(
                .storeUnavailable,
                "the Secret Service is reached over the D-Bus session bus, but DBUS_SESSION_BUS_ADDRESS is unset "
                    + "and there is no $XDG_RUNTIME_DIR/bus; log in to a desktop session, or run under "
                    + "dbus-run-session with a keyring daemon"
            )
        }

        private static func requireDefaultCollection(_ library: LibSecret) throws(SessionError) {
            let action = "checking for its default keyring"
            var error: UnsafeMutableRawPointer?
            let secretService = library.serviceGetSync(0, nil, &error)  // SECRET_SERVICE_NONE
            defer { if let secretService { library.objectUnrefFunction(secretService) } }
            if let error = library.takeError(error) { throw failure(error, action: action) }
            guard let secretService else {
                throw SessionError(.storeUnavailable, "the Secret Service did not answer while \(action)")
            }
            let collection = library.collectionForAliasSync(secretService, "default", 0, nil, &error)
            defer { if let collection { library.objectUnrefFunction(collection) } }
            if let error = library.takeError(error) { throw failure(error, action: action) }
            guard collection != nil else {
                throw SessionError(
                    .storeUnavailable,
                    "the Secret Service has no default keyring (no collection with the alias \"default\"); "
                        + "create one in the desktop's keyring manager, or start the keyring daemon with --unlock"
                )
            }
        }

        private static func withSchema<T>(
            _ library: LibSecret,
            _ body: (OpaquePointer) throws(SessionError) -> T
        ) throws(SessionError) -> T {
            // `SECRET_SCHEMA_ATTRIBUTE_STRING` is 0, so every value in the table of attribute types is NULL.
            let schema = try withStrings(library, ["service": nil, "account": nil]) { types throws(SessionError) in
                guard let schema = library.schemaNewv(schemaName, LibSecret.schemaFlagsNone, types) else {
                    throw SessionError(.storageFailure, "libsecret could not create the schema \(schemaName)")
                }
                return schema
            }
            defer { library.schemaUnref(schema) }
            return try body(schema)
        }

        private static func withAttributes<T>(
            _ library: LibSecret,
            _ attributes: [String: String],
            _ body: (OpaquePointer) throws(SessionError) -> T
        ) throws(SessionError) -> T {
            try withStrings(library, attributes.mapValues { Optional($0) }, body)
        }

        /// A `GHashTable` of C strings that lives for the duration of `body`.
        private static func withStrings<T>(
            _ library: LibSecret,
            _ pairs: [String: String?],
            _ body: (OpaquePointer) throws(SessionError) -> T
        ) throws(SessionError) -> T {
            guard let table = library.newStringTable() else {
                throw SessionError(.storageFailure, "GLib could not allocate a hash table")
            }
            var owned: [UnsafeMutablePointer<CChar>] = []
            defer {
                library.hashTableUnref(table)
                for string in owned { free(string) }
            }
            for (key, value) in pairs {
                guard let keyCopy = strdup(key) else { throw SessionError(.storageFailure, "out of memory") }
                owned.append(keyCopy)
                var valueCopy: UnsafeMutablePointer<CChar>?
                if let value {
                    guard let copy = strdup(value) else { throw SessionError(.storageFailure, "out of memory") }
                    owned.append(copy)
                    valueCopy = copy
                }
                _ = library.hashTableInsert(table, UnsafeMutableRawPointer(keyCopy), UnsafeMutableRawPointer(valueCopy))
            }
            return try body(table)
        }

        /// The secret of one item as bytes, wiped and freed by libsecret once copied.
        private static func lookup(_ library: LibSecret, service: String, key: String, action: String)
            throws(SessionError) -> Data?
        {
            try withSchema(library) { schema throws(SessionError) in
                try withAttributes(library, ["service": service, "account": key]) { attributes throws(SessionError) in
                    var error: UnsafeMutableRawPointer?
                    let password = library.passwordLookupv(schema, attributes, nil, &error)
                    if let error = library.takeError(error) {
                        if let password { library.passwordFree(password) }
                        throw failure(error, action: action)
                    }
                    guard let password else { return nil }
                    // `secret_password_free` clears the C copy before freeing it.
                    defer { library.passwordFree(password) }
                    return Data(bytes: password, count: strlen(password))
                }
            }
        }

        private static func record(_ library: LibSecret, service: String, account: Account) throws(SessionError)
            -> CredentialRecord?
        {
            let key = account.storageKey
            guard var bytes = try lookup(library, service: service, key: key, action: "reading the record \(key)")
            else {
                // A locked collection answers a lookup with nothing, not an error, when it cannot be unlocked (no
                // prompt can be shown): an item the search still lists, locked items included, is there but
                // unreadable now, and nothing may be concluded from its absence.
                if try accountKeys(library, service: service).contains(key) {
                    throw SessionError(
                        .storeUnavailable,
                        "the keyring holds the record \(key) but is locked and could not be unlocked while reading it")
                }
                return nil
            }
            defer { SecureWipe.wipe(&bytes) }
            return try CredentialRecordCoding.decode(bytes, for: account, source: "\(key) of service \(service)")
        }

        private static func clear(_ library: LibSecret, _ attributes: [String: String], action: String)
            throws(SessionError)
        {
            try withSchema(library) { schema throws(SessionError) in
                try withAttributes(library, attributes) { table throws(SessionError) in
                    var error: UnsafeMutableRawPointer?
                    // FALSE without an error means nothing matched, which is success for a delete.
                    _ = library.passwordClearv(schema, table, nil, &error)
                    if let error = library.takeError(error) { throw failure(error, action: action) }
                }
            }
        }

        /// The `account` attribute of every item of `service`, locked items included.
        private static func accountKeys(_ library: LibSecret, service: String) throws(SessionError) -> [String] {
            try withSchema(library) { schema throws(SessionError) in
                try withAttributes(library, ["service": service]) { table throws(SessionError) in
                    var error: UnsafeMutableRawPointer?
                    let items = library.passwordSearchv(schema, table, LibSecret.searchAll, nil, &error)
                    defer { library.freeObjectList(items) }
                    if let error = library.takeError(error) {
                        throw failure(error, action: "listing the records of service \(service)")
                    }
                    var keys: Set<String> = []
                    for item in library.elements(of: items) {
                        guard let attributes = library.retrievableGetAttributes(item) else { continue }
                        defer { library.hashTableUnref(attributes) }
                        let value = "account".withCString { library.hashTableLookup(attributes, $0) }
                        if let value { keys.insert(String(cString: value.assumingMemoryBound(to: CChar.self))) }
                    }
                    return Array(keys)
                }
            }
        }

        /// Maps a `GError` to a ``SessionError``; GError messages name objects and D-Bus errors, never secrets.
        private static func failure(_ error: (domain: String, code: Int32, message: String), action: String)
            -> SessionError
        {
            let detail = "\(action): \(error.message) (\(error.domain) \(error.code))"
            // GDBusError: SERVICE_UNKNOWN, NAME_HAS_NO_OWNER, NO_REPLY, IO_ERROR, NO_SERVER, TIMEOUT, NO_NETWORK,
            // DISCONNECTED, TIMED_OUT: nothing answered.
            let silent: Set<Int32> = [2, 3, 4, 5, 11, 12, 13, 15, 20]
            switch (error.domain, error.code) {
            case ("g-io-error-quark", 19):  // G_IO_ERROR_CANCELLED: a prompt was dismissed
                return SessionError(.userCancelled, "the Secret Service prompt was cancelled while \(detail)")
            case ("g-dbus-error-quark", let code) where silent.contains(code):
                return SessionError(.storeUnavailable, "the Secret Service did not answer while \(detail)")
            case ("g-dbus-error-quark", _), ("g-io-error-quark", _):
                return SessionError(.storeUnavailable, "the Secret Service could not be used while \(detail)")
            case ("secret-error", 2):  // SECRET_ERROR_IS_LOCKED
                return SessionError(
                    .storeUnavailable, "the keyring is locked and could not be unlocked while \(detail)")
            default:
                return SessionError(.storageFailure, "the Secret Service failed while \(detail)")
            }
        }
    }
#endif
