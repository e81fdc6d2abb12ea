import Foundation
import Testing

/// The line and column (from 1; the column in Unicode scalars) where `needle`
/// first occurs in `text`: what a finding about that value must name,
/// counted from the file itself rather than from any golden.
func position(of needle: String, in text: String) -> (line: Int, column: Int) {
    guard let range = text.range(of: needle) else {
        Issue.record("\(needle) is not in the text")
        return (0, 0)
    }
    let before = text[..<range.lowerBound]
    let line = before.unicodeScalars.count { $0 == "\n" } + 1
    let lineStart = before.lastIndex(of: "\n").map { before.index(after: $0) } ?? before.startIndex
    return (line, before[lineStart...].unicodeScalars.count + 1)
}
