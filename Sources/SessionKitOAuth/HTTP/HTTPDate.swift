import Foundation

/// Parses and formats HTTP dates (RFC 9110 §5.6.7) without `DateFormatter`.
///
/// A hand parser avoids `DateFormatter`'s cost and its locale and time-zone pitfalls, and it checks what
/// `DateFormatter` lets slide: a day that the month does not have, an hour of 25, a 2-digit year.
/// The day name must be one of the seven names in the form the format requires, but it is not checked against
/// the date: recipients are not required to, and some servers get it wrong.
package enum HTTPDate {
    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"].map { Array($0.utf8) }
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
        .map { Array($0.utf8) }
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .map { Array($0.utf8) }
    private static let gmt = Array("GMT".utf8)
    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the years a 4-digit year can name.
    private static let earliestSeconds: Int64 = -62_135_596_800
    private static let latestSeconds: Int64 = 253_402_300_799

    /// Parses an IMF-fixdate, an obsolete RFC 850 date or an asctime date.
    ///
    /// `Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT` and `Sun Nov  6 08:49:37 1994` all give
    /// the same instant. Surrounding whitespace is ignored; names are case-sensitive, as the grammar says.
    ///
    /// - Parameters:
    ///   - value: The field value.
    ///   - referenceDate: "Now", used only to place an RFC 850 two-digit year: a year that would be more than
    ///     50 years after it is taken as the most recent past year with those two digits (RFC 9110 §5.6.7).
    /// - Returns: The instant, or nil when `value` is not a valid date in one of the three formats.
    public static func parse(_ value: String, referenceDate: Date = Date()) -> Date? {
        let all = Array(value.utf8)
        let bytes = HTTPFieldSyntax.trimmed(all[...])
        // The longest valid form (RFC 850 with "Wednesday") is 33 bytes.
        guard bytes.count >= 24, bytes.count <= 33 else { return nil }
        let start = bytes.startIndex
        if bytes.count == 29, bytes[start + 3] == UInt8(ascii: ",") {
            return imfFixdate(Array(bytes))
        }
        if bytes.count == 24, bytes[start + 3] == UInt8(ascii: " ") {
            return asctime(Array(bytes))
        }
        return rfc850(Array(bytes), referenceDate: referenceDate)
    }

    /// Formats `date` as an IMF-fixdate, such as `Sun, 06 Nov 1994 08:49:37 GMT`.
    ///
    /// Fractions of a second are dropped. Dates before year 1 or after year 9999 (and non-finite ones) are
    /// clamped to the nearest representable second, so the result always parses.
    ///
    /// - Parameter date: The instant to format.
    /// - Returns: The IMF-fixdate string.
    public static func format(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        let seconds: Int64
        if interval.isNaN {
            seconds = 0
        } else if interval <= Double(earliestSeconds) {
            seconds = earliestSeconds
        } else if interval >= Double(latestSeconds) {
            seconds = latestSeconds
        } else {
            seconds = Int64(interval.rounded(.down))
        }
        let days = floorDivide(seconds, 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int(floorModulo(days + 4, 7))  // 1970-01-01 was a Thursday.
        var text = String(decoding: dayNames[weekday], as: UTF8.self)
        text += ", " + twoDigits(day) + " " + String(decoding: monthNames[month - 1], as: UTF8.self) + " "
        text += fourDigits(year) + " " + twoDigits(secondOfDay / 3600) + ":"
        text += twoDigits(secondOfDay / 60 % 60) + ":" + twoDigits(secondOfDay % 60) + " GMT"
        return text
    }

    // MARK: - The three formats

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func imfFixdate(_ b: [UInt8]) -> Date? {
        guard dayNames.contains(where: { $0[...] == b[0..<3] }),
            b[4] == UInt8(ascii: " "), b[7] == UInt8(ascii: " "), b[11] == UInt8(ascii: " "),
            b[16] == UInt8(ascii: " "), b[25] == UInt8(ascii: " "), b[26..<29] == gmt[...],
            let day = number(b[5..<7]), let month = month(b[8..<11]), let year = number(b[12..<16]),
            let time = time(b[17..<25])
        else { return nil }
        return makeDate(year: year, month: month, day: day, time: time)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    private static func rfc850(_ b: [UInt8], referenceDate: Date) -> Date? {
        guard let comma = b.firstIndex(of: UInt8(ascii: ",")), b.count - comma == 24,
            longDayNames.contains(where: { $0[...] == b[0..<comma] })
        else { return nil }
        let rest = Array(b[(comma + 1)...])
        guard rest[0] == UInt8(ascii: " "), rest[3] == UInt8(ascii: "-"), rest[7] == UInt8(ascii: "-"),
            rest[10] == UInt8(ascii: " "), rest[19] == UInt8(ascii: " "), rest[20..<23] == gmt[...],
            let day = number(rest[1..<3]), let month = month(rest[4..<7]), let shortYear = number(rest[8..<10]),
            let time = time(rest[11..<19])
        else { return nil }
        return makeDate(year: fullYear(shortYear, referenceDate: referenceDate), month: month, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994`
    private static func asctime(_ b: [UInt8]) -> Date? {
        guard dayNames.contains(where: { $0[...] == b[0..<3] }),
            b[3] == UInt8(ascii: " "), b[7] == UInt8(ascii: " "), b[10] == UInt8(ascii: " "),
            b[19] == UInt8(ascii: " "), let month = month(b[4..<7]), let time = time(b[11..<19]),
            let year = number(b[20..<24])
        else { return nil }
        // The day is `2DIGIT / ( SP DIGIT )`.
        let day = b[8] == UInt8(ascii: " ") ? number(b[9..<10]) : number(b[8..<10])
        guard let day else { return nil }
        return makeDate(year: year, month: month, day: day, time: time)
    }

    // MARK: - Pieces

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in digits {
            guard HTTPFieldSyntax.isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return digits.isEmpty ? nil : value
    }

    private static func month(_ name: ArraySlice<UInt8>) -> Int? {
        monthNames.firstIndex(where: { $0[...] == name }).map { $0 + 1 }
    }

    /// `hh:mm:ss` as seconds into the day; a leap second (`60`) is accepted and rolls into the next minute.
    private static func time(_ b: ArraySlice<UInt8>) -> Int? {
        let s = b.startIndex
        guard b.count == 8, b[s + 2] == UInt8(ascii: ":"), b[s + 5] == UInt8(ascii: ":"),
            let hour = number(b[s..<(s + 2)]), let minute = number(b[(s + 3)..<(s + 5)]),
            let second = number(b[(s + 6)..<(s + 8)]), hour < 24, minute < 60, second <= 60
        else { return nil }
        return hour * 3600 + minute * 60 + second
    }

    private static func fullYear(_ shortYear: Int, referenceDate: Date) -> Int {
        let reference = referenceDate.timeIntervalSince1970
        let referenceSeconds = reference.isFinite ? Int64(max(min(reference, 2e11), -2e11)) : 0
        let referenceYear = civil(fromDays: floorDivide(referenceSeconds, 86_400)).year
        let candidate = referenceYear - referenceYear % 100 + shortYear
        return candidate > referenceYear + 50 ? candidate - 100 : candidate
    }

    private static func makeDate(year: Int, month: Int, day: Int, time: Int) -> Date? {
        guard year >= 1, year <= 9999, day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let seconds = days(fromYear: year, month: month, day: day) * 86_400 + Int64(time)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Proleptic Gregorian day counts (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
    private static func days(fromYear year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
        let quotient = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient
    }

    private static func floorModulo(_ a: Int64, _ b: Int64) -> Int64 {
        a - floorDivide(a, b) * b
    }

    private static func twoDigits(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }

    private static func fourDigits(_ value: Int) -> String {
        String(repeating: "0", count: max(0, 4 - "\(value)".count)) + "\(value)"
    }
}
