// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SessionKit",
    // `Observable` (Observation, which `SessionScoped` and `SessionManager` adopt) sets the floor on Apple platforms.
    // Locks are the package's own `Lock` (pthread), not `Mutex` or `Atomic`, which would raise it to iOS 18.
    platforms: [.iOS(.v17), .macOS(.v14), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "SessionKit", targets: ["SessionKit"]),
        .library(name: "SessionKitOAuth", targets: ["SessionKitOAuth"]),
        .library(name: "SessionKitTesting", targets: ["SessionKitTesting"]),
        .library(name: "SessionKitPostgres", targets: ["SessionKitPostgres"]),
        .executable(name: "sessionkit", targets: ["SessionKitCLI"]),
        .executable(name: "sessionkit-bench", targets: ["SessionKitBench"]),
    ],
    targets: [
        // OpenSSL 3's libcrypto, SessionKit's cryptography on Linux; Apple platforms use CryptoKit and Security.
        .systemLibrary(
            name: "CSessionKitCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // libcurl, the transport SessionKit drives itself on Linux (one curl_multi per process, on its own event
        // loop); Apple platforms keep URLSession.
        .systemLibrary(
            name: "CSessionKitCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // libpq, the PostgreSQL client under the server-side credential store (SessionKitPostgres); a product of its
        // own, so no app on any platform builds it unless it asks for that store.
        .systemLibrary(
            name: "CSessionKitPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The protocols (OAuth 2.0, OpenID Connect, DPoP, JOSE, the platform's cryptography) and the transport
        // bridge under them; it knows nothing of sessions, and SessionKit re-exports it.
        .target(
            name: "SessionKitOAuth",
            dependencies: [
                .target(name: "CSessionKitCrypto", condition: .when(platforms: [.linux])),
                .target(name: "CSessionKitCurl", condition: .when(platforms: [.linux])),
            ]
        ),
        .target(name: "SessionKit", dependencies: ["SessionKitOAuth"]),
        .target(name: "SessionKitTesting", dependencies: ["SessionKit"]),
        // A credential store in PostgreSQL for servers: libpq connections and their pool, the store on top.
        .target(name: "SessionKitPostgres", dependencies: ["SessionKit", "CSessionKitPostgres"]),
        // The command-line tool's logic (demo scenarios, audits, argument parsing), kept out of the executable so
        // tests can reach it; not a product.
        .target(name: "SessionKitCLICore", dependencies: ["SessionKit", "SessionKitTesting"]),
        .executableTarget(name: "SessionKitCLI", dependencies: ["SessionKitCLICore"]),
        .executableTarget(
            name: "SessionKitBench",
            dependencies: [
                "SessionKit", "SessionKitTesting",
                // The PostgreSQL store measured beside the file store, on a throwaway cluster.
                "SessionKitPostgres", "LoopbackPostgres",
                // Raw libcurl easy handles, the floor the libcurl transport is measured against.
                .target(name: "CSessionKitCurl", condition: .when(platforms: [.linux])),
            ]),
        // A process the crash-consistency tests kill at random points; built for the tests, not shipped.
        .executableTarget(name: "SessionKitCrashChild", dependencies: ["SessionKit", "SessionKitPostgres"]),
        // An example backend-for-frontend (issue 51): browsers sign in with code + PKCE, sessions in a shared store
        // behind an opaque cookie, several instances behind a load balancer. Not a product: it is read and copied,
        // not installed, and it serves HTTP with SessionKitTesting's LocalServer, which no deployment should.
        .executableTarget(
            name: "SessionKitExampleBFF",
            dependencies: [
                "SessionKit", "SessionKitTesting", "SessionKitPostgres",
            ]),
        // A real nginx on loopback for the suites that prove a guarantee against it; built for the tests, not shipped.
        .target(name: "LoopbackNginx", dependencies: ["LoopbackPort"]),
        // A throwaway PostgreSQL cluster on loopback for the suites of SessionKitPostgres; built for the tests, not
        // shipped.
        .target(name: "LoopbackPostgres", dependencies: ["LoopbackPort"]),
        // A free loopback port, for the fixtures above and the tests; built for the tests, not shipped.
        .target(name: "LoopbackPort"),
        .testTarget(
            name: "SessionKitTests",
            dependencies: [
                "SessionKit", "SessionKitOAuth", "SessionKitTesting", "SessionKitCrashChild", "SessionKitExampleBFF",
                "LoopbackNginx", "SessionKitPostgres", "LoopbackPostgres", "LoopbackPort",
            ]),
        .testTarget(name: "SessionKitTestingTests", dependencies: ["SessionKitTesting"]),
        .testTarget(
            name: "SessionKitCLITests",
            dependencies: ["SessionKitCLICore", "SessionKit", "SessionKitTesting", "LoopbackNginx"]),
        .testTarget(name: "SessionKitBenchTests", dependencies: ["SessionKitBench"]),
    ],
    swiftLanguageModes: [.v6]
)
