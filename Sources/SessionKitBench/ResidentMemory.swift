import Foundation

/// This process's resident memory, as the kernel counts it (`/proc/self/statm`, Linux only).
enum ResidentMemory {
    /// Resident bytes now, or `nil` where `/proc/self/statm` cannot be read.
    static func bytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The number of open file descriptors (`/proc/self/fd`), or `nil` where it cannot be listed.
    static func openDescriptors() -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map(\.count)
    }
}
