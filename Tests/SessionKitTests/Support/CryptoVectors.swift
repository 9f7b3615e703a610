import Foundation
import Testing

/// Test vectors nobody here wrote, and an outside oracle, for SessionKit's cryptography.
///
/// `scripts/test` installs `cryptography-vectors` (pinned in Tests/AuthorizationServer/requirements.txt) into its
/// venv and exports `SESSIONKIT_CRYPTO_VECTORS` (the installed `cryptography_vectors` package directory: NIST
/// CAVP files, RFC 8032 vectors), `SESSIONKIT_CRYPTO_PYTHON` (the venv's python, with pyca/cryptography and
/// jwcrypto, which runs Tests/CryptoOracle/crypto_oracle.py) and `SESSIONKIT_REQUIRE_CRYPTO_VECTORS=1`.
/// Without the directory, suites that need it are skipped, unless they are required: then they fail.
enum CryptoVectors {
    /// A missing vector file or oracle, or an oracle that failed.
    struct Missing: Error, CustomStringConvertible {
        /// What is missing and how to get it.
        let description: String
    }

    /// One record of a NIST `.rsp` file: the `[...]` section it sits in and its `name = value` fields, with the
    /// fields set earlier in the same section (such as an RSA modulus) carried along.
    struct Record {
        /// The section header without brackets, such as `P-256,SHA-256` or `mod = 2048`.
        let section: String
        /// The fields, by name.
        let fields: [String: String]

        /// The field's bytes, from hex; `nil` when absent or not hex.
        func bytes(_ name: String) -> [UInt8]? { fields[name].flatMap(hex) }
    }

    private static let environment = ProcessInfo.processInfo.environment

    /// The `cryptography_vectors` directory, or `nil` when `SESSIONKIT_CRYPTO_VECTORS` is not set.
    static var directory: URL? {
        environment["SESSIONKIT_CRYPTO_VECTORS"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
    }

    /// Whether a missing directory is a failure (`SESSIONKIT_REQUIRE_CRYPTO_VECTORS=1`, set by `scripts/test`).
    static var isRequired: Bool { environment["SESSIONKIT_REQUIRE_CRYPTO_VECTORS"] == "1" }

    /// Whether the vector suites run: the vectors are there, or they must be (and then their absence fails).
    static var shouldRun: Bool { directory != nil || isRequired }

    /// The venv's python, which runs the oracle, or `nil` when `SESSIONKIT_CRYPTO_PYTHON` is not set.
    static var python: String? { environment["SESSIONKIT_CRYPTO_PYTHON"].flatMap { $0.isEmpty ? nil : $0 } }

    /// Whether the tests that ask the oracle run: python is there, or it must be.
    static var oracleShouldRun: Bool { python != nil || isRequired }

    /// The text of `path` under the vectors directory.
    ///
    /// - Parameter path: A path such as `hashes/SHA2/SHA256ShortMsg.rsp`.
    /// - Returns: The file's text.
    /// - Throws: ``Missing`` when the directory is not set or the file cannot be read.
    static func text(_ path: String) throws -> String {
        guard let directory else {
            throw Missing(
                description: "SESSIONKIT_REQUIRE_CRYPTO_VECTORS=1 but SESSIONKIT_CRYPTO_VECTORS is not set: run "
                    + "scripts/test, or point it at the cryptography_vectors package of a venv with "
                    + "cryptography-vectors installed")
        }
        let url = directory.appendingPathComponent(path)
        guard let text = try? String(contentsOf: url, encoding: .utf8) else {
            throw Missing(description: "cannot read \(url.path)")
        }
        return text
    }

    /// The records of the `.rsp` file at `path`; a record ends at its `terminator` field (`MD`, `Result`).
    ///
    /// - Parameters:
    ///   - path: The file, under the vectors directory.
    ///   - terminator: The field that closes each record.
    /// - Returns: The records, in file order.
    /// - Throws: ``Missing`` when the file cannot be read.
    static func records(_ path: String, terminator: String) throws -> [Record] {
        var records: [Record] = []
        var section = ""
        var fields: [String: String] = [:]
        for rawLine in try text(path).split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#") || line.isEmpty { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast())
                fields = [:]
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            fields[name] = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if name == terminator { records.append(Record(section: section, fields: fields)) }
        }
        return records
    }

    /// The bytes of hex text, or `nil` when it is not hex.
    static func hex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// Lowercase hex of `bytes`.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]] }
        return String(decoding: text, as: UTF8.self)
    }

    /// `bytes` with zeros added in front up to `count` (NIST files drop leading zeros of numbers).
    static func leftPadded(_ bytes: [UInt8], to count: Int) -> [UInt8] {
        bytes.count >= count ? bytes : [UInt8](repeating: 0, count: count - bytes.count) + bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    // MARK: - The oracle

    /// Runs `crypto_oracle.py command` with the venv's python, `input` (JSON lines) on its stdin, and returns the
    /// JSON objects it prints.
    ///
    /// - Parameters:
    ///   - command: The oracle's subcommand.
    ///   - input: JSON objects, one a line.
    /// - Returns: The objects printed, in order.
    /// - Throws: ``Missing`` when python is not set or the oracle fails.
    static func oracle(_ command: String, input: [[String: Any]] = []) throws -> [[String: Any]] {
        guard let python else {
            throw Missing(
                description: "SESSIONKIT_CRYPTO_PYTHON is not set: scripts/test sets it to its venv's python")
        }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("CryptoOracle/crypto_oracle.py")
        // Input through a file, so a large input cannot fill a pipe while the oracle's output fills the other.
        let inputFile = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: inputFile) }
        var lines = Data()
        for object in input {
            lines += try JSONSerialization.data(withJSONObject: object)
            lines += Data("\n".utf8)
        }
        try lines.write(to: inputFile)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path, command]
        process.standardInput = try FileHandle(forReadingFrom: inputFile)
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Missing(description: "crypto_oracle.py \(command) exited with \(process.terminationStatus)")
        }
        return try data.split(separator: UInt8(ascii: "\n")).map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                throw Missing(description: "crypto_oracle.py \(command) printed a line that is not an object")
            }
            return object
        }
    }
}
