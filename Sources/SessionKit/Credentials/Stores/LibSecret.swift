import SessionKitOAuth

#if os(Linux)
    import Foundation
    #if canImport(Glibc)
        import Glibc
    #elseif canImport(Musl)
        import Musl
    #endif

    /// libsecret and the few GLib functions it needs, loaded at run time with `dlopen`.
    ///
    /// Loading at run time keeps SessionKit free of a link-time dependency: the package builds on a machine
    /// without libsecret, and only ``SecretServiceCredentialStore`` fails, with a message naming what is missing.
    /// The libraries stay loaded for the life of the process. Signatures are those of libsecret 0.20 and
    /// GLib 2.x headers (`secret-password.h`, `secret-schema.h`, `secret-retrievable.h`, `ghash.h`, `glist.h`).
    struct LibSecret: Sendable {
        // Opaque C pointers travel as `OpaquePointer`/raw pointers; only these function values are stored.
        typealias SchemaNewv = @convention(c) (UnsafePointer<CChar>?, Int32, OpaquePointer?) -> OpaquePointer?
        typealias SchemaUnref = @convention(c) (OpaquePointer?) -> Void
        typealias PasswordStorev =
            @convention(c) (
                OpaquePointer?, OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
            ) -> Int32
        typealias PasswordLookupv =
            @convention(c) (
                OpaquePointer?, OpaquePointer?, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
            ) -> UnsafeMutablePointer<CChar>?
        typealias PasswordClearv =
            @convention(c) (
                OpaquePointer?, OpaquePointer?, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
            ) -> Int32
        typealias PasswordSearchv =
            @convention(c) (
                OpaquePointer?, OpaquePointer?, Int32, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?
            ) -> UnsafeMutableRawPointer?
        typealias PasswordFree = @convention(c) (UnsafeMutablePointer<CChar>?) -> Void
        typealias RetrievableGetAttributes = @convention(c) (UnsafeMutableRawPointer?) -> OpaquePointer?
        typealias HashTableNew = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> OpaquePointer?
        typealias HashTableInsert =
            @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32
        typealias HashTableLookup = @convention(c) (OpaquePointer?, UnsafeRawPointer?) -> UnsafeMutableRawPointer?
        typealias HashTableUnref = @convention(c) (OpaquePointer?) -> Void
        typealias ErrorFree = @convention(c) (UnsafeMutableRawPointer?) -> Void
        typealias ListFreeFull = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void
        typealias QuarkToString = @convention(c) (UInt32) -> UnsafePointer<CChar>?
        typealias ServiceGetSync =
            @convention(c) (Int32, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> OpaquePointer?
        typealias CollectionForAliasSync =
            @convention(c) (
                OpaquePointer?, UnsafePointer<CChar>?, Int32, OpaquePointer?,
                UnsafeMutablePointer<UnsafeMutableRawPointer?>?
            ) -> OpaquePointer?
        typealias ObjectUnref = @convention(c) (OpaquePointer?) -> Void

        /// `SECRET_SCHEMA_NONE`: items also carry `xdg:schema`, and searches match it.
        static let schemaFlagsNone: Int32 = 0
        /// `SECRET_SEARCH_ALL`: every matching item, not only the first.
        static let searchAll: Int32 = 1 << 1

        let schemaNewv: SchemaNewv
        let schemaUnref: SchemaUnref
        let passwordStorev: PasswordStorev
        let passwordLookupv: PasswordLookupv
        let passwordClearv: PasswordClearv
        let passwordSearchv: PasswordSearchv
        let passwordFree: PasswordFree
        let retrievableGetAttributes: RetrievableGetAttributes
        let hashTableNew: HashTableNew
        let hashTableInsert: HashTableInsert
        let hashTableLookup: HashTableLookup
        let hashTableUnref: HashTableUnref
        let errorFree: ErrorFree
        let listFreeFull: ListFreeFull
        let quarkToString: QuarkToString
        let serviceGetSync: ServiceGetSync
        let collectionForAliasSync: CollectionForAliasSync
        let objectUnrefFunction: ObjectUnref
        /// `g_str_hash`, `g_str_equal` and `g_object_unref`, passed to C as callbacks; kept as addresses
        /// because raw pointers are not `Sendable`.
        private let stringHash: UInt
        private let stringEqual: UInt
        private let objectUnref: UInt

        /// The libraries, loaded once on first use; a failure is remembered and reported to every caller.
        static let shared: Result<LibSecret, SessionError> = Result { () throws(SessionError) in try load() }

        private static func load() throws(SessionError) -> LibSecret {
            let secret = try open("libsecret-1.so.0", package: "libsecret-1-0")
            let glib = try open("libglib-2.0.so.0", package: "libglib2.0-0")
            let gobject = try open("libgobject-2.0.so.0", package: "libglib2.0-0")
            func symbol<F>(_ library: (handle: UnsafeMutableRawPointer, name: String), _ name: String, as _: F.Type)
                throws(SessionError) -> F
            {
                unsafeBitCast(try address(library, name), to: F.self)
            }
            return LibSecret(
                schemaNewv: try symbol(secret, "secret_schema_newv", as: SchemaNewv.self),
                schemaUnref: try symbol(secret, "secret_schema_unref", as: SchemaUnref.self),
                passwordStorev: try symbol(secret, "secret_password_storev_sync", as: PasswordStorev.self),
                passwordLookupv: try symbol(secret, "secret_password_lookupv_sync", as: PasswordLookupv.self),
                passwordClearv: try symbol(secret, "secret_password_clearv_sync", as: PasswordClearv.self),
                passwordSearchv: try symbol(secret, "secret_password_searchv_sync", as: PasswordSearchv.self),
                passwordFree: try symbol(secret, "secret_password_free", as: PasswordFree.self),
                retrievableGetAttributes: try symbol(
                    secret,
                    "secret_retrievable_get_attributes",
                    as: RetrievableGetAttributes.self
                ),
                hashTableNew: try symbol(glib, "g_hash_table_new", as: HashTableNew.self),
                hashTableInsert: try symbol(glib, "g_hash_table_insert", as: HashTableInsert.self),
                hashTableLookup: try symbol(glib, "g_hash_table_lookup", as: HashTableLookup.self),
                hashTableUnref: try symbol(glib, "g_hash_table_unref", as: HashTableUnref.self),
                errorFree: try symbol(glib, "g_error_free", as: ErrorFree.self),
                listFreeFull: try symbol(glib, "g_list_free_full", as: ListFreeFull.self),
                quarkToString: try symbol(glib, "g_quark_to_string", as: QuarkToString.self),
                serviceGetSync: try symbol(secret, "secret_service_get_sync", as: ServiceGetSync.self),
                collectionForAliasSync: try symbol(
                    secret,
                    "secret_collection_for_alias_sync",
                    as: CollectionForAliasSync.self
                ),
                objectUnrefFunction: try symbol(gobject, "g_object_unref", as: ObjectUnref.self),
                stringHash: UInt(bitPattern: try address(glib, "g_str_hash")),
                stringEqual: UInt(bitPattern: try address(glib, "g_str_equal")),
                objectUnref: UInt(bitPattern: try address(gobject, "g_object_unref"))
            )
        }

        private static func open(_ name: String, package: String) throws(SessionError) -> (
            handle: UnsafeMutableRawPointer, name: String
        ) {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
                let reason = dlerror().map { String(cString: $0) } ?? "not found"
                throw SessionError(
                    .storeUnavailable,
                    "the Secret Service store needs \(name), which could not be loaded (\(reason)); "
                        + "install it (Debian/Ubuntu: \(package))"
                )
            }
            return (handle, name)
        }

        private static func address(_ library: (handle: UnsafeMutableRawPointer, name: String), _ symbol: String)
            throws(SessionError) -> UnsafeMutableRawPointer
        {
            guard let address = dlsym(library.handle, symbol) else {
                throw SessionError(
                    .storeUnavailable,
                    "\(library.name) has no \(symbol); the Secret Service store needs libsecret 0.19 or later"
                )
            }
            return address
        }

        // MARK: - Calling conventions of GLib

        /// A new `GHashTable` of C strings (`g_str_hash`, `g_str_equal`), not owning its keys or values.
        func newStringTable() -> OpaquePointer? {
            hashTableNew(
                UnsafeMutableRawPointer(bitPattern: stringHash), UnsafeMutableRawPointer(bitPattern: stringEqual))
        }

        /// Frees a `GList` of `GObject`s, unreferencing every element.
        ///
        /// - Parameter list: The list, or `nil`.
        func freeObjectList(_ list: UnsafeMutableRawPointer?) {
            guard let list else { return }
            listFreeFull(list, UnsafeMutableRawPointer(bitPattern: objectUnref))
        }

        /// The `data` pointers of a `GList` (`struct { gpointer data; GList *next; GList *prev; }`).
        ///
        /// - Parameter list: The list's first node, or `nil`.
        /// - Returns: Each node's data, in order.
        func elements(of list: UnsafeMutableRawPointer?) -> [UnsafeMutableRawPointer?] {
            var elements: [UnsafeMutableRawPointer?] = []
            var node = list
            while let current = node {
                elements.append(current.load(as: UnsafeMutableRawPointer?.self))
                node = current.load(
                    fromByteOffset: MemoryLayout<UnsafeRawPointer>.stride, as: UnsafeMutableRawPointer?.self)
            }
            return elements
        }

        /// Reads and frees a `GError` (`struct { GQuark domain; gint code; gchar *message; }`).
        ///
        /// - Parameter error: The error, or `nil`.
        /// - Returns: Its domain name, code and message, or `nil` when there was no error.
        func takeError(_ error: UnsafeMutableRawPointer?) -> (domain: String, code: Int32, message: String)? {
            guard let error else { return nil }
            defer { errorFree(error) }
            let domain = error.load(fromByteOffset: 0, as: UInt32.self)
            let code = error.load(fromByteOffset: 4, as: Int32.self)
            let message = error.load(fromByteOffset: 8, as: UnsafePointer<CChar>?.self)
            return (
                quarkToString(domain).map { String(cString: $0) } ?? "unknown", code,
                message.map { String(cString: $0) } ?? "no message"
            )
        }
    }
#endif
