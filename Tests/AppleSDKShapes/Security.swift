// swift-format-ignore-file: AllPublicDeclarationsHaveDocumentation, AlwaysUseLowerCamelCase
// The shape of Apple's Security framework, for `scripts/apple-typecheck`: declarations only, nothing here runs.
//
// SDK followed: iOS 26 / macOS 26 (Xcode 26), transcribed from Apple's headers (SecBase.h, SecItem.h, SecKey.h,
// SecAccessControl.h, SecRandom.h) as developer.apple.com publishes them, with their availability, optionality and
// argument labels. Only what SessionKit calls is here; add a declaration when a source file needs one, from Apple's
// documentation, never from what the call site would like.
//
// Core Foundation, which Security re-exports on Apple platforms, is shaped here too. Linux has no toll-free bridging,
// so each CF type is the Foundation class it bridges to: `dictionary as CFDictionary`, `cfString as String` and
// `data as CFData` then type-check here as on Apple, and a missing `as` fails here as it does there. The names are
// Apple's public C names, hence the capitalised functions.

import Foundation

// MARK: - Core Foundation (CFBase.h, MacTypes.h)

public typealias OSStatus = Int32
public typealias CFTypeRef = AnyObject
public typealias CFString = NSString
public typealias CFData = NSData
public typealias CFDictionary = NSDictionary
public typealias CFError = NSError
public final class CFAllocator {}

// MARK: - SecBase.h

public final class SecKey {}
public final class SecAccessControl {}

public var errSecSuccess: OSStatus { 0 }
public var errSecParam: OSStatus { -50 }
public var errSecItemNotFound: OSStatus { -25300 }
public var errSecDuplicateItem: OSStatus { -25299 }
public var errSecInteractionNotAllowed: OSStatus { -25308 }
public var errSecMissingEntitlement: OSStatus { -34018 }
public var errSecUserCanceled: OSStatus { -128 }
public var errSecAuthFailed: OSStatus { -25293 }

@available(iOS 11.3, macOS 10.3, tvOS 11.3, watchOS 4.3, *)
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    shape()
}

// MARK: - SecRandom.h

public typealias SecRandomRef = OpaquePointer
nonisolated(unsafe) public let kSecRandomDefault: SecRandomRef? = nil

/// Returns `errSecSuccess` (0) or another status; declared `int` in C, imported as `Int32`.
@available(iOS 2.0, macOS 10.7, tvOS 9.0, watchOS 1.0, *)
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    shape()
}

// MARK: - SecItem.h

@available(iOS 2.0, macOS 10.6, tvOS 9.0, watchOS 1.0, *)
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    shape()
}

@available(iOS 2.0, macOS 10.6, tvOS 9.0, watchOS 1.0, *)
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    shape()
}

@available(iOS 2.0, macOS 10.6, tvOS 9.0, watchOS 1.0, *)
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus { shape() }

@available(iOS 2.0, macOS 10.6, tvOS 9.0, watchOS 1.0, *)
public func SecItemDelete(_ query: CFDictionary) -> OSStatus { shape() }

nonisolated(unsafe) public let kSecClass: CFString = "class"
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "genp"
nonisolated(unsafe) public let kSecAttrService: CFString = "svce"
nonisolated(unsafe) public let kSecAttrAccount: CFString = "acct"
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "agrp"
nonisolated(unsafe) public let kSecAttrGeneric: CFString = "gena"
nonisolated(unsafe) public let kSecAttrLabel: CFString = "labl"
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "pdmn"
nonisolated(unsafe) public let kSecAttrAccessControl: CFString = "accc"
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "sync"
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
nonisolated(unsafe) public let kSecValueData: CFString = "v_Data"
nonisolated(unsafe) public let kSecValueRef: CFString = "v_Ref"
nonisolated(unsafe) public let kSecReturnData: CFString = "r_Data"
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "r_Attributes"
nonisolated(unsafe) public let kSecReturnRef: CFString = "r_Ref"
nonisolated(unsafe) public let kSecMatchLimit: CFString = "m_Limit"
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "m_LimitOne"
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = "m_LimitAll"
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "nleg"
nonisolated(unsafe) public let kSecUseAuthenticationUI: CFString = "u_AuthUI"

// MARK: - SecAccessControl.h

public struct SecAccessControlCreateFlags: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static var userPresence: SecAccessControlCreateFlags { .init(rawValue: 1 << 0) }
    public static var biometryAny: SecAccessControlCreateFlags { .init(rawValue: 1 << 1) }
    public static var biometryCurrentSet: SecAccessControlCreateFlags { .init(rawValue: 1 << 3) }
    public static var devicePasscode: SecAccessControlCreateFlags { .init(rawValue: 1 << 4) }
    public static var privateKeyUsage: SecAccessControlCreateFlags { .init(rawValue: 1 << 30) }
}

@available(iOS 8.0, macOS 10.10, tvOS 9.0, watchOS 1.0, *)
public func SecAccessControlCreateWithFlags(
    _ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecAccessControl? {
    shape()
}

// MARK: - SecKey.h

nonisolated(unsafe) public let kSecAttrKeyType: CFString = "type"
nonisolated(unsafe) public let kSecAttrKeyTypeRSA: CFString = "42"
nonisolated(unsafe) public let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
nonisolated(unsafe) public let kSecAttrKeyClass: CFString = "kcls"
nonisolated(unsafe) public let kSecAttrKeyClassPublic: CFString = "0"
nonisolated(unsafe) public let kSecAttrKeyClassPrivate: CFString = "1"
nonisolated(unsafe) public let kSecAttrKeySizeInBits: CFString = "bsiz"

public enum SecKeyOperationType: Int, @unchecked Sendable {
    case sign = 0
    case verify = 1
    case encrypt = 2
    case decrypt = 3
    case keyExchange = 4
}

public struct SecKeyAlgorithm: Hashable, RawRepresentable, @unchecked Sendable {
    public let rawValue: CFString
    public init(rawValue: CFString) { self.rawValue = rawValue }
    public static let rsaSignatureMessagePKCS1v15SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA256")
    public static let rsaSignatureMessagePKCS1v15SHA384 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA384")
    public static let rsaSignatureMessagePKCS1v15SHA512 = SecKeyAlgorithm(
        rawValue: "algid:sign:RSA:message-PKCS1v15:SHA512")
    public static let rsaSignatureMessagePSSSHA256 = SecKeyAlgorithm(rawValue: "algid:sign:RSA:message-PSS:SHA256")
    public static let rsaSignatureMessagePSSSHA384 = SecKeyAlgorithm(rawValue: "algid:sign:RSA:message-PSS:SHA384")
    public static let rsaSignatureMessagePSSSHA512 = SecKeyAlgorithm(rawValue: "algid:sign:RSA:message-PSS:SHA512")
    public static let ecdsaSignatureMessageX962SHA256 = SecKeyAlgorithm(
        rawValue: "algid:sign:ECDSA:message-X962:SHA256")
}

@available(iOS 10.0, macOS 10.12, tvOS 10.0, watchOS 3.0, *)
public func SecKeyCreateWithData(
    _ keyData: CFData, _ attributes: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> SecKey? {
    shape()
}

@available(iOS 10.0, macOS 10.12, tvOS 10.0, watchOS 3.0, *)
public func SecKeyIsAlgorithmSupported(
    _ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm
) -> Bool {
    shape()
}

@available(iOS 10.0, macOS 10.12, tvOS 10.0, watchOS 3.0, *)
public func SecKeyVerifySignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> Bool {
    shape()
}

@available(iOS 10.0, macOS 10.12, tvOS 10.0, watchOS 3.0, *)
public func SecKeyCreateSignature(
    _ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
    _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?
) -> CFData? {
    shape()
}

/// The body of every declaration above: shapes are compiled, never run.
private func shape() -> Never { fatalError("Apple SDK shape: declarations only") }
