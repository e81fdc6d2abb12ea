/// A whole number's decimal digits appended to bytes as they are made (a
/// sign before a negative one): what a CSV row or a request log line writes
/// many times a second, with no string made of each number.
public enum DecimalText {
    public static func append(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var rest = value.magnitude
        let start = bytes.count
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        // Written least significant digit first.
        bytes[start...].reverse()
    }
}
