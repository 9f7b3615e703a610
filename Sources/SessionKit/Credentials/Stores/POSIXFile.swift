import Foundation
import SessionKitOAuth

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Thin wrappers over the POSIX calls ``FileCredentialStore`` needs, each reporting failure as the `errno`
/// text so callers can build a ``SessionError`` that says what the system refused.
enum POSIXFile {
    /// A failed system call: what was attempted and the system's reason.
    struct Failure: Error {
        var errorNumber: Int32
        var reason: String { String(cString: strerror(errorNumber)) }
    }

    /// Opens `path`, retrying on `EINTR`.
    ///
    /// - Parameters:
    ///   - path: The file.
    ///   - flags: `open(2)` flags; `O_CLOEXEC` is added.
    ///   - mode: The mode for a created file.
    /// - Returns: The descriptor.
    /// - Throws: ``Failure``.
    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(Failure) -> Int32 {
        while true {
            let descriptor = systemOpen(path, flags | O_CLOEXEC, mode)
            if descriptor >= 0 { return descriptor }
            if errno != EINTR { throw Failure(errorNumber: errno) }
        }
    }

    /// Writes all of `bytes` to `descriptor`, across short writes and `EINTR`.
    ///
    /// - Parameters:
    ///   - descriptor: An open file.
    ///   - bytes: What to write.
    /// - Throws: ``Failure``.
    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) {
        var offset = 0
        while offset < bytes.count {
            let written = systemWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure(errorNumber: errno)
            }
            offset += written
        }
    }

    /// Reads `descriptor` to its end, refusing to read more than `limit` bytes.
    ///
    /// - Parameters:
    ///   - descriptor: An open file.
    ///   - limit: The most bytes to accept.
    ///   - expectedSize: The size `fstat` reported; the buffer is reserved at once, so that growing it does
    ///     not leave unwiped copies of the contents in freed memory.
    /// - Returns: The bytes, or `nil` when the file holds more than `limit`.
    /// - Throws: ``Failure``.
    static func readAll(_ descriptor: Int32, limit: Int, expectedSize: Int) throws(Failure) -> Data? {
        var data = Data(capacity: min(max(expectedSize, 0), limit) + 1)
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        defer { SecureWipe.wipe(&chunk) }
        while true {
            let count = chunk.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                SecureWipe.wipe(&data)
                throw Failure(errorNumber: errno)
            }
            if count == 0 { return data }
            if data.count + count > limit {
                SecureWipe.wipe(&data)
                return nil
            }
            data.append(contentsOf: chunk[0..<count])
        }
    }

    /// Flushes a file's data and metadata to stable storage.
    ///
    /// On Apple platforms `fsync` stops at the drive's cache; `F_FULLFSYNC` asks the drive to flush it too.
    ///
    /// - Parameter descriptor: An open file or directory.
    /// - Throws: ``Failure``.
    static func synchronize(_ descriptor: Int32) throws(Failure) {
        #if canImport(Darwin)
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
        #endif
        while fsync(descriptor) != 0 {
            if errno != EINTR { throw Failure(errorNumber: errno) }
        }
    }

    /// Flushes a directory's entries, so that a rename or unlink in it survives a power loss.
    ///
    /// - Parameter path: The directory.
    /// - Throws: ``Failure``.
    static func synchronizeDirectory(_ path: String) throws(Failure) {
        let descriptor = try open(path, O_RDONLY | O_DIRECTORY)
        defer { _ = close(descriptor) }
        try synchronize(descriptor)
    }

    /// Removes `path`; a file that is already gone is not an error.
    ///
    /// - Parameter path: The file.
    /// - Throws: ``Failure``.
    static func unlinkIfPresent(_ path: String) throws(Failure) {
        if unlink(path) != 0 && errno != ENOENT { throw Failure(errorNumber: errno) }
    }
}

// The module-qualified calls, so the wrappers above can share the system functions' names.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Darwin)
        Darwin.open(path, flags, mode)
    #elseif canImport(Glibc)
        Glibc.open(path, flags, mode)
    #else
        Musl.open(path, flags, mode)
    #endif
}

private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Darwin)
        Darwin.write(descriptor, bytes, count)
    #elseif canImport(Glibc)
        Glibc.write(descriptor, bytes, count)
    #else
        Musl.write(descriptor, bytes, count)
    #endif
}

private func systemRead(_ descriptor: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Darwin)
        Darwin.read(descriptor, bytes, count)
    #elseif canImport(Glibc)
        Glibc.read(descriptor, bytes, count)
    #else
        Musl.read(descriptor, bytes, count)
    #endif
}
