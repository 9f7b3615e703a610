#if canImport(AuthenticationServices)
    import AuthenticationServices
    import Foundation

    /// Apple's credential states and signals for ``AppleIDCredentialMonitor``: `ASAuthorizationAppleIDProvider`'s
    /// `getCredentialState(forUserID:completion:)`, its `credentialRevokedNotification`, and the app's return to the
    /// foreground.
    ///
    /// The foreground notifications are named by their raw values (`UIApplicationWillEnterForegroundNotification`,
    /// `NSApplicationDidBecomeActiveNotification`), so this type imports neither UIKit nor AppKit and observes from any
    /// thread.
    public struct SystemAppleIDCredentialSource: AppleIDCredentialSource {
        /// Creates the source.
        public init() {}

        /// Asks `ASAuthorizationAppleIDProvider` for `userID`'s state.
        ///
        /// - Parameter userID: The user identifier.
        /// - Returns: The state.
        /// - Throws: The provider's error, or `SessionError(.malformedResponse)` for a state this build does not know
        ///   (nothing is ended on it).
        public func credentialState(forUserID userID: String) async throws -> AppleIDCredentialState {
            let state = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<ASAuthorizationAppleIDProvider.CredentialState, any Error>) in
                ASAuthorizationAppleIDProvider().getCredentialState(forUserID: userID) { state, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: state)
                    }
                }
            }
            switch state {
            case .authorized: return .authorized
            case .revoked: return .revoked
            case .notFound: return .notFound
            case .transferred: return .transferred
            @unknown default:
                throw SessionError(.malformedResponse, "Apple answered a credential state this build does not know")
            }
        }

        /// The revocation notification and the app's return to the foreground, observed until the stream ends.
        public func signals() -> AsyncStream<AppleIDSignal> {
            AsyncStream(bufferingPolicy: .bufferingNewest(2)) { continuation in
                let center = NotificationCenter.default
                let observed: [(NSNotification.Name, AppleIDSignal)] = [
                    (ASAuthorizationAppleIDProvider.credentialRevokedNotification, .credentialRevoked),
                    (NSNotification.Name("UIApplicationWillEnterForegroundNotification"), .foreground),
                    (NSNotification.Name("NSApplicationDidBecomeActiveNotification"), .foreground),
                ]
                let observers = observed.map { name, signal in
                    ObserverToken(
                        center.addObserver(forName: name, object: nil, queue: nil) { _ in
                            continuation.yield(signal)
                        })
                }
                continuation.onTermination = { _ in
                    for observer in observers { center.removeObserver(observer.value) }
                }
            }
        }
    }
#endif
