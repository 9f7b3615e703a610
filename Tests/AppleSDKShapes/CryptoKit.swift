// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation
// The shape of Apple's CryptoKit, for `scripts/apple-typecheck`: declarations only, nothing here runs.
//
// SDK followed: iOS 26 / macOS 26 (Xcode 26), transcribed from CryptoKit's documentation on developer.apple.com
// (the Swift declarations of `SHA256`, `P256.Signing`, `P384.Signing`, `Curve25519.Signing`, `Digest`), with their
// generic constraints (`DataProtocol`, `ContiguousBytes`), `throws` and optionality. CryptoKit's own `Digest`
// protocol is here on purpose: code that says `Digest` meaning its own type is ambiguous on Apple, and here.

import Foundation

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol Digest: Hashable, ContiguousBytes, CustomStringConvertible, Sequence where Element == UInt8 {
    static var byteCount: Int { get }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public protocol HashFunction {
    associatedtype Digest: CryptoKit.Digest
    static func hash<D: DataProtocol>(data: D) -> Digest
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct SHA256Digest: Digest, Sendable {
    public static var byteCount: Int { 32 }
    public var description: String { shape() }
    public func makeIterator() -> Array<UInt8>.Iterator { shape() }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { shape() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct SHA384Digest: Digest, Sendable {
    public static var byteCount: Int { 48 }
    public var description: String { shape() }
    public func makeIterator() -> Array<UInt8>.Iterator { shape() }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { shape() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct SHA512Digest: Digest, Sendable {
    public static var byteCount: Int { 64 }
    public var description: String { shape() }
    public func makeIterator() -> Array<UInt8>.Iterator { shape() }
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { shape() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct SHA256: HashFunction, Sendable {
    public static func hash<D: DataProtocol>(data: D) -> SHA256Digest { shape() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct SHA384: HashFunction, Sendable {
    public static func hash<D: DataProtocol>(data: D) -> SHA384Digest { shape() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public struct SHA512: HashFunction, Sendable {
    public static func hash<D: DataProtocol>(data: D) -> SHA512Digest { shape() }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public enum P256 {
    public enum Signing {
        public struct PublicKey: Sendable {
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { shape() }
            public init<Bytes: ContiguousBytes>(x963Representation: Bytes) throws { shape() }
            public init<Bytes: ContiguousBytes>(compressedRepresentation: Bytes) throws { shape() }
            public init(pemRepresentation: String) throws { shape() }
            public var rawRepresentation: Data { shape() }
            public var x963Representation: Data { shape() }
            public func isValidSignature<D: DataProtocol>(_ signature: ECDSASignature, for data: D) -> Bool { shape() }
            public func isValidSignature<D: Digest>(_ signature: ECDSASignature, for digest: D) -> Bool { shape() }
        }

        public struct PrivateKey: Sendable {
            public init(compactRepresentable: Bool = true) { shape() }
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { shape() }
            public init<Bytes: ContiguousBytes>(x963Representation: Bytes) throws { shape() }
            public var publicKey: PublicKey { shape() }
            public var rawRepresentation: Data { shape() }
            public var x963Representation: Data { shape() }
            public func signature<D: DataProtocol>(for data: D) throws -> ECDSASignature { shape() }
            public func signature<D: Digest>(for digest: D) throws -> ECDSASignature { shape() }
        }

        public struct ECDSASignature: ContiguousBytes, Sendable {
            public init<D: DataProtocol>(rawRepresentation: D) throws { shape() }
            public init<D: DataProtocol>(derRepresentation: D) throws { shape() }
            public var rawRepresentation: Data { shape() }
            public var derRepresentation: Data { shape() }
            public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { shape() }
        }
    }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public enum P384 {
    public enum Signing {
        public struct PublicKey: Sendable {
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { shape() }
            public init<Bytes: ContiguousBytes>(x963Representation: Bytes) throws { shape() }
            public var rawRepresentation: Data { shape() }
            public var x963Representation: Data { shape() }
            public func isValidSignature<D: DataProtocol>(_ signature: ECDSASignature, for data: D) -> Bool { shape() }
            public func isValidSignature<D: Digest>(_ signature: ECDSASignature, for digest: D) -> Bool { shape() }
        }

        public struct PrivateKey: Sendable {
            public init(compactRepresentable: Bool = true) { shape() }
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { shape() }
            public var publicKey: PublicKey { shape() }
            public var rawRepresentation: Data { shape() }
            public func signature<D: DataProtocol>(for data: D) throws -> ECDSASignature { shape() }
        }

        public struct ECDSASignature: ContiguousBytes, Sendable {
            public init<D: DataProtocol>(rawRepresentation: D) throws { shape() }
            public init<D: DataProtocol>(derRepresentation: D) throws { shape() }
            public var rawRepresentation: Data { shape() }
            public var derRepresentation: Data { shape() }
            public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { shape() }
        }
    }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public enum Curve25519 {
    public enum Signing {
        public struct PublicKey: Sendable {
            public init<D: ContiguousBytes>(rawRepresentation data: D) throws { shape() }
            public var rawRepresentation: Data { shape() }
            public func isValidSignature<S: DataProtocol, D: DataProtocol>(_ signature: S, for data: D) -> Bool {
                shape()
            }
        }

        public struct PrivateKey: Sendable {
            public init() { shape() }
            public init<D: ContiguousBytes>(rawRepresentation data: D) throws { shape() }
            public var publicKey: PublicKey { shape() }
            public var rawRepresentation: Data { shape() }
            public func signature<D: DataProtocol>(for data: D) throws -> Data { shape() }
        }
    }
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
