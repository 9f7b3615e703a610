import Foundation
import SessionKitOAuth

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// What the lifetime registers for `end()`: declared beside it, so the session's room names no type of the rooms
// that build on it (the request kinds register these; the lifetime only holds and ends them).

/// A `data(for:)` call in flight, as the session's registry holds it: its task, for `end()` to cancel, and the
/// right to answer its caller, for `end()` to answer first.
struct InFlightRequest: Sendable, CarriesSessionTask {
    let sessionTask: URLSessionTask
    let answer: TaskAnswer<DataCompletion>
}

/// What one data task's completion handler answers: the body, the response, and whether the cache may store it.
struct DataCompletion: Sendable {
    let data: Data
    let response: URLResponse
    let storable: Bool
}

extension UserSession {
    /// A write in flight, as the session's lifetime holds it for sign-out: its policy, and the signal it resolves
    /// when it returns.
    struct PendingWrite: Sendable {
        let policy: WritePolicy
        let done: Broadcast<Void>
    }
}
