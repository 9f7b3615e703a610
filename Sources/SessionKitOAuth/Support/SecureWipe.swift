import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Overwrites buffers that held credential material before they are released.
///
/// Copies Swift made earlier (a `String`, a copy-on-write duplicate) are out of reach; this clears the buffers
/// SessionKit owns at the boundary where secrets are serialized, written and read.
package enum SecureWipe {
    /// Zeroes the bytes of `data` in place, in a way the optimizer may not remove.
    ///
    /// - Parameter data: The buffer to clear.
    package static func wipe(_ data: inout Data) {
        data.withUnsafeMutableBytes { wipe($0) }
    }

    /// Zeroes the bytes of `bytes` in place, in a way the optimizer may not remove.
    ///
    /// - Parameter bytes: The buffer to clear.
    package static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { wipe($0) }
    }

    /// Zeroes `buffer`, in a way the optimizer may not remove.
    ///
    /// - Parameter buffer: The memory to clear.
    package static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        #if canImport(Darwin)
            _ = memset_s(base, buffer.count, 0, buffer.count)
        #else
            explicit_bzero(base, buffer.count)
        #endif
    }
}
