import Foundation
import FuzzSupport

@testable import FlowPilotCore

// The path type (PathName, over swift-system's FilePath) and the temporary
// name an output is written under, on any bytes a person or a script can pass
// as a path: never a crash (a one-character name trapped in NSString's path
// methods), a last component without '/', a parent to open, a join that ends
// in the component it was given, and a temporary name within NAME_MAX.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPaths(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let path = String(decoding: Fuzz.bytes(start, count), as: UTF8.self)
    guard !path.utf8.contains(0) else { return 0 }
    let last = PathName.lastComponent(of: path)
    let parent = PathName.parent(of: path)
    // Bytes, not Characters: a combining mark after '/' or '.' makes one
    // Character of the two, which String's contains and hasPrefix would miss.
    let slash = UInt8(ascii: "/")
    Fuzz.check(!last.utf8.contains(slash), "last component of \(path.debugDescription) is \(last.debugDescription)")
    Fuzz.check(!parent.isEmpty, "parent of \(path.debugDescription) is empty")
    if !last.isEmpty, last != ".", last != ".." {
        let joined = PathName.join(parent, last)
        Fuzz.check(
            PathName.lastComponent(of: joined) == last,
            "join(\(parent.debugDescription), \(last.debugDescription)) is \(joined.debugDescription)")
    }
    let temporary = AtomicFile.Output.temporaryName(for: path)
    Fuzz.check(
        temporary.utf8.count <= 255 && temporary.utf8.first == UInt8(ascii: ".") && !temporary.utf8.contains(slash),
        "temporary name for \(path.debugDescription) is \(temporary.debugDescription)")
    return 0
}
