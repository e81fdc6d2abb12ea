import Foundation
import Testing

/// The line and column (from 1; the column in Unicode scalars) where `needle`
/// first (or for the `occurrence`th time) occurs in `text`: what a finding
/// about that value must name, counted from the file itself rather than from any golden.
func position(of needle: String, in text: String, occurrence: Int = 1) -> (line: Int, column: Int) {
    var from = text.startIndex
    var found: Range<String.Index>?
    for _ in 0..<occurrence {
        found = text.range(of: needle, range: from..<text.endIndex)
        guard let hit = found else { break }
        from = hit.upperBound
    }
    guard let range = found else {
        Issue.record("\(needle) is not in the text \(occurrence) times")
        return (0, 0)
    }
    let before = text[..<range.lowerBound]
    let line = before.unicodeScalars.count { $0 == "\n" } + 1
    let lineStart = before.lastIndex(of: "\n").map { before.index(after: $0) } ?? before.startIndex
    return (line, before[lineStart...].unicodeScalars.count + 1)
}
