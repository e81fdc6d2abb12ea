import Foundation

/// A `Retry-After` header (RFC 9110, 10.2.3): the seconds to wait, from
/// delay-seconds (a non-negative number; a fraction is taken as given) or an
/// HTTP-date (IMF-fixdate, or the obsolete RFC 850 and asctime forms), never
/// more than `limit` and never negative. Anything else (a negative or
/// non-finite number such as `-1e300` or `inf`, a date that does not parse) is
/// ignored: nil, as if the header were absent. It is remote input: no value
/// of it may trap or stall a run.
public enum RetryAfter {
    public static let limit: Double = 10

    public static func seconds(_ header: String, now: Date = Date()) -> Double? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard let first = text.utf8.first else { return nil }
        if first == UInt8(ascii: "-") || first == UInt8(ascii: "+") || first == UInt8(ascii: ".")
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
        {
            // Digits and at most one point: no sign, exponent, hex or "inf".
            guard
                text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: ".") }
                ),
                let value = Double(text), value.isFinite
            else { return nil }
            return min(limit, value)
        }
        guard let date = httpDate(text) else { return nil }
        return min(limit, max(0, date.timeIntervalSince(now)))
    }

    /// An HTTP-date in any of its three forms, in GMT.
    static func httpDate(_ text: String) -> Date? {
        // asctime pads a one-digit day with a space: "Sun Nov  6 08:49:37 1994".
        let text = text.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        for format in formats {
            if let date = formatter(format).date(from: text) { return date }
        }
        return nil
    }

    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss 'GMT'",  // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
        "EEEE, dd-MMM-yy HH:mm:ss 'GMT'",  // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
        "EEE MMM d HH:mm:ss yyyy",  // asctime: Sun Nov  6 08:49:37 1994
    ]

    private static func formatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        formatter.isLenient = false
        return formatter
    }
}
