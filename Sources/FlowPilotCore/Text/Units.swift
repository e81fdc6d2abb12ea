/// Sizes and durations as every command takes them (README, "Usage"; fpctl(1)).
public enum Units {
    /// `ms s m h d w y` (a year is 365 days), compounds like `1h30m`; a bare number is seconds.
    public static func parseDuration(_ text: String) -> Double? {
        let units: [String: Double] = [
            "ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800, "y": 31_536_000,
        ]
        // Digits and a point only: `Double` alone would also take "inf", "nan", "1e9" and "0x10".
        let isDecimal = { (c: Character) in c.isASCII && (c.isNumber || c == ".") }
        if !text.isEmpty, text.allSatisfy(isDecimal) {
            guard let plain = Double(text), plain.isFinite else { return nil }
            return plain
        }
        var total = 0.0
        var rest = Substring(text)
        guard !rest.isEmpty else { return nil }
        while !rest.isEmpty {
            let number = rest.prefix(while: isDecimal)
            guard !number.isEmpty, let value = Double(number) else { return nil }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix(while: { $0.isLetter })
            guard let factor = units[String(unit)] else { return nil }
            rest = rest.dropFirst(unit.count)
            total += value * factor
        }
        return total.isFinite ? total : nil
    }

    /// Bytes, or `k/M/G` (decimal) and `KiB/MiB/GiB` (binary), e.g. `200MiB`.
    public static func parseSize(_ text: String) -> Int64? {
        let units: [String: Double] = [
            "": 1, "b": 1, "B": 1, "k": 1e3, "K": 1e3, "kB": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9,
            "KiB": 1024, "MiB": 1_048_576, "GiB": 1_073_741_824,
        ]
        let number = text.prefix(while: { $0.isASCII && ($0.isNumber || $0 == ".") })
        guard !number.isEmpty, let value = Double(number), let factor = units[String(text.dropFirst(number.count))]
        else { return nil }
        let bytes = value * factor
        guard bytes < 9e18 else { return nil }
        return Int64(bytes.rounded())
    }
}

extension Units {
    /// A duration option's value, a leading `-` kept as a sign so that the
    /// caller can say the range (`--timeout -1s`: use more than 0s to 1h)
    /// rather than call the value unreadable.
    public static func parseSignedDuration(_ text: String) -> Double? {
        let negative = text.hasPrefix("-")
        guard let seconds = parseDuration(negative ? String(text.dropFirst()) : text) else { return nil }
        return negative ? -seconds : seconds
    }

    /// `seconds` as a Duration, held within `0...limit` (a value outside is
    /// refused with its range before this is asked; never a trap).
    public static func duration(seconds: Double, limit: Double) -> Duration {
        let held = seconds.isNaN ? 0 : Swift.min(Swift.max(seconds, 0), Swift.max(limit, 0))
        return .milliseconds(Int64((Swift.min(held, 9e15) * 1000).rounded()))
    }

    /// `--latency 200` or `100-300`: one or two whole milliseconds, not negative.
    public static func parseLatency(_ text: String) -> [Int]? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
        guard (1...2).contains(parts.count) else { return nil }
        let values = parts.compactMap { $0 }
        guard values.count == parts.count, values.allSatisfy({ $0 >= 0 }) else { return nil }
        return values
    }
}
