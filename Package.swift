// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SessionKit",
    // `Mutex` (Synchronization) sets the floor on Apple platforms.
    platforms: [.iOS(.v18), .macOS(.v15), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "SessionKit", targets: ["SessionKit"]),
        .library(name: "SessionKitTesting", targets: ["SessionKitTesting"]),
        .executable(name: "sessionkit", targets: ["SessionKitCLI"]),
        .executable(name: "sessionkit-bench", targets: ["SessionKitBench"]),
    ],
    targets: [
        .target(name: "SessionKit"),
        .target(name: "SessionKitTesting", dependencies: ["SessionKit"]),
        // The command-line tool's logic (demo scenarios, audits, argument parsing), kept out of the executable so
        // tests can reach it; not a product.
        .target(name: "SessionKitCLICore", dependencies: ["SessionKit", "SessionKitTesting"]),
        .executableTarget(name: "SessionKitCLI", dependencies: ["SessionKitCLICore"]),
        .executableTarget(name: "SessionKitBench", dependencies: ["SessionKit", "SessionKitTesting"]),
        // A process the crash-consistency tests kill at random points; built for the tests, not shipped.
        .executableTarget(name: "SessionKitCrashChild", dependencies: ["SessionKit"]),
        .testTarget(
            name: "SessionKitTests", dependencies: ["SessionKit", "SessionKitTesting", "SessionKitCrashChild"]),
        .testTarget(name: "SessionKitTestingTests", dependencies: ["SessionKitTesting"]),
        .testTarget(
            name: "SessionKitCLITests", dependencies: ["SessionKitCLICore", "SessionKit", "SessionKitTesting"]),
    ],
    swiftLanguageModes: [.v6]
)
