/// Bounds on what the OAuth parsers accept, so that a broken or hostile server cannot make them slow or large.
///
/// Every parser in this folder is linear in its input; these caps bound the input itself. Legitimate
/// authorization servers stay far below each of them (a token response is a few kilobytes).
package enum OAuthLimits {
    /// The largest JSON body (token, error or device authorization response) or ID token read.
    package static let maximumBodyBytes = 1 << 20
    /// The largest `WWW-Authenticate` value parsed; a longer one is treated as carrying no challenge.
    package static let maximumHeaderBytes = 16 << 10
    /// How deeply JSON arrays and objects may nest. OAuth responses are flat; ID token claims nest a little.
    package static let maximumJSONDepth = 32
    /// The longest JSON number lexeme accepted (digits, sign, fraction and exponent together).
    package static let maximumNumberLength = 512
    /// How many characters of server-written text (`error_description`) reach an error message.
    package static let maximumDescriptionLength = 256
    /// The longest lifetime believed (ten years); a longer `expires_in` is clamped to it.
    package static let maximumLifetimeSeconds: Int64 = 10 * 365 * 24 * 60 * 60
}
