import SessionKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes text to a file descriptor with `write(2)`, retrying short writes and `EINTR`, and remembers the first
/// failure instead of trapping (`FileHandle.write` stops the process on `EBADF`, `ENOSPC` or `EPIPE`).
final class DescriptorWriter: Sendable {
    private let descriptor: Int32
    private let firstFailure = Lock<String?>(nil)

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    /// Why a write failed, the first time one did.
    var failure: String? { firstFailure.withLock { $0 } }

    /// Records `reason` as the failure, when there is none yet: nothing more is written.
    func fail(_ reason: String) {
        firstFailure.withLock { $0 = $0 ?? reason }
    }

    /// Writes `text`; after a failure, writes nothing more.
    func write(_ text: String) {
        guard firstFailure.withLock({ $0 == nil }) else { return }
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { buffer in
                #if canImport(Glibc)
                    Glibc.write(descriptor, buffer.baseAddress, buffer.count)
                #else
                    Darwin.write(descriptor, buffer.baseAddress, buffer.count)
                #endif
            }
            if written < 0 {
                let code = errno
                if code == EINTR { continue }
                firstFailure.withLock { $0 = $0 ?? String(cString: strerror(code)) }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }
}
