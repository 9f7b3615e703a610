import Foundation

/// One line of JSON for `--json`: keys sorted, so the output is the same from run to run.
enum JSONText {
    /// `object` as JSON text without a final line break.
    ///
    /// - Parameter object: Dictionaries, arrays, strings, numbers, booleans and `NSNull`.
    /// - Returns: The text; `{}` if the object cannot be encoded (a programmer error, caught by the tests).
    static func encode(_ object: Any) -> String {
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
