/// Text from outside (a user id, a backend's error code or message, a file
/// name) made safe to print on a terminal or in a line-based format: control
/// characters (C0, DEL, C1) become visible escapes (`\n`, `\r`, `\t`,
/// `\x1b`, `\u{85}`), so a newline cannot forge a row and `ESC[2J` cannot
/// clear the reader's screen. Everything else, Unicode included, is kept.
public enum Printable {
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            guard isControl(scalar) else {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                let hex = String(scalar.value, radix: 16)
                out += scalar.value < 0x80 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{\(hex)}"
            }
        }
        return out
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// A backend's error code as fpctl keeps it (outcome rows, JSON, the
    /// metrics' `error` label): letters, digits, `.`, `_` and `-`, anything
    /// else as `_`, at most 64 characters. A code is an identifier, not text.
    public static func code(_ code: String) -> String {
        var out = ""
        for scalar in code.unicodeScalars.prefix(64) {
            let ok =
                ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                || scalar == "." || scalar == "_" || scalar == "-"
            out.unicodeScalars.append(ok ? scalar : "_")
        }
        return out.isEmpty ? "error" : out
    }
}
