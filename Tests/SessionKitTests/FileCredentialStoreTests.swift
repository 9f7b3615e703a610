import Foundation
import SessionKitTesting
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct FileCredentialStoreTests {
    private let alice = CredentialStoreContract.account(1)
    private let bob = CredentialStoreContract.account(2)

    // MARK: - Contract

    @Test(arguments: CredentialStoreContract.Check.allCases)
    func meetsTheStoreContract(_ check: CredentialStoreContract.Check) async throws {
        try await TemporaryDirectory.with { directory in
            try await check.run { try FileCredentialStore(directory: directory.appendingPathComponent("store")) }
        }
    }

    // MARK: - Layout and permissions

    /// `fsync` that fails for a reason other than an interruption is a failure with that reason, not a loop: a
    /// pipe cannot be synced (`EINVAL`), nor can what is no descriptor (`EBADF`).
    @Test func syncingWhatCannotBeSyncedFailsWithTheSystemsReason() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { _ = close(fds[0]) }
        func failure(_ descriptor: Int32) -> Int32? {
            do {
                try POSIXFile.synchronize(descriptor)
                return nil
            } catch {
                return error.errorNumber
            }
        }
        #expect(failure(fds[1]) == EINVAL)
        _ = close(fds[1])
        // Not the closed number itself: another test's descriptor may take it meanwhile.
        #expect(failure(-1) == EBADF)
    }

    /// What held a credential is zeroed in place, `Data` and byte arrays alike, whole.
    @Test func wipingZeroesEveryByteInPlace() {
        var data = Data("refresh-token-secret".utf8)
        var bytes = Array("access-token-secret".utf8)
        SecureWipe.wipe(&data)
        SecureWipe.wipe(&bytes)
        #expect(data.count == 20 && data.allSatisfy { $0 == 0 })
        #expect(bytes.count == 19 && bytes.allSatisfy { $0 == 0 })
    }

    #if canImport(Glibc)
        /// A batch of inotify events is read event by event, each name its `len` long (NUL-padded): the notice file
        /// is found after another file's event, in a slice that does not start at zero, and not when absent.
        @Test func aBatchOfDirectoryEventsIsReadEventByEvent() {
            func event(_ name: String, watch: Int32 = 1, mask: UInt32 = UInt32(IN_CLOSE_WRITE)) -> [UInt8] {
                var padded = Array(name.utf8) + [0]
                while padded.count % 16 != 0 { padded.append(0) }
                var header = inotify_event()
                header.wd = watch
                header.mask = mask
                header.len = UInt32(padded.count)
                return withUnsafeBytes(of: &header) { Array($0) } + padded
            }
            let wanted = Array(".refresh.lock-changes".utf8)
            let batch = event(".refresh.lock") + event("alice.record") + event(".refresh.lock-changes")
            let shifted = [UInt8](repeating: 9, count: 7) + batch
            #expect(StoreChangeWatcher.names(wanted, in: batch[...]))
            #expect(StoreChangeWatcher.names(wanted, in: shifted[7...]))
            #expect(!StoreChangeWatcher.names(wanted, in: (event(".refresh.lock") + event("alice.record"))[...]))
            #expect(StoreChangeWatcher.names(wanted, in: event("", mask: UInt32(IN_Q_OVERFLOW))[...]), "overflow")
            // An event whose name runs past the batch is refused, never read beyond it: cut the wanted one short.
            let whole = event(".refresh.lock-changes")
            for cut in [1, 8, 16] {
                #expect(!StoreChangeWatcher.names(wanted, in: whole.dropLast(cut)), "cut by \(cut)")
                #expect(
                    !StoreChangeWatcher.names(wanted, in: (shifted[7...] + whole.dropLast(cut)).dropFirst(batch.count)))
            }
        }
    #endif

    @Test func createsAPrivateDirectoryAndPrivateFiles() async throws {
        try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("a/b/credentials")
            let store = try FileCredentialStore(directory: directory)
            #expect(mode(of: directory) == 0o700)
            #expect(mode(of: root.appendingPathComponent("a")) == 0o700)
            try await store.save(CredentialStoreContract.fullRecord(for: alice))
            #expect(try listing(directory) == [alice.storageKey])
            #expect(mode(of: directory.appendingPathComponent(alice.storageKey)) == 0o600)
        }
    }

    /// A change watcher that stops closes what it opened (its inotify descriptor and stop pipe): a process that
    /// makes and drops managers on a shared store does not run out of descriptors. Twenty watchers would leak twenty;
    /// a few descriptors of slack absorb whatever else the process opens meanwhile.
    @Test func aStoppedChangeWatcherClosesItsDescriptors() async throws {
        #if os(Linux)
            try await TemporaryDirectory.with { root in
                let store = try FileCredentialStore(directory: root.appendingPathComponent("credentials"))
                let lock = try #require(store.refreshLock)
                let open: @Sendable () -> Int = {
                    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
                }
                let before = open()
                for _ in 0..<20 {
                    let watcher = try #require(StoreChangeWatcher(lock: lock) {})
                    watcher.stop()
                }
                let closed = await eventually(within: .seconds(30)) { open() <= before + 5 }
                #expect(closed, "descriptors left open: \(open() - before)")
            }
        #endif
    }

    /// A stopped watcher calls its handler no more, though the object lives on: a session that stopped listening
    /// (its manager gone) must not be ended by a notice meant for whoever listens now. A second watcher started
    /// first is the witness that each notice was delivered.
    @Test func aStoppedChangeWatcherCallsItsHandlerNoMore() async throws {
        try await TemporaryDirectory.with { root in
            let store = try FileCredentialStore(directory: root.appendingPathComponent("credentials"))
            let lock = try #require(store.refreshLock)
            let witnessed = Lock(0)
            let witness = try #require(StoreChangeWatcher(lock: lock) { witnessed.withLock { $0 += 1 } })
            defer { witness.stop() }
            let calls = Lock(0)
            let watcher = try #require(StoreChangeWatcher(lock: lock) { calls.withLock { $0 += 1 } })
            lock.announceChange()
            #expect(
                await eventually(within: .seconds(30)) {
                    witnessed.withLock { $0 } >= 1 && calls.withLock { $0 } >= 1
                })
            watcher.stop()
            let before = calls.withLock { $0 }
            for round in 2...3 {
                lock.announceChange()
                #expect(await eventually(within: .seconds(30)) { witnessed.withLock { $0 } >= round })
            }
            #expect(calls.withLock { $0 } == before, "the stopped watcher was told of a notice")
            withExtendedLifetime(watcher) {}
        }
    }

    /// A directory that belongs to another user is refused, whatever the two users' numbers: another user could
    /// read or swap the records there. (Runs where this process may hand a directory to another user, as root.)
    @Test func aDirectoryOfAnotherUserIsRefused() async throws {
        guard geteuid() == 0 else { return }
        try await TemporaryDirectory.with { root in
            for owner: uid_t in [12_345, 1] {
                let directory = root.appendingPathComponent("theirs-\(owner)")
                #expect(mkdir(directory.path, 0o700) == 0)
                #expect(chown(directory.path, owner, 0) == 0)
                let error = try #require(throws: SessionError.self) { try FileCredentialStore(directory: directory) }
                #expect(error.code == .storageFailure)
                #expect(error.message.contains("belongs to another user (uid \(owner))"), "\(error.message)")
            }
        }
    }

    /// Every descriptor a change watcher opens (its inotify descriptor and both ends of its stop pipe) is closed on
    /// exec: a child process the app starts inherits none, so it cannot hold the watcher's pipe open or read it.
    @Test func aChangeWatchersDescriptorsAreNotInherited() async throws {
        #if os(Linux)
            try await TemporaryDirectory.with { root in
                let store = try FileCredentialStore(directory: root.appendingPathComponent("credentials"))
                let lock = try #require(store.refreshLock)
                // Each open descriptor with what it is open on: a number reused for something else counts as new.
                let descriptors: @Sendable () -> Set<String> = {
                    Set(
                        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
                            name in
                            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"))
                                .map { "\(name) \($0)" }
                        })
                }
                let before = descriptors()
                let watcher = try #require(StoreChangeWatcher(lock: lock) {})
                defer { watcher.stop() }
                let opened = descriptors().subtracting(before).filter {
                    $0.contains(" pipe:") || $0.contains("inotify")
                }
                #expect(opened.count == 3, "the inotify descriptor and the pipe's two ends: \(opened.sorted())")
                for entry in opened {
                    let descriptor = try #require(Int32(entry.prefix { $0 != " " }))
                    #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0, "\(entry) is inherited")
                }
            }
        #endif
    }

    @Test func tightensAnExistingDirectoryWithWiderPermissions() async throws {
        try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("shared")
            #expect(mkdir(directory.path, 0o755) == 0)
            #expect(chmod(directory.path, 0o755) == 0)
            _ = try FileCredentialStore(directory: directory)
            #expect(mode(of: directory) == 0o700)
        }
    }

    /// A directory whose missing parent cannot be made (under `/proc`, where no one may create one, root included)
    /// is refused at that parent, which the message names.
    @Test func aParentThatCannotBeCreatedIsNamed() throws {
        #if os(Linux)
            let parent = "/proc/sessionkit-\(UUID().uuidString)"
            let error = try #require(throws: SessionError.self) {
                try FileCredentialStore(directory: URL(fileURLWithPath: parent + "/credentials"))
            }
            #expect(error.code == .storageFailure)
            #expect(error.message.contains("cannot be created (\(parent))"), "\(error.message)")
        #endif
    }

    @Test func refusesAPathThatIsAFile() async throws {
        try await TemporaryDirectory.with { root in
            let file = root.appendingPathComponent("file")
            #expect(FileManager.default.createFile(atPath: file.path, contents: Data("x".utf8)))
            let error = try #require(throws: SessionError.self) { try FileCredentialStore(directory: file) }
            #expect(error.code == .storageFailure)
            #expect(error.message.contains("not a directory"))
        }
    }

    /// The record format on disk is version 1: what this build writes says so, and reads back. Records written by
    /// the builds before it are version 1 too, so a new number is a deliberate change that comes with a migration,
    /// never a silent one that turns every stored record "corrupt" at the next launch.
    @Test func theRecordFormatWrittenIsVersionOne() throws {
        let account = Account(issuer: "https://id.sessionkit.test", subject: "alice")
        let record = CredentialRecord(
            account: account, refreshToken: "refresh-alice", savedAt: Date(timeIntervalSince1970: 0))
        let data = try CredentialRecordCoding.encode(record)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        var earlier = object
        earlier["version"] = 1
        let written = try JSONSerialization.data(withJSONObject: earlier)
        #expect(
            try CredentialRecordCoding.decode(written, for: account, source: "test").refreshToken == "refresh-alice")
    }

    @Test func anUnwritableDirectoryIsAStorageFailure() async throws {
        try await TemporaryDirectory.with { root in
            // A place nobody can create a directory in, root included (root writes through permission bits, and
            // a read-only directory of the developer's is made writable when the store tightens it to 0700): a path
            // whose parent is a regular file.
            let file = root.appendingPathComponent("regular-file")
            #expect(FileManager.default.createFile(atPath: file.path, contents: Data()))
            let directory = file.appendingPathComponent("credentials")
            let error = try #require(throws: SessionError.self) { try FileCredentialStore(directory: directory) }
            #expect(error.code == .storageFailure)
            #expect(error.message.contains(directory.path))
        }
    }

    @Test func aDirectoryThatStopsBeingWritableFailsTheSaveAndKeepsNothingHalfWritten() async throws {
        try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("credentials")
            let store = try FileCredentialStore(directory: directory)
            // Works as root too: the directory is replaced by a regular file, which nobody can create files in.
            try FileManager.default.removeItem(at: directory)
            #expect(FileManager.default.createFile(atPath: directory.path, contents: Data()))
            let record = CredentialStoreContract.fullRecord(for: alice)
            let error = try await #require(throws: SessionError.self) { try await store.save(record) }
            #expect(error.code == .storageFailure)
            #expect(error.message.contains("temporary file"))
            #expect(!error.message.contains(record.refreshToken!))
        }
    }

    @Test func anEmptyDirectoryHoldsNoRecords() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            #expect(try await store.accounts().isEmpty)
            #expect(try await store.load(for: alice) == nil)
            try await store.delete(for: alice)
            try await store.deleteAll()
            #expect(try listing(directory).isEmpty)
        }
    }

    @Test func refusesAccountsTooLongToNameAFile() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            let long = Account(issuer: "https://id.example", subject: String(repeating: "s", count: 400))
            let error = try await #require(throws: SessionError.self) {
                try await store.save(CredentialRecord(account: long, refreshToken: "r"))
            }
            #expect(error.code == .invalidInput)
        }
    }

    @Test func refusesToSaveARecordOfAnotherVersion() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            var record = CredentialStoreContract.fullRecord(for: alice)
            record.version = 7
            let error = try await #require(throws: SessionError.self) { try await store.save(record) }
            #expect(error.code == .invalidInput)
            #expect(try listing(directory).isEmpty)
        }
    }

    // MARK: - Bad records

    @Test func aRecordOfVersionZeroIsCorruptAndMovedAside() async throws {
        var json = try jsonObject(CredentialStoreContract.fullRecord(for: alice))
        json["version"] = 0
        try await expectCorrupt(JSONSerialization.data(withJSONObject: json), saying: "format version 0")
    }

    @Test func aRecordFromBeforeVersionsIsCorrupt() async throws {
        // An older format: no version, tokens at the top level.
        let old = Data(#"{"refresh_token":"old-secret-refresh","issuer":"https://id.example"}"#.utf8)
        try await expectCorrupt(old, saying: "no format version", secret: "old-secret-refresh")
    }

    @Test func aRecordMissingFieldsIsCorrupt() async throws {
        var json = try jsonObject(CredentialStoreContract.fullRecord(for: alice))
        json["account"] = nil
        try await expectCorrupt(JSONSerialization.data(withJSONObject: json), saying: "missing account")
    }

    @Test func aTruncatedRecordIsCorrupt() async throws {
        let record = CredentialStoreContract.fullRecord(for: alice)
        let whole = try JSONEncoder().encode(record)
        for length in [0, 1, whole.count / 2, whole.count - 1] {
            try await expectCorrupt(whole.prefix(length), saying: "truncated", secret: record.refreshToken!)
        }
    }

    @Test func garbageBytesAreCorrupt() async throws {
        var generator = SeededGenerator(seed: 0x5e55_10e0)
        for _ in 0..<20 {
            let garbage = Data(
                (0..<Int.random(in: 1...512, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator)
                })
            try await expectCorrupt(garbage, saying: "not a JSON credential record")
        }
    }

    @Test func aRecordFiledUnderAnotherAccountsNameIsCorrupt() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            try await store.save(CredentialStoreContract.fullRecord(for: bob))
            // Bob's record, moved to where Alice's belongs.
            #expect(
                rename(
                    directory.appendingPathComponent(bob.storageKey).path,
                    directory.appendingPathComponent(alice.storageKey).path) == 0)
            #expect(try await store.accounts().isEmpty)
            let error = try await #require(throws: SessionError.self) { try await store.load(for: alice) }
            #expect(error.code == .corruptCredentials)
            #expect(error.message.contains("another account"))
            #expect(try await store.load(for: alice) == nil)
            #expect(try await store.load(for: bob) == nil)
        }
    }

    @Test func aSymbolicLinkInPlaceOfARecordIsCorrupt() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            try await store.save(CredentialStoreContract.fullRecord(for: bob))
            #expect(
                symlink(
                    directory.appendingPathComponent(bob.storageKey).path,
                    directory.appendingPathComponent(alice.storageKey).path) == 0)
            let error = try await #require(throws: SessionError.self) { try await store.load(for: alice) }
            #expect(error.code == .corruptCredentials)
            #expect(try await store.load(for: bob) == CredentialStoreContract.fullRecord(for: bob))
        }
    }

    // MARK: - What the directory holds

    @Test func listingIgnoresTemporaryCorruptAndForeignFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            try await store.save(CredentialStoreContract.fullRecord(for: alice))
            try write("{}", to: directory, named: ".\(bob.storageKey).tmp-1-abc")
            try write("{}", to: directory, named: "\(bob.storageKey).corrupt-20250101T000000Z")
            try write("{}", to: directory, named: "notes.txt")
            #expect(try await store.accounts() == [alice])
            try await store.deleteAll()
            // Only the file the store did not write is left.
            #expect(try listing(directory) == ["notes.txt"])
        }
    }

    @Test func deleteLeavesNothingOfTheAccountInTheDirectory() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            try await store.save(CredentialStoreContract.fullRecord(for: alice))
            try await store.save(CredentialStoreContract.fullRecord(for: bob))
            // What an interrupted save and an earlier corrupt read leave behind.
            try write("{}", to: directory, named: ".\(alice.storageKey).tmp-99-dead")
            try write("{}", to: directory, named: "\(alice.storageKey).corrupt-20250101T000000Z")
            try write("{}", to: directory, named: ".\(bob.storageKey).tmp-99-beef")
            try await store.delete(for: alice)
            let remaining = try listing(directory)
            #expect(!remaining.contains { $0.contains(alice.storageKey) })
            #expect(remaining == [".\(bob.storageKey).tmp-99-beef", bob.storageKey].sorted())
            try await store.deleteAll()
            #expect(try listing(directory).isEmpty)
        }
    }

    @Test func aSecondStoreOnTheSameDirectoryReadsTheRecords() async throws {
        try await TemporaryDirectory.with { directory in
            try await FileCredentialStore(directory: directory).save(CredentialStoreContract.fullRecord(for: alice))
            let reopened = try FileCredentialStore(directory: directory)
            #expect(try await reopened.load(for: alice) == CredentialStoreContract.fullRecord(for: alice))
        }
    }

    /// A directory this process may no longer read (its permissions changed under a running app, a sandbox closed
    /// it) is not an empty store: every read throws `storeUnavailable` — the listing too, which restore starts
    /// from — and a restore through a manager signs nobody out: its state is `failed(storeUnavailable)`, the
    /// record stays as it was, and once the directory can be read the retried restore brings the session back.
    ///
    /// The reads run in a child process for which mode 000 means what it says: run as root (CI), the child starts
    /// through `setpriv` without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH in its bounding set, so root obeys the
    /// permission bits; run as anyone else, it needs nothing. The directory is made unreadable only after the store
    /// opened it, since opening tightens a directory of the process's own to 0700.
    @Test func aDirectoryThisProcessCannotReadIsUnavailableForEveryReadAndSignsNobodyOut() async throws {
        let child = try #require(ChildProcess.crashChild, "SessionKitCrashChild was not found; build it")
        var launcher = (executable: child, arguments: [String]())
        if geteuid() == 0 {
            let setpriv = try #require(ChildProcess.tool("setpriv"), "setpriv (util-linux) is needed when run as root")
            launcher = (setpriv, ["--bounding-set", "-dac_override,-dac_read_search", child.path])
        }
        try await TemporaryDirectory.with { root in
            let directory = root.appendingPathComponent("credentials")
            let account = Account(issuer: "https://unreadable.sessionkit.invalid", subject: "alice")
            let record = CredentialRecord(
                account: account, refreshToken: "rt-alice-1", accessToken: "at-alice-1",
                accessTokenExpiresAt: Date().addingTimeInterval(3600), scope: "scope-alice", savedAt: Date())
            try await FileCredentialStore(directory: directory).save(record)
            let stored = try Data(contentsOf: directory.appendingPathComponent(account.storageKey))
            let process = try ChildProcess(
                launcher.executable,
                launcher.arguments + ["unreadable-store", directory.path, account.issuer, account.subject],
                writableInput: true)
            defer { _ = chmod(directory.path, 0o700) }
            #expect(process.readLine() == "ready")
            #expect(chmod(directory.path, 0) == 0)
            process.send("go")
            #expect(process.readLine() == "load storeUnavailable")
            #expect(process.readLine() == "accounts storeUnavailable")
            let restored = process.readLine()
            #expect(restored?.hasPrefix("restored failed(") == true, "\(restored ?? "nothing")")
            #expect(restored?.contains("storeUnavailable") == true, "\(restored ?? "nothing")")
            #expect(process.readLine() == "sessions 0")
            // Nothing was deleted while the directory could not be read.
            #expect(chmod(directory.path, 0o700) == 0)
            #expect(try Data(contentsOf: directory.appendingPathComponent(account.storageKey)) == stored)
            process.send("readable")
            let final = process.readLine()
            #expect(final?.hasPrefix("final active(") == true && final?.hasSuffix(" 1") == true, "\(final ?? "")")
            let (rest, status) = process.finish()
            #expect(status == 0, "\(rest)")
            let kept = try await FileCredentialStore(directory: directory).load(for: account)
            #expect(kept?.refreshToken == record.refreshToken && kept?.accessToken == record.accessToken)
        }
    }

    // MARK: - Helpers

    /// Files `bytes` as Alice's record, then checks that loading it fails as corrupt, moves it aside as a
    /// private file, names the problem, never quotes `secret`, and that the next load finds nothing.
    private func expectCorrupt(_ bytes: Data, saying problem: String, secret: String? = nil) async throws {
        try await TemporaryDirectory.with { directory in
            let store = try FileCredentialStore(directory: directory)
            try await store.save(CredentialStoreContract.fullRecord(for: bob))
            #expect(
                FileManager.default.createFile(
                    atPath: directory.appendingPathComponent(alice.storageKey).path, contents: bytes))
            #expect(try await store.accounts() == [bob])
            let error = try await #require(throws: SessionError.self) { try await store.load(for: alice) }
            #expect(error.code == .corruptCredentials)
            #expect(error.message.contains(problem), "\(error.message)")
            #expect(error.message.contains("moved aside"))
            if let secret { #expect(!error.message.contains(secret)) }
            let aside = try listing(directory).filter { $0.hasPrefix("\(alice.storageKey).corrupt-") }
            #expect(aside.count == 1)
            if let name = aside.first { #expect(mode(of: directory.appendingPathComponent(name)) == 0o600) }
            #expect(try await store.load(for: alice) == nil)
            #expect(try await store.load(for: bob) == CredentialStoreContract.fullRecord(for: bob))
            try await store.delete(for: alice)
            #expect(try listing(directory) == [bob.storageKey])
        }
    }

    private func jsonObject(_ record: CredentialRecord) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: JSONEncoder().encode(record)) as? [String: Any])
    }

    private func write(_ text: String, to directory: URL, named name: String) throws {
        try Data(text.utf8).write(to: directory.appendingPathComponent(name))
    }

    private func listing(_ directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    private func mode(of url: URL) -> mode_t? {
        var status = stat()
        guard lstat(url.path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }
}
