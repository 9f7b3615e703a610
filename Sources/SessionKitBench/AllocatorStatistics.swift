import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What glibc's allocator holds, read through `malloc_info` and `malloc_trim`, which Swift's Glibc module does not
/// import (they are looked up by name). Resident memory alone cannot tell a leak from free memory the allocator
/// keeps in its arenas for later: these can.
enum AllocatorStatistics {
    private typealias Trim = @convention(c) (Int) -> Int32
    private typealias Info = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32

    private static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        #if canImport(Glibc)
            guard let handle = dlopen(nil, RTLD_NOW), let address = dlsym(handle, name) else { return nil }
            return unsafeBitCast(address, to: type)
        #else
            return nil
        #endif
    }

    /// Returns the allocator's free memory to the kernel (`malloc_trim(0)`); `false` where that is not available.
    @discardableResult
    static func returnFreeMemory() -> Bool {
        guard let trim = symbol("malloc_trim", as: Trim.self) else { return false }
        _ = trim(0)
        return true
    }

    /// Bytes the program has allocated and not freed (all arenas, and blocks mapped on their own), or `nil` where
    /// `malloc_info` is not available.
    static func bytesInUse() -> Int? {
        #if canImport(Glibc)
            guard let info = symbol("malloc_info", as: Info.self) else { return nil }
            var buffer: UnsafeMutablePointer<CChar>?
            var size = 0
            guard let stream = open_memstream(&buffer, &size) else { return nil }
            let status = info(0, stream)
            fclose(stream)
            defer { free(buffer) }
            guard status == 0, let buffer else { return nil }
            return bytesInUse(fromReport: String(cString: buffer))
        #else
            return nil
        #endif
    }

    /// Reads the totals at the end of a `malloc_info` report: memory taken from the system, minus the free chunks
    /// ("fast" and "rest"), plus blocks mapped on their own ("mmap"), which the system figure leaves out.
    static func bytesInUse(fromReport report: String) -> Int? {
        // The per-heap sections come first; the totals follow the last `</heap>`.
        guard let totals = report.range(of: "</heap>", options: .backwards).map({ report[$0.upperBound...] })
        else { return nil }
        func size(_ element: String, _ type: String) -> Int? {
            guard let start = totals.range(of: "<\(element) type=\"\(type)\"") else { return nil }
            let rest = totals[start.upperBound...]
            guard let attribute = rest.range(of: "size=\"") else { return nil }
            return Int(rest[attribute.upperBound...].prefix { $0.isNumber })
        }
        guard let system = size("system", "current"), let fast = size("total", "fast"),
            let free = size("total", "rest"), let mapped = size("total", "mmap")
        else { return nil }
        return system - fast - free + mapped
    }
}
