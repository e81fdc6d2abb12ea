import Foundation

/// RFC 3339 UTC times (`1980-01-01T00:00:00Z`), whatever the process time zone.
public enum RFC3339 {
    /// `YYYY-MM-DDTHH:MM:SSZ` from `gmtime_r`: listing 100,000 entries formats as
    /// many times, and Foundation's formatter costs microseconds each.
    public static func string(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = Int(tm.tm_year) + 1900
        let y = year < 1000 ? String(repeating: "0", count: 4 - String(year).count) + String(year) : String(year)
        return "\(y)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }

    public static func parse(_ s: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(s) { return d }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).parse(s)
    }
}
