import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A fresh directory of its own for one test, removed when the test's body returns or throws.
enum TemporaryDirectory {
    /// Runs `body` with a new empty directory, then removes it and everything in it.
    ///
    /// - Parameter body: The test, given the directory.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw, or an error when the directory cannot be created.
    static func with<T>(_ body: (URL) async throws -> T) async throws -> T {
        var template = Array(
            URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("sessionkit-test-XXXXXX").path
                .utf8CString
        )
        guard let created = mkdtemp(&template) else {
            throw CocoaError(.fileWriteUnknown)
        }
        let url = URL(fileURLWithPath: String(cString: created), isDirectory: true).standardizedFileURL
        defer {
            // A test may have made parts read-only; give them back before removing.
            _ = chmod(url.path, 0o700)
            try? FileManager.default.removeItem(at: url)
        }
        return try await body(url)
    }
}
