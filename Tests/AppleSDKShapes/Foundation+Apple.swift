// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation
// What Apple's Foundation has and swift-corelibs-foundation (Linux's) lacks or marks unavailable, for
// `scripts/apple-typecheck`, which imports this module (as `AppleFoundationShapes`) into every file it checks:
// declarations only, nothing here runs.
//
// SDK followed: iOS 26 / macOS 26 (Xcode 26), transcribed from Foundation's documentation on developer.apple.com.
// On Apple platforms `import Foundation` brings URLSession, which Linux keeps in FoundationNetworking; this module
// re-exports FoundationNetworking for that reason. Only what the Apple-only files use is here.

@_exported import Foundation
@_exported import FoundationNetworking

extension URLSession {
    /// All the session's tasks not yet finished (`getAllTasks(completionHandler:)` in Objective-C).
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    public var allTasks: [URLSessionTask] {
        get async { shape() }
    }
}

extension URLSessionConfiguration {
    /// A configuration for transfers that continue while the app is suspended or not running.
    @available(iOS 8.0, macOS 10.10, tvOS 9.0, watchOS 2.0, *)
    public class func background(withIdentifier identifier: String) -> URLSessionConfiguration { shape() }
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
