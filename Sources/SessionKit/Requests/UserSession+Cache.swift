import Foundation
import SessionKitOAuth

extension UserSession {
    /// Removes what the session's cache holds for `url`: the stored GET and HEAD responses, every variant.
    ///
    /// The session already does this for the target of every unsafe request it sends (`POST`, `PUT`, `PATCH`,
    /// `DELETE`, …), whatever the outcome. Call it when the app learns by other means that a resource changed, such
    /// as a push notification, so that the next ``data(for:)`` asks the server.
    ///
    /// - Parameter url: The resource's URL; its fragment is ignored.
    public func removeCachedResponses(for url: URL) {
        cache.removeAll(for: url)
    }

    /// Empties the session's cache. ``end()`` does so too.
    public func removeAllCachedResponses() {
        cache.removeAll()
    }

    /// How many responses the session's cache holds, each variant of a URL counted once.
    package var cachedResponseCount: Int { cache.count }
}
