import Foundation
import Testing

@testable import SessionKit

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct SHA256Tests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
        (
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        ),
    ])
    func matchesNISTVectors(message: String, digest: String) {
        #expect(hex(SHA256.portableHash(Array(message.utf8))) == digest)
        #expect(hex(SHA256.hash(Array(message.utf8))) == digest)
    }

    @Test func matchesNISTVectorForOneMillionA() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(hex(SHA256.portableHash(message)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Every padding case (lengths around 55, 56, 63, 64 and their multiples) against the system's sha256sum.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sha256sum")))
    func matchesSha256sumForLengthsZeroTo200() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sha256-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var messages: [[UInt8]] = []
        for length in 0...200 {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ length &* 7 &+ 3) }
            messages.append(message)
            try Data(message).write(to: directory.appendingPathComponent("m\(length)"))
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.currentDirectoryURL = directory
        process.arguments = (0...200).map { "m\($0)" }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        var expected: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 2 else { continue }
            expected[String(fields[1]).trimmingCharacters(in: CharacterSet(charactersIn: "*"))] = String(fields[0])
        }
        #expect(expected.count == 201)
        for (length, message) in messages.enumerated() {
            #expect(hex(SHA256.portableHash(message)) == expected["m\(length)"], "length \(length)")
        }
    }
}
