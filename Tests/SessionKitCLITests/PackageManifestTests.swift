import Foundation
import Testing

@testable import SessionKitCLICore

/// The root of this repository, from this file's path.
private let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The manifest lines README.md and Getting Started show a newcomer: the same in both, at the tool's version, and
/// resolved by SwiftPM against this checkout.
@Suite(.timeLimit(.minutes(5))) struct PackageManifestTests {
    static let documents = ["README.md", "Sources/SessionKit/SessionKit.docc/GettingStarted.md"]

    /// The Swift block after `<!-- manifest -->` in `path`.
    static func manifestBlock(in path: String) throws -> String {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
        let marker = try #require(text.range(of: "<!-- manifest -->\n```swift\n"), "\(path) shows no manifest")
        let rest = text[marker.upperBound...]
        let end = try #require(rest.range(of: "\n```"), "\(path): the manifest block is not closed")
        return String(rest[..<end.lowerBound])
    }

    @Test func bothDocumentsShowTheSameLinesAtTheToolsVersion() throws {
        let blocks = try Self.documents.map(Self.manifestBlock(in:))
        #expect(blocks[0] == blocks[1], "README.md and Getting Started show different manifests")
        #expect(blocks[0].contains("from: \"\(SessionKitTool.version)\""))
        #expect(blocks[0].contains("SessionKit \(SessionKitTool.version)"))
        for path in Self.documents {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
            #expect(text.contains("version \(SessionKitTool.version)"), "\(path) names the version in its prose")
        }
    }

    /// CHANGELOG.md's newest version is the one the tool prints, so the changelog is kept with every version.
    @Test func theChangelogsNewestHeadingIsTheVersionTheToolPrints() async throws {
        let changelog = try String(contentsOf: repositoryRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let headings = changelog.components(separatedBy: "\n").filter { $0.hasPrefix("## ") }
        let newest = try #require(headings.first, "CHANGELOG.md has no version heading").dropFirst(3)
        let captured = CapturedConsole()
        #expect(await captured.run(["--version"]) == .ok)
        #expect(captured.output == "sessionkit \(newest)\n", "the newest heading is \(newest)")
        #expect(headings.count == Set(headings).count, "each version once")
    }

    @Test func swiftPMResolvesTheShownManifestAgainstThisCheckout() throws {
        // Given the shown lines in a package beside a checkout named as the lines expect.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let app = scratch.appendingPathComponent("App")
        for folder in ["Sources/MyApp", "Tests/MyAppTests"] {
            try FileManager.default.createDirectory(
                at: app.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try FileManager.default.createSymbolicLink(
            at: scratch.appendingPathComponent("SessionKit"), withDestinationURL: repositoryRoot)
        try Data("import SessionKit\n".utf8).write(to: app.appendingPathComponent("Sources/MyApp/App.swift"))
        try Data("import SessionKitTesting\n".utf8).write(
            to: app.appendingPathComponent("Tests/MyAppTests/AppTests.swift"))
        let lines = try Self.manifestBlock(in: "README.md")
        let manifest = """
            // swift-tools-version:6.0
            import PackageDescription

            let package = Package(
                name: "App",
            \(lines)
            )

            """
        try Data(manifest.utf8).write(to: app.appendingPathComponent("Package.swift"))

        // When SwiftPM loads its graph.
        let (status, output) = try run(["swift", "package", "show-dependencies", "--format", "json"], in: app)

        // Then the products the lines name exist, in the package the lines name.
        #expect(status == 0, "\(output)")
        #expect(output.contains("\"identity\" : \"sessionkit\"") || output.contains("\"identity\": \"sessionkit\""))
    }

    private func run(_ arguments: [String], in directory: URL) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
