import Foundation
import Testing

@testable import SessionKit
@testable import SessionKitOAuth

/// The Python tools of `Tests/AuthorizationServer/` in the venv `scripts/test` creates: JOSE libraries from PyPI
/// that check what SessionKit signs, and make what it must refuse.
enum PythonTools {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The venv's Python (`SESSIONKIT_PYTHON` names another, as `scripts/mutants` does for its scratch copy), or
    /// `nil` when there is none.
    static var python: URL? {
        let python =
            ProcessInfo.processInfo.environment["SESSIONKIT_PYTHON"].map { URL(fileURLWithPath: $0) }
            ?? root.appendingPathComponent(".venv/bin/python")
        return FileManager.default.isExecutableFile(atPath: python.path) ? python : nil
    }

    /// Whether a suite needing the venv must fail without it (`scripts/test` sets this), rather than skip.
    static var isRequired: Bool { ProcessInfo.processInfo.environment["SESSIONKIT_REQUIRE_AUTH_SERVER"] == "1" }

    /// Whether the suite can run; prints why not when it is skipped.
    static func available(_ suite: String) -> Bool {
        if python != nil || isRequired { return true }
        print("\(suite): skipped, no .venv (scripts/test creates it)")
        return false
    }

    /// Runs `script` (a path under `Tests/AuthorizationServer/`) with `arguments`, feeding `input`, and returns its
    /// standard output.
    static func run(_ script: String, _ arguments: [String] = [], input: Data = Data()) throws -> Data {
        let python = try #require(python, "no .venv/bin/python: run scripts/test once to create it")
        let process = Process()
        process.executableURL = python
        process.arguments = [root.appendingPathComponent("Tests/AuthorizationServer/" + script).path] + arguments
        let output = Pipe()
        let standardInput = Pipe()
        process.standardOutput = output
        process.standardInput = standardInput
        try process.run()
        standardInput.fileHandleForWriting.write(input)
        try standardInput.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "\(script) failed")
        return data
    }

    /// What jwcrypto made of one token.
    struct Verified {
        var valid: Bool
        var header: [String: JSONValue]
        var claims: [String: JSONValue]
        /// The key's RFC 7638 thumbprint as jwcrypto computes it, when the key imported.
        var jkt: String?
    }

    /// Verifies each token with jwcrypto against its public JWK (`verify_jws.py`).
    static func verify(_ items: [(token: String, jwk: [String: JSONValue])]) throws -> [Verified] {
        let input = JSONValue.array(items.map { .object(["token": .string($0.token), "jwk": .object($0.jwk)]) })
        let output = try run("verify_jws.py", input: Data(input.serialized.utf8))
        guard case .array(let results) = try JSONParser.parse(Array(output)) else { return [] }
        return results.map { result in
            var header: [String: JSONValue] = [:]
            var claims: [String: JSONValue] = [:]
            if case .object(let members)? = result["header"] { header = members }
            if case .object(let members)? = result["claims"] { claims = members }
            return Verified(
                valid: result["valid"]?.boolValue == true, header: header, claims: claims,
                jkt: result["jkt"]?.stringValue)
        }
    }
}
