import Foundation

/// What the command line asked for: `sessionkit-bench [--json] [--only <name prefix>]`.
struct BenchArguments: Equatable {
    /// Print JSON instead of a table.
    var json = false
    /// Run only the benchmarks with a result whose name starts with this, and print only those results.
    var prefix: String?
    /// Print the usage and stop.
    var help = false
    /// Instead of benchmarking, send requests of one kind in a loop, for a profiler (`valgrind --tool=callgrind`).
    var profile: ProfileLoop.Variant?
    /// How many requests `--profile` sends.
    var requests = 2000
    /// The server `--profile` sends to (its `/me` and `/fresh`), instead of a `LocalServer` in this process.
    var url: URL?
    /// Instead of benchmarking, serve the request benchmarks' routes on a `LocalServer` for a parent bench.
    var serve = false

    /// The usage line.
    static let usage =
        "usage: sessionkit-bench [--json] [--only <name prefix>]\n"
        + "       sessionkit-bench --profile <session|raw|raw-handler|raw-immediate|cache-hit|curl|easy> [--requests <n>] [--url <server>]\n"
        + "       sessionkit-bench --serve   (used by the bench itself: its request server, out of process)"

    /// Why a command line was refused.
    enum ParseError: Error, Equatable, CustomStringConvertible {
        /// `--only` without a value after it.
        case missingValue(String)
        /// An argument the tool does not know.
        case unknown(String)
        /// A value the option does not accept.
        case invalidValue(String, String)

        var description: String {
            switch self {
            case .missingValue(let option): "\(option) needs a value"
            case .unknown(let argument): "unknown argument \(argument)"
            case .invalidValue(let option, let value): "\(option) does not accept \(value)"
            }
        }
    }

    /// Reads the arguments that follow the program's name.
    ///
    /// - Parameter arguments: The arguments, without the program's name.
    /// - Returns: What they ask for.
    /// - Throws: ``ParseError`` for an unknown argument or an `--only` without a value (an empty prefix counts
    ///   as missing: it would select everything, which is what leaving `--only` out does).
    static func parse(_ arguments: [String]) throws(ParseError) -> BenchArguments {
        var parsed = BenchArguments()
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case "--json":
                parsed.json = true
            case "--only":
                guard let value = remaining.popFirst(), !value.isEmpty, !value.hasPrefix("--") else {
                    throw .missingValue("--only")
                }
                parsed.prefix = value
            case _ where argument.hasPrefix("--only="):
                let value = String(argument.dropFirst("--only=".count))
                guard !value.isEmpty else { throw .missingValue("--only") }
                parsed.prefix = value
            case "--profile":
                guard let value = remaining.popFirst() else { throw .missingValue("--profile") }
                guard let variant = ProfileLoop.Variant(rawValue: value) else {
                    throw .invalidValue("--profile", value)
                }
                parsed.profile = variant
            case "--requests":
                guard let value = remaining.popFirst() else { throw .missingValue("--requests") }
                guard let count = Int(value), count > 0 else { throw .invalidValue("--requests", value) }
                parsed.requests = count
            case "--url":
                guard let value = remaining.popFirst() else { throw .missingValue("--url") }
                guard let url = URL(string: value), url.scheme == "http", url.host != nil else {
                    throw .invalidValue("--url", value)
                }
                parsed.url = url
            case "--serve":
                parsed.serve = true
            case "-h", "--help":
                parsed.help = true
            default:
                throw .unknown(argument)
            }
        }
        return parsed
    }

    /// The results `prefix` selects, in order.
    func filter(_ results: [BenchResult]) -> [BenchResult] {
        guard let prefix else { return results }
        return results.filter { $0.name.hasPrefix(prefix) }
    }
}
