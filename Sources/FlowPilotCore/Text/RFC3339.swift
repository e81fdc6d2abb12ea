import Foundation

/// RFC 3339 UTC times (`1980-01-01T00:00:00Z`), whatever the process time zone.
public enum RFC3339 {
    /// `YYYY-MM-DDTHH:MM:SSZ` from `gmtime_r`: listing 100,000 entries formats as
    /// many times, and Foundation's formatter costs microseconds each.
    public static func string(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        let year = Int(tm.tm_year) + 1900
        if (0...9999).contains(year) {
            // Twenty bytes written in place: a listing of millions formats one a row.
            return String(unsafeUninitializedCapacity: 20) { write(tm, year, into: $0) }
        }
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let y = year < 1000 ? String(repeating: "0", count: 4 - String(year).count) + String(year) : String(year)
        return "\(y)-\(two(tm.tm_mon + 1))-\(two(tm.tm_mday))T\(two(tm.tm_hour)):\(two(tm.tm_min)):\(two(tm.tm_sec))Z"
    }

    /// `string(date)`'s bytes appended to `out`, with no string made for a year of four digits.
    public static func append(_ date: Date, to out: inout [UInt8]) {
        var t = time_t(date.timeIntervalSince1970.rounded(.down))
        var tm = tm()
        gmtime_r(&t, &tm)
        let year = Int(tm.tm_year) + 1900
        guard (0...9999).contains(year) else { return out.append(contentsOf: string(date).utf8) }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: 20))
        out.withUnsafeMutableBufferPointer {
            _ = write(tm, year, into: UnsafeMutableBufferPointer(rebasing: $0[start...]))
        }
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` into `out`'s first 20 bytes; returns 20.
    private static func write(_ tm: tm, _ year: Int, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        func put(_ value: Int, _ digits: Int, at: Int) {
            var value = value
            for i in stride(from: at + digits - 1, through: at, by: -1) {
                out[i] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
            }
        }
        put(year, 4, at: 0)
        put(Int(tm.tm_mon) + 1, 2, at: 5)
        put(Int(tm.tm_mday), 2, at: 8)
        put(Int(tm.tm_hour), 2, at: 11)
        put(Int(tm.tm_min), 2, at: 14)
        put(Int(tm.tm_sec), 2, at: 17)
        (out[4], out[7], out[10], out[13], out[16], out[19]) = (45, 45, 84, 58, 58, 90)  // - - T : : Z
        return 20
    }

    public static func parse(_ s: String) -> Date? {
        if let d = try? Date.ISO8601FormatStyle(timeZone: .gmt).parse(s) { return d }
        return try? Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: .gmt).parse(s)
    }
}
