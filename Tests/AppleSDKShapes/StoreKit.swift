// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation
// The shape of StoreKit 2 (`Transaction`, `VerificationResult`), for `scripts/apple-typecheck`: declarations only,
// nothing here runs.
//
// SDK followed: iOS 26 / macOS 26 (Xcode 26), transcribed from StoreKit's documentation on developer.apple.com.
// `Transaction.Transactions` is an `AsyncSequence` of `VerificationResult<Transaction>` whose iterator does not throw;
// `appAccountToken` is `UUID?`; `VerificationResult` is `@frozen`.

import Foundation

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
@frozen
public enum VerificationResult<SignedType> {
    case unverified(SignedType, VerificationResult<SignedType>.VerificationError)
    case verified(SignedType)

    public enum VerificationError: Error {
        case revokedCertificate
        case invalidCertificateChain
        case invalidDeviceVerification
        case invalidEncoding
        case invalidSignature
        case missingRequiredProperties
    }

    public var payloadValue: SignedType {
        get throws { shape() }
    }
    public var unsafePayloadValue: SignedType { shape() }
    public var jwsRepresentation: String { shape() }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension VerificationResult: Sendable where SignedType: Sendable {}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
public struct Transaction: Identifiable, Hashable, Sendable {
    public struct Transactions: AsyncSequence, Sendable {
        public typealias Element = VerificationResult<Transaction>

        public struct AsyncIterator: AsyncIteratorProtocol {
            public mutating func next() async -> VerificationResult<Transaction>? { shape() }
        }

        public func makeAsyncIterator() -> AsyncIterator { shape() }
    }

    public var id: UInt64 { shape() }
    public var originalID: UInt64 { shape() }
    public var productID: String { shape() }
    public var appBundleID: String { shape() }
    public var purchaseDate: Date { shape() }
    public var originalPurchaseDate: Date { shape() }
    public var expirationDate: Date? { shape() }
    public var revocationDate: Date? { shape() }
    public var isUpgraded: Bool { shape() }
    public var appAccountToken: UUID? { shape() }
    public var jsonRepresentation: Data { shape() }

    public func finish() async { shape() }

    public static var all: Transactions { shape() }
    public static var updates: Transactions { shape() }
    public static var currentEntitlements: Transactions { shape() }
    @available(iOS 18.4, macOS 15.4, tvOS 18.4, watchOS 11.4, visionOS 2.4, *)
    public static func currentEntitlements(for productID: String) -> Transactions { shape() }
    public static func latest(for productID: String) async -> VerificationResult<Transaction>? { shape() }
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
