/// Renders credential material for logs and descriptions without revealing it.
///
/// A token becomes `<redacted: 43 chars>`: enough to tell two values apart by length while debugging, never
/// enough to use one.
package enum Redaction {
    /// The redacted form of a secret.
    ///
    /// - Parameter secret: A token, code or password.
    /// - Returns: A placeholder that names only the secret's length.
    public static func redact(_ secret: String?) -> String {
        guard let secret else { return "nil" }
        return "<redacted: \(secret.count) chars>"
    }
}
