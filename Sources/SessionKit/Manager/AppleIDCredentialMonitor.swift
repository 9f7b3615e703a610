import Foundation
import SessionKitOAuth

/// Apple's word on a Sign in with Apple user identifier (`ASAuthorizationAppleIDProvider.CredentialState`).
public enum AppleIDCredentialState: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The user identifier is in good standing with the app.
    case authorized
    /// The user stopped using Sign in with Apple with the app, or Apple revoked it: the account ends.
    case revoked
    /// No credential is found for the user identifier (another Apple ID, or the app removed from it): the account
    /// ends.
    case notFound
    /// The app was transferred to another developer team: the user identifier must be migrated by the app's
    /// server; reported, nobody signed out.
    case transferred

    /// The state's name.
    public var description: String { rawValue }
}

/// What makes ``AppleIDCredentialMonitor`` check again.
public enum AppleIDSignal: Sendable, Hashable {
    /// `ASAuthorizationAppleIDProvider.credentialRevokedNotification`: a credential was revoked (it names no user).
    case credentialRevoked
    /// The app came back to the foreground, where a revocation made while it was away is found.
    case foreground
}

/// Where ``AppleIDCredentialMonitor`` learns Apple's state: `SystemAppleIDCredentialSource`
/// (AuthenticationServices) on Apple platforms, a model in tests.
public protocol AppleIDCredentialSource: Sendable {
    /// Apple's state for `userID` (`getCredentialState(forUserID:)`).
    ///
    /// - Parameter userID: The Sign in with Apple user identifier.
    /// - Returns: The state.
    /// - Throws: When Apple could not be asked (no network, no Apple ID on the device): nothing is decided on it.
    func credentialState(forUserID userID: String) async throws -> AppleIDCredentialState

    /// The signals to check again on, for as long as the stream is iterated.
    func signals() -> AsyncStream<AppleIDSignal>
}

/// Ends the Sign in with Apple accounts Apple no longer authorizes: at launch, on Apple's revocation notification,
/// and whenever the app returns to the foreground (Apple's guidance for Sign in with Apple).
///
/// An account signed in with Apple is `Account(issuer: AppleIDCredentialMonitor.issuer, subject: userID)`, the user
/// identifier of the `ASAuthorizationAppleIDCredential` (the `sub` of its identity token): the account keeps it, so
/// no other record is needed. Each live session of such an account is checked: `.revoked` and `.notFound` end the
/// account (``SessionManager/endAccount(_:because:)`` with ``AccountEnding/appleIDRevoked`` or
/// ``AccountEnding/appleIDNotFound``: local only, in every process on the store); `.transferred` is reported (an
/// ``DiagnosticEvent/Kind/appleIDChecked`` notice) and ends nothing; a state that cannot be read ends nothing.
///
/// ```swift
/// await manager.restore()
/// let monitor = AppleIDCredentialMonitor(manager: manager, source: SystemAppleIDCredentialSource())
/// Task { await monitor.run() }  // checks now, then on every revocation and return to the foreground
/// ```
public final class AppleIDCredentialMonitor: Sendable {
    /// The issuer of Sign in with Apple's identity tokens, and of the accounts this monitor checks.
    public static let issuer = "https://appleid.apple.com"

    /// One account's check.
    public struct Check: Sendable, Hashable {
        /// The account checked.
        public let account: Account
        /// Apple's state, or `nil` when it could not be read.
        public let state: AppleIDCredentialState?
        /// Whether the check ended the account.
        public let ended: Bool
    }

    private let manager: SessionManager
    private let source: any AppleIDCredentialSource

    /// Creates a monitor; nothing is checked until ``check()`` or ``run()``.
    ///
    /// - Parameters:
    ///   - manager: The manager whose Sign in with Apple accounts to check.
    ///   - source: Apple's credential states and signals.
    public init(manager: SessionManager, source: any AppleIDCredentialSource) {
        self.manager = manager
        self.source = source
    }

    /// Checks every live Sign in with Apple account now, one after another, and ends those Apple no longer
    /// authorizes.
    ///
    /// - Returns: Each account's check, in the order of ``SessionManager/sessions``.
    @discardableResult
    public func check() async -> [Check] {
        var checks: [Check] = []
        for session in manager.sessions where session.isActive && session.account.issuer == Self.issuer {
            let account = session.account
            let state: AppleIDCredentialState
            do {
                state = try await source.credentialState(forUserID: account.subject)
            } catch {
                // Not knowing proves nothing: the user stays signed in.
                let code = (error as? SessionError)?.code ?? .networkUnavailable
                manager.diagnose(.warning, .appleIDChecked, account: account, ["state": "unknown (\(code))"])
                checks.append(Check(account: account, state: nil, ended: false))
                continue
            }
            let ending: AccountEnding? =
                switch state {
                case .revoked: .appleIDRevoked
                case .notFound: .appleIDNotFound
                case .authorized, .transferred: nil
                }
            manager.diagnose(
                state == .authorized ? .info : .notice, .appleIDChecked, account: account, ["state": state.rawValue])
            var ended = false
            if let ending { ended = await manager.endAccount(account, because: ending) != nil }
            checks.append(Check(account: account, state: state, ended: ended))
        }
        return checks
    }

    /// Checks now (the launch's check: start it after ``SessionManager/restore()``), then once per signal, until
    /// the calling task is cancelled; signals that arrive during a check are checked after it. Structured: run it
    /// in the task that lives as long as the app's scene (SwiftUI's `.task { await monitor.run() }`), or in a
    /// `Task` kept and cancelled.
    public func run() async {
        let signals = source.signals()
        await check()
        for await _ in signals {
            guard !Task.isCancelled else { return }
            await check()
        }
    }
}
