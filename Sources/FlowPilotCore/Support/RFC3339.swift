import Foundation

/// RFC 3339 UTC times (`1980-01-01T00:00:00Z`), whatever the process time zone.
public enum RFC3339 {
    public static func string(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt))
    }

    public static func parse(_ s: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(s) { return d }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).parse(s)
    }
}
