import Foundation
import LoopbackPort

#if canImport(Glibc)
    import Glibc
#endif

/// A throwaway PostgreSQL cluster (Debian's `postgresql`) that a test starts on loopback: a data directory, a Unix
/// socket and a log in a temporary directory, a free TCP port on 127.0.0.1, removed with everything in it after.
///
/// Each ``start()`` makes a cluster of its own, so suites that run in parallel share nothing. TCP connections need
/// the password (`scram-sha-256`, superuser `sessionkit`), so a wrong one can be tested; the Unix socket trusts its
/// user, for the fixture's own statements. As root, the cluster runs as the `postgres` user (the server refuses
/// root), and its directory belongs to that user. A test fixture: `fsync` and `synchronous_commit` are off, since
/// nothing in it must outlive the machine.
///
/// `scripts/test` installs PostgreSQL and sets `SESSIONKIT_REQUIRE_POSTGRES=1`: a missing server then fails the
/// suite instead of skipping it. `SESSIONKIT_POSTGRES_BIN` names another folder of binaries. For the package's
/// tests; not a product.
///
/// - Important: Its methods block (they run `pg_ctl` and `psql` to their end): call them off Swift's cooperative
///   pool, as ``withRunning(_:)`` does for the start and the removal. It is `@unchecked Sendable` so a test can hand
///   it to such a thread: its one mutable state, whether the server runs, is read and written under `lock`.
package final class LoopbackPostgres: @unchecked Sendable {
    /// Why the cluster could not be made, started or stopped.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// The folder with `initdb`, `pg_ctl`, `postgres` and `psql`, when there is one: the newest Debian version's.
    package static var binaries: URL? {
        let environment = ProcessInfo.processInfo.environment
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let candidates =
            [environment["SESSIONKIT_POSTGRES_BIN"]].compactMap { $0 }
            + versions.sorted { $0.compare($1, options: .numeric) == .orderedDescending }.map {
                "/usr/lib/postgresql/\($0)/bin"
            }
        return candidates.first { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }.map {
            URL(fileURLWithPath: $0)
        }
    }

    /// Whether a missing PostgreSQL fails the suite (`SESSIONKIT_REQUIRE_POSTGRES=1`, set by `scripts/test`).
    package static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_POSTGRES"] == "1" }

    /// Whether suites that need PostgreSQL should run: it is there, or it must be (and its absence then fails).
    package static var shouldRun: Bool { binaries != nil || isRequired }

    /// The superuser, who owns everything in the cluster.
    package static let user = "sessionkit"

    /// The temporary directory: the data directory, the socket, the log.
    package let directory: URL
    /// The folder of the Unix socket (`host=` of a socket connection).
    package var socketDirectory: String { directory.path }
    /// The TCP port on 127.0.0.1.
    package let port: Int
    /// The superuser's password, made at random for this cluster.
    package let password: String
    /// The certificate authority that signed the server's TLS certificate (for `127.0.0.1` and `localhost`), made for
    /// this cluster: `sslrootcert=` of a connection that verifies the server.
    package var certificateAuthority: String { directory.appendingPathComponent("ca.crt").path }
    /// A connection string over TCP with the password; holds the password, so never print it.
    package var connectionString: String {
        "host=127.0.0.1 port=\(port) user=\(Self.user) password=\(password) dbname=postgres connect_timeout=5"
    }
    /// A connection string over the Unix socket, which needs no password.
    package var socketConnectionString: String {
        "host=\(socketDirectory) port=\(port) user=\(Self.user) dbname=postgres"
    }

    private let binaries: URL
    /// Guards `isRunning` and `isShutDown`, and orders the `pg_ctl` calls that change them.
    private let lock = NSRecursiveLock()
    private var isRunning = false
    private var isShutDown = false

    private init(directory: URL, port: Int, password: String, binaries: URL) {
        self.directory = directory
        self.port = port
        self.password = password
        self.binaries = binaries
    }

    deinit {
        shutdown()
    }

    /// Makes a cluster and starts it, blocking until it accepts connections.
    ///
    /// - Returns: The running cluster; ``shutdown()`` or its release removes it.
    /// - Throws: ``Failure`` when PostgreSQL is missing or does not start.
    package static func start() throws -> LoopbackPostgres {
        guard let binaries else {
            throw Failure(
                description: "PostgreSQL is not installed (SESSIONKIT_REQUIRE_POSTGRES=1): scripts/test installs "
                    + "postgresql; or set SESSIONKIT_POSTGRES_BIN to its bin folder")
        }
        var lastError = ""
        // A free port can be taken between choosing it and the server binding it: try a few.
        for _ in 0..<5 {
            let cluster = try make(binaries: binaries, port: try LoopbackPort.free())
            do {
                try cluster.startServer()
                cluster.startWatchdog()
                return cluster
            } catch {
                lastError = "\(error)"
                cluster.shutdown()
            }
        }
        throw Failure(description: "PostgreSQL did not start: \(lastError)")
    }

    /// Runs `body` with a cluster of its own, and removes the cluster after.
    ///
    /// - Parameter body: The test.
    /// - Returns: What `body` returns.
    /// - Throws: ``Failure`` when PostgreSQL is missing or does not start; what `body` throws.
    package static func withRunning<Result>(_ body: (LoopbackPostgres) async throws -> Result) async throws -> Result {
        let cluster = try await onThread { try start() }
        do {
            let result = try await body(cluster)
            try await onThread { cluster.shutdown() }
            return result
        } catch {
            try? await onThread { cluster.shutdown() }
            throw error
        }
    }

    /// Runs blocking work on a thread of its own, so it holds no thread of Swift's cooperative pool.
    ///
    /// - Parameter body: The blocking work.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package static func onThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) async throws -> Value
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    /// Stops the server (`pg_ctl stop -m fast`), for a test that takes the database away; ``restart()`` undoes it.
    ///
    /// - Throws: ``Failure`` when `pg_ctl` fails.
    package func stop() throws {
        lock.lock()
        defer { lock.unlock() }
        guard isRunning else { return }
        isRunning = false
        try run("pg_ctl", ["-D", dataDirectory, "-w", "-t", "30", "-m", "fast", "stop"])
    }

    /// Starts the stopped server again, on the same port with the same data.
    ///
    /// - Throws: ``Failure`` when it does not start.
    package func restart() throws {
        lock.lock()
        defer { lock.unlock() }
        guard !isRunning, !isShutDown else { return }
        try startServer()
    }

    /// Freezes the server (SIGSTOP to the postmaster and every process it started): connections stay open and
    /// new ones are accepted by the kernel, but nothing answers, as with a stopped machine or a partition that
    /// drops packets without a reset. ``thaw()`` undoes it; ``shutdown()`` thaws first.
    ///
    /// - Throws: ``Failure`` when the postmaster's process cannot be found.
    package func freeze() throws {
        try signalServer(SIGSTOP)
    }

    /// Lets a frozen server run again (SIGCONT).
    ///
    /// - Throws: ``Failure`` when the postmaster's process cannot be found.
    package func thaw() throws {
        try signalServer(SIGCONT)
    }

    /// Sends `signal` to the postmaster (the first line of `postmaster.pid`) and to each process whose parent it
    /// is, read from `/proc`.
    private func signalServer(_ signal: Int32) throws {
        let pidFile = (try? String(contentsOfFile: dataDirectory + "/postmaster.pid", encoding: .utf8)) ?? ""
        guard let first = pidFile.split(separator: "\n").first, let postmaster = pid_t(first) else {
            throw Failure(description: "no postmaster.pid in \(dataDirectory)")
        }
        var processes = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command's closing parenthesis: the state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { processes.append(pid) }
        }
        for pid in processes { _ = kill(pid, signal) }
    }

    /// Ends every connection but the fixture's own (`pg_terminate_backend`), as a server restart or a network
    /// failure would.
    ///
    /// - Throws: ``Failure`` when `psql` fails.
    package func terminateAllConnections() throws {
        try run(
            "psql",
            [
                "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", socketConnectionString, "-c",
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    + "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
            ])
    }

    /// Stops the server at once (`-m immediate`) and removes the directory. Idempotent.
    package func shutdown() {
        lock.lock()
        defer { lock.unlock() }
        guard !isShutDown else { return }
        isShutDown = true
        try? signalServer(SIGCONT)
        if isRunning {
            isRunning = false
            try? run("pg_ctl", ["-D", dataDirectory, "-w", "-t", "30", "-m", "immediate", "stop"])
        }
        try? FileManager.default.removeItem(at: directory)
    }

    private var dataDirectory: String { directory.appendingPathComponent("data").path }

    /// A new cluster in a new directory, not started.
    private static func make(binaries: URL, port: Int) throws -> LoopbackPostgres {
        // Under /tmp, not $TMPDIR: a Unix socket's path has a short limit, and as root the `postgres` user must
        // reach the folder, which a private $TMPDIR forbids.
        var template = Array("/tmp/sessionkit-pg-XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else { throw Failure(description: "mkdtemp failed (errno \(errno))") }
        let directory = URL(
            fileURLWithPath: String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        var bytes = [UInt8](repeating: 0, count: 18)
        for index in bytes.indices { bytes[index] = UInt8.random(in: 0...255) }
        let password = bytes.map { String(format: "%02x", $0) }.joined()
        let cluster = LoopbackPostgres(directory: directory, port: port, password: password, binaries: binaries)
        if getuid() == 0 {
            guard let owner = getpwnam("postgres") else {
                cluster.shutdown()
                throw Failure(description: "running as root, and there is no postgres user to run the server as")
            }
            _ = chown(directory.path, owner.pointee.pw_uid, owner.pointee.pw_gid)
        }
        do {
            let passwordFile = directory.appendingPathComponent("password").path
            guard FileManager.default.createFile(atPath: passwordFile, contents: Data(password.utf8)) else {
                throw Failure(description: "cannot write the password file")
            }
            defer { try? FileManager.default.removeItem(atPath: passwordFile) }
            _ = chmod(passwordFile, 0o600)
            if getuid() == 0, let owner = getpwnam("postgres") {
                _ = chown(passwordFile, owner.pointee.pw_uid, owner.pointee.pw_gid)
            }
            try cluster.run(
                "initdb",
                [
                    "-D", cluster.dataDirectory, "-U", user, "--pwfile=\(passwordFile)", "--auth-local=trust",
                    "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions",
                ])
            let settings = """

                # LoopbackPostgres: a throwaway test cluster on loopback, nothing of which must outlive the machine.
                listen_addresses = '127.0.0.1'
                port = \(port)
                unix_socket_directories = '\(directory.path)'
                fsync = off
                synchronous_commit = off
                full_page_writes = off
                shared_buffers = 16MB
                max_connections = 120
                lc_messages = 'C'
                ssl = on
                ssl_cert_file = 'server.crt'
                ssl_key_file = 'server.key'

                """
            try makeCertificates(in: directory, dataDirectory: URL(fileURLWithPath: cluster.dataDirectory))
            let configuration = URL(fileURLWithPath: cluster.dataDirectory).appendingPathComponent("postgresql.conf")
            let handle = try FileHandle(forWritingTo: configuration)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(settings.utf8))
            try handle.close()
        } catch {
            cluster.shutdown()
            throw error
        }
        return cluster
    }

    /// Starts a shell that outlives nothing it should: once this process is gone (a test run killed by its time
    /// limit, a crash, a mutant's timeout), it stops the server at once (SIGQUIT to the postmaster, whatever the
    /// server's pid is by then) and removes the directory; it exits by itself once ``shutdown()`` removed the directory.
    /// `pg_ctl start` detaches the server, so without it a killed test run leaves clusters running.
    private func startWatchdog() {
        let script = """
            while kill -0 \(getpid()) 2>/dev/null && [ -d '\(directory.path)' ]; do sleep 1; done
            [ -d '\(directory.path)' ] || exit 0
            pid=$(head -n 1 '\(dataDirectory)/postmaster.pid' 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
            sleep 2
            rm -rf '\(directory.path)'
            """
        // Started in the background of a shell that exits at once (and is reaped here): the watchdog is then no child
        // of this process, so its exit sends this process no SIGCHLD.
        _ = try? Self.spawnAndWait(["/bin/sh", "-c", "(\n\(script)\n) &"])
    }

    /// Runs `command` to its end with `posix_spawn`, not Foundation's `Process`, whose child handling this fixture
    /// keeps out of (and whose exit detection a server left running by `pg_ctl` would hold open): standard input
    /// from `/dev/null`, both outputs to `output`, every descriptor above standard error closed in the child.
    ///
    /// - Returns: Whether it exited with status zero.
    /// - Throws: ``Failure`` when it cannot be started.
    @discardableResult
    static func spawnAndWait(
        _ command: [String], environment: [String] = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
        output: String = "/dev/null", directory: String? = nil
    ) throws -> Bool {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // glibc's `_np` actions, which Swift's Glibc module does not declare.
        typealias ChangeDirectory =
            @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let changeDirectory = dlsym(nil, "posix_spawn_file_actions_addchdir_np"),
            let closeFrom = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        else { throw Failure(description: "glibc has no posix_spawn_file_actions_addclosefrom_np") }
        if let directory { _ = unsafeBitCast(changeDirectory, to: ChangeDirectory.self)(&actions, directory) }
        _ = unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for text in argv + envp { free(text) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
        guard spawned == 0 else { throw Failure(description: "cannot run \(command[0]) (error \(spawned))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        // Exited (no signal in the low bits) with status zero.
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }

    /// Makes a certificate authority in `directory` and, signed by it, the server's certificate and key in the data
    /// directory (the key `0600`, owned by the user the server runs as, as PostgreSQL requires).
    private static func makeCertificates(in directory: URL, dataDirectory: URL) throws {
        let openssl = ["/usr/bin/openssl", "/usr/local/bin/openssl"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        guard let openssl else { throw Failure(description: "openssl is not installed (scripts/test installs it)") }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Data("subjectAltName=IP:127.0.0.1,DNS:localhost\n".utf8).write(to: URL(fileURLWithPath: path("server.ext")))
        for arguments in [
            ["req", "-x509"] + curve + [
                "-keyout", path("ca.key"), "-out", path("ca.crt"), "-days", "2", "-subj", "/CN=LoopbackPostgres CA",
            ],
            ["req"] + curve + [
                "-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=127.0.0.1",
            ],
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("server.crt"), "-days", "2", "-extfile", path("server.ext"),
            ],
        ] {
            guard try spawnAndWait([openssl] + arguments) else {
                throw Failure(description: "openssl \(arguments[0]) failed")
            }
        }
        for name in ["server.crt", "server.key"] {
            let target = dataDirectory.appendingPathComponent(name).path
            try FileManager.default.copyItem(atPath: path(name), toPath: target)
            _ = chmod(target, 0o600)
            if getuid() == 0, let owner = getpwnam("postgres") {
                _ = chown(target, owner.pointee.pw_uid, owner.pointee.pw_gid)
            }
        }
    }

    /// Starts the server and waits until it accepts connections.
    private func startServer() throws {
        lock.lock()
        defer { lock.unlock() }
        try run(
            "pg_ctl",
            ["-D", dataDirectory, "-l", directory.appendingPathComponent("server.log").path, "-w", "-t", "30", "start"])
        isRunning = true
    }

    /// Runs one of the binaries to its end, as the `postgres` user when this process is root.
    ///
    /// With `posix_spawn` and every descriptor above standard error closed in the child, not `Process`: the server
    /// `pg_ctl start` leaves behind inherits what the child holds, and `Process` learns of its child's exit from a
    /// socket the child inherits, which the server would then hold open for as long as it runs.
    ///
    /// - Throws: ``Failure`` with the tail of its output when it exits with an error.
    private func run(_ tool: String, _ arguments: [String]) throws {
        let path = binaries.appendingPathComponent(tool).path
        let command =
            getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--", path] + arguments : [path] + arguments
        let outputPath = directory.appendingPathComponent("\(tool).out").path
        // The C locale, for messages in English; no PGPASSWORD or other setting of the caller's.
        let environment = ["LC_ALL=C", "LANG=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
        let succeeded = try Self.spawnAndWait(
            command, environment: environment, output: outputPath, directory: directory.path)
        guard succeeded else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            let log = (try? String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
            throw Failure(description: "\(tool) failed: \(text.suffix(1500)) \(log.suffix(1500))")
        }
    }

}
