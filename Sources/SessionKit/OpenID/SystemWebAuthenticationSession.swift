#if canImport(AuthenticationServices) && !os(tvOS) && !os(watchOS)
    import AuthenticationServices
    import Foundation

    /// `ASWebAuthenticationSession` as a ``WebAuthenticationSession``: the system's browser sheet, shown over the
    /// window the app's `anchor` gives.
    ///
    /// A custom-scheme redirect URI is matched by its scheme; an `https` one (an associated domain's
    /// `webcredentials`) by host and path, on iOS 17.4, macOS 14.4 and visionOS 1.1 and later: earlier, an `https`
    /// redirect URI is refused with `invalidInput`. A plain `http` redirect URI is refused everywhere: the sheet cannot
    /// be given one. A cancelled task cancels the sheet.
    public final class SystemWebAuthenticationSession: NSObject, WebAuthenticationSession,
        ASWebAuthenticationPresentationContextProviding, Sendable
    {
        private let anchor: @MainActor @Sendable () -> ASPresentationAnchor

        /// Creates the sheet's presenter.
        ///
        /// - Parameter anchor: The window to show the sheet over.
        public init(anchor: @escaping @MainActor @Sendable () -> ASPresentationAnchor) {
            self.anchor = anchor
        }

        /// The window the sheet is shown over.
        @MainActor
        public func presentationAnchor(for session: ASWebAuthenticationSession) -> ASPresentationAnchor {
            anchor()
        }

        /// Shows `url` in the sheet until the provider redirects to `redirectURI` or the user closes it.
        public func authenticate(url: URL, redirectURI: URL, ephemeral: Bool) async throws -> URL {
            let scheme = redirectURI.scheme?.lowercased() ?? ""
            guard scheme != "http", !scheme.isEmpty else {
                throw SessionError(.invalidInput, "the browser sheet cannot return to an http redirect URI")
            }
            let box = SheetBox()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<URL, any Error>) in
                    Task { @MainActor in
                        let completion: ASWebAuthenticationSession.CompletionHandler = { callback, error in
                            if let callback {
                                continuation.resume(returning: callback)
                            } else if let error = error as? ASWebAuthenticationSessionError,
                                error.code == .canceledLogin
                            {
                                continuation.resume(throwing: SessionError(.userCancelled, "the user closed the sheet"))
                            } else {
                                continuation.resume(
                                    throwing: SessionError(.authorizationFailed, "the browser sheet failed"))
                            }
                        }
                        let sheet: ASWebAuthenticationSession
                        if scheme == "https" {
                            guard #available(iOS 17.4, macOS 14.4, visionOS 1.1, *), let host = redirectURI.host else {
                                continuation.resume(
                                    throwing: SessionError(
                                        .invalidInput, "an https redirect URI needs iOS 17.4, macOS 14.4 or later"))
                                return
                            }
                            sheet = ASWebAuthenticationSession(
                                url: url, callback: .https(host: host, path: redirectURI.path),
                                completionHandler: completion)
                        } else {
                            sheet = ASWebAuthenticationSession(
                                url: url, callbackURLScheme: scheme, completionHandler: completion)
                        }
                        sheet.prefersEphemeralWebBrowserSession = ephemeral
                        sheet.presentationContextProvider = self
                        box.sheet = sheet
                        if !sheet.start() {
                            continuation.resume(
                                throwing: SessionError(.authorizationFailed, "the browser sheet could not start"))
                        }
                    }
                }
            } onCancel: {
                Task { @MainActor in box.sheet?.cancel() }
            }
        }
    }

    /// The sheet a sign-in shows, for its cancellation; only the main actor touches it.
    private final class SheetBox: @unchecked Sendable {
        @MainActor var sheet: ASWebAuthenticationSession?

        nonisolated init() {}
    }
#endif
