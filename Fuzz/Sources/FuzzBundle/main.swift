import Foundation
import FuzzSupport

@testable import FlowPilotCore

// Bundle validation on arbitrary bytes: the zip directory, then the reader's
// streaming pass. Never crashes; an archive it calls valid has a digest and a
// manifest, and extracts with every file inside the target directory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBundle(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let path = Fuzz.writeScratch(Fuzz.bytes(start, count), suffix: ".fpbundle")
    guard let report = try? BundleValidator.validate(path, options: .init(strict: count % 2 == 0)) else {
        Fuzz.fail("validate threw for an existing file")
    }
    guard report.isValid else { return 0 }
    Fuzz.check(report.digest != nil && report.manifest != nil, "a valid bundle without digest or manifest")
    let parent = Fuzz.scratchPath + ".extract"
    try? FileManager.default.removeItem(atPath: parent)
    defer { try? FileManager.default.removeItem(atPath: parent) }
    do {
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: false)
        _ = try BundleExtractor.extract(path, into: parent + "/out", force: false)
    } catch {
        Fuzz.fail("a valid bundle does not extract: \(error)")
    }
    let top = (try? FileManager.default.contentsOfDirectory(atPath: parent)) ?? []
    Fuzz.check(top == ["out"], "extract wrote outside its directory: \(top)")
    return 0
}
