// A process that SessionKit's tests start, drive through stdout, and kill with SIGKILL at random points, to
// check what a crash leaves on disk. Each mode prints `ready …` once set up, then one line per completed step,
// flushing after every line so the parent can count them through the pipe.
//
//   SessionKitCrashChild save-loop <directory>
//       Saves records of one account into a FileCredentialStore, forever. Record n is derived from n alone
//       (see `saveLoopRecord`), so a reader can tell a whole record from a mix of two. Prints `ready <n>`
//       where n is the counter of the record already there (0 for none), then `saved <n>` after each save.
//   SessionKitCrashChild secret-service-check <service>
//       Prints `available`, or `unavailable <code>: <message>` when the Secret Service cannot be used.
import Foundation
import SessionKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The account every save-loop record belongs to.
let saveLoopAccount = Account(issuer: "https://crash.sessionkit.invalid", subject: "crash-child")

/// Record `n` of the save loop: sizes vary with `n`, so a truncated or mixed record cannot pass for a whole one.
func saveLoopRecord(_ n: Int) -> CredentialRecord {
    let filler = Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(n % 26)))
    return CredentialRecord(
        account: saveLoopAccount,
        refreshToken: "refresh-\(n)-" + String(repeating: filler, count: (n * 7919) % 3000),
        accessToken: "access-\(n)",
        accessTokenExpiresAt: Date(timeIntervalSince1970: Double(n)),
        scope: "scope-\(n)",
        savedAt: Date(timeIntervalSince1970: Double(n) + 0.5)
    )
}

/// Writes one line straight to file descriptor 1: unbuffered, so the parent sees each line as it happens.
func emit(_ line: String) {
    var bytes = Array("\(line)\n".utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeMutableBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { exit(2) }
        offset += written
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("SessionKitCrashChild: \(message)\n".utf8))
    exit(1)
}

func saveLoop(directory: String) async {
    do {
        let store = try FileCredentialStore(directory: URL(fileURLWithPath: directory))
        var n = 0
        if let existing = try await store.load(for: saveLoopAccount) {
            guard let access = existing.accessToken, let counter = Int(access.dropFirst("access-".count)) else {
                fail("the existing record has no counter")
            }
            n = counter
        }
        emit("ready \(n)")
        while true {
            n += 1
            try await store.save(saveLoopRecord(n))
            emit("saved \(n)")
        }
    } catch {
        fail("\(error)")
    }
}

func secretServiceCheck(service: String) async {
    #if os(Linux)
        do {
            try await SecretServiceCredentialStore(service: service).checkAvailability()
            emit("available")
        } catch let error as SessionError {
            emit("unavailable \(error.code): \(error.message)")
        } catch {
            fail("\(error)")
        }
    #else
        emit("unavailable storeUnavailable: the Secret Service store exists on Linux only")
    #endif
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch (arguments.first, arguments.count) {
case ("save-loop", 2):
    await saveLoop(directory: arguments[1])
case ("secret-service-check", 2):
    await secretServiceCheck(service: arguments[1])
default:
    fail("usage: SessionKitCrashChild save-loop <directory> | secret-service-check <service>")
}
