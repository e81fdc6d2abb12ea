import Foundation
import PaywallDefaults
import Testing

@Suite struct PaywallDefaultsTests {
    /// The resource is a canonical bundle: a zip whose first entry is
    /// manifest.json, byte for byte the bundle `fpctl bundle build` writes from
    /// the same source run directly (`EXPECTED_FPBUNDLE`, from
    /// Scripts/check-plugin.sh).
    @Test func resourceIsTheBuiltBundle() throws {
        let url = try #require(PaywallDefaults.url, "no flowpilot.fpbundle in Bundle.module")
        let data = try Data(contentsOf: url)
        #expect(data.prefix(4) == Data([0x50, 0x4B, 0x03, 0x04]))
        let nameLength = Int(data[26]) | Int(data[27]) << 8
        #expect(String(decoding: data[30..<(30 + nameLength)], as: UTF8.self) == "manifest.json")
        if let expected = ProcessInfo.processInfo.environment["EXPECTED_FPBUNDLE"] {
            #expect(data == (try Data(contentsOf: URL(fileURLWithPath: expected))))
        }
    }
}
