import Foundation
import SessionKitOAuth

/// The one serialized form of a ``CredentialRecord`` that the file, Secret Service and Keychain stores share,
/// and the checks every store runs before it trusts bytes it read back.
package enum CredentialRecordCoding {
    /// Records larger than this are refused on read: a credential record is a few kilobytes, and a bound keeps
    /// a damaged or hostile file from exhausting memory.
    static let maximumEncodedSize = 4 << 20

    /// Only the version, read first so that an old record is reported as old rather than as malformed.
    private struct VersionProbe: Decodable {
        var version: Int?
    }

    /// The record as sorted-key JSON.
    ///
    /// - Parameter record: The record to encode; it must be of the version this build writes.
    /// - Returns: UTF-8 JSON without NUL bytes (JSON escapes them), so it can also travel as a C string.
    /// - Throws: `invalidInput` for a record of another version, `storageFailure` if encoding fails.
    package static func encode(_ record: CredentialRecord) throws(SessionError) -> Data {
        guard record.version == CredentialRecord.currentVersion else {
            throw SessionError(
                .invalidInput,
                "cannot store a credential record of format version \(record.version); "
                    + "this build writes version \(CredentialRecord.currentVersion)"
            )
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // `deferredToDate` keeps the exact `Date` value, so a record reads back equal to the one saved.
        encoder.dateEncodingStrategy = .deferredToDate
        do {
            return try encoder.encode(record)
        } catch {
            throw SessionError(.storageFailure, "cannot encode the credential record of \(record.account.storageKey)")
        }
    }

    /// Decodes and checks a record read back from storage.
    ///
    /// - Parameters:
    ///   - data: The stored bytes.
    ///   - account: The account the record was filed under.
    ///   - source: Where the bytes came from, for the error message (a file name or an item description).
    /// - Returns: The record, known to be of the current version and for `account`.
    /// - Throws: `corruptCredentials` for truncated or garbage bytes, another format version, missing fields,
    ///   or a record of another account.
    package static func decode(_ data: Data, for account: Account, source: String) throws(SessionError)
        -> CredentialRecord
    {
        guard data.count <= maximumEncodedSize else {
            throw corrupt(source, "is \(data.count) bytes, more than a credential record can be")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .deferredToDate
        let probe: VersionProbe
        do {
            probe = try decoder.decode(VersionProbe.self, from: data)
        } catch {
            throw corrupt(source, "is not a JSON credential record (truncated or garbage, \(data.count) bytes)")
        }
        guard let version = probe.version else {
            throw corrupt(source, "has no format version (a record from before version 1)")
        }
        guard version == CredentialRecord.currentVersion else {
            throw corrupt(
                source,
                "is of format version \(version); this build reads version \(CredentialRecord.currentVersion)"
            )
        }
        let record: CredentialRecord
        do {
            record = try decoder.decode(CredentialRecord.self, from: data)
        } catch let error as DecodingError {
            throw corrupt(source, "is missing fields or has fields of the wrong type (\(describe(error)))")
        } catch {
            throw corrupt(source, "cannot be decoded")
        }
        guard record.account == account else {
            throw corrupt(source, "holds the record of another account (a record filed under the wrong name)")
        }
        return record
    }

    private static func corrupt(_ source: String, _ problem: String) -> SessionError {
        SessionError(.corruptCredentials, "the credential record \(source) \(problem)")
    }

    /// Names the offending field without quoting any value, since values may be tokens.
    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context, _ key: CodingKey? = nil) -> String {
            let keys = context.codingPath.map(\.stringValue) + (key.map { [$0.stringValue] } ?? [])
            return keys.isEmpty ? "top level" : keys.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing \(path(context, key))"
        case .valueNotFound(_, let context): return "null \(path(context))"
        case .typeMismatch(_, let context): return "wrong type at \(path(context))"
        case .dataCorrupted(let context): return "invalid value at \(path(context))"
        @unknown default: return "undecodable"
        }
    }
}
