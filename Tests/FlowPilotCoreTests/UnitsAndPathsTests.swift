import Foundation
import Synchronization
import Testing

@testable import FlowPilotCore

@Suite("arguments and archive paths")
struct UnitsAndPathsTests {
    @Test(
        "durations: ms s m h d w and compounds",
        arguments: [
            ("90", 90.0), ("250ms", 0.25), ("4s", 4), ("1h30m", 5400), ("60d", 5_184_000), ("2w", 1_209_600),
        ])
    func durations(text: String, seconds: Double) {
        #expect(Units.parseDuration(text) == seconds)
    }

    // "InF" came from FuzzUnits (Fuzz/Regressions/units): `Double` took it as infinity.
    @Test(
        "bad durations are refused, and none is infinite",
        arguments: [
            "", "5x", "h", "-3s", "1.2.3s", "InF", "inf", "nan", "infinity", "1e3", "0x10",
            String(repeating: "9", count: 400), String(repeating: "9", count: 400) + "w", "\u{0663}s",
        ])
    func badDurations(text: String) {
        #expect(Units.parseDuration(text) == nil)
    }

    @Test(
        "sizes: bytes, decimal k/M/G and binary KiB/MiB/GiB",
        arguments: [
            ("512", Int64(512)), ("1k", 1000), ("1KB", 1000), ("1MB", 1_000_000), ("200MiB", 209_715_200),
            ("2G", 2_000_000_000), ("1.5KiB", 1536),
        ])
    func sizes(text: String, bytes: Int64) {
        #expect(Units.parseSize(text) == bytes)
    }

    @Test("canonical archive paths", arguments: ["manifest.json", "flows/on-boarding_2.json", "media/ab.png"])
    func canonical(path: String) {
        #expect(BundlePath.isCanonical(path))
        #expect(BundlePath.problem(path) == nil)
    }

    @Test(
        "non-canonical paths name the trick they try",
        arguments: [
            ("../x", "zip-path-traversal"), ("/etc/x", "zip-path-absolute"), ("a\\b", "zip-path-backslash"),
            ("c:/x", "zip-path-absolute"), ("media/", "zip-entry-type"), ("Media/x", "zip-path-noncanonical"),
            ("a//b", "zip-path-noncanonical"), (".hidden", "zip-path-noncanonical"),
            (String(repeating: "a", count: 256), "zip-path-length"),
        ])
    func problems(path: String, rule: String) {
        #expect(BundlePath.problem(path)?.rule == rule)
    }

    @Test("already-compressed media are stored, everything else deflated")
    func storedExtensions() {
        #expect(BundlePath.isStored("media/x.png") && BundlePath.isStored("fonts/x.woff2"))
        #expect(!BundlePath.isStored("flows/x.json") && !BundlePath.isStored("fonts/x.ttf"))
    }

    @Test(
        "a path's parent and last component, for every shape a person types",
        arguments: [
            ("x", ".", "x"), ("é", ".", "é"), ("xy", ".", "xy"), ("./x", ".", "x"), ("x/", ".", "x"),
            ("sub/x", "sub", "x"), ("/x", "/", "x"), ("/", "/", ""), ("", ".", ""), ("a/b/c", "a/b", "c"),
            ("a b/c d", "a b", "c d"), ("../x", "..", "x"), ("a//b", "a", "b"), ("/a/b/", "/a", "b"),
            ("/cache/flows/p/k", "/cache/flows/p", "k"),
            // A combining mark after '/' is one Character with it, two scalars: split at the byte
            // (Fuzz/Regressions/paths/combining-mark-after-slash).
            ("\u{E9}x/\u{0329}\u{E9}", "\u{E9}x", "\u{0329}\u{E9}"),
        ])
    func pathNames(path: String, parent: String, last: String) {
        #expect(PathName.parent(of: path) == parent)
        #expect(PathName.lastComponent(of: path) == last)
    }

    @Test("an output's temporary name starts with a '.' byte and holds no '/', whatever follows the slash")
    func temporaryNameAfterCombiningMark() {
        for target in ["x/\u{0329}\u{E9}\u{FFFD}", "out/.\u{0301}x", "\u{0301}"] {
            let name = AtomicFile.Output.temporaryName(for: target)
            #expect(name.utf8.first == UInt8(ascii: ".") && !name.utf8.contains(UInt8(ascii: "/")), "\(name)")
            #expect(name.utf8.starts(with: ("." + PathName.lastComponent(of: target)).utf8), "\(name)")
        }
    }

    @Test("a TTL is a whole number of seconds from 0 to 2,147,483,647; anything else is refused")
    func ttlRange() {
        #expect(TTL.seconds(0) == 0 && TTL.seconds(300) == 300 && TTL.seconds(1.9) == 1)
        #expect(TTL.seconds(2_147_483_647) == 2_147_483_647)
        for value in [-1, -0.5, 2_147_483_648, 9.223372036854775807e18, 1e300, .infinity, -.infinity, .nan] {
            #expect(TTL.seconds(value) == nil, "\(value)")
        }
    }

    @Test(
        "cache names: free text percent-encoded as documented and decoded back",
        arguments: [
            ("paywall", "paywall"), ("on boarding", "on%20boarding"), (".hidden", "%2Ehidden"), ("a.b", "a.b"),
            ("u~1", "u%7E1"), ("", "%"), ("caf\u{E9}", "caf%C3%A9"), ("a/b%", "a%2Fb%25"),
        ])
    func cacheNames(text: String, encoded: String) throws {
        #expect(CacheNames.encode(text) == encoded)
        #expect(CacheNames.decode(Substring(encoded)) == text)
    }

    @Test("entry stamps sort by time: printf's %014lld of the milliseconds, then a unique part")
    func cacheStamps() throws {
        for seconds in [0, 0.001, 1_795_661_692.628, 99_999_999_999.999, -0.001, -1.234] {
            let date = Date(timeIntervalSince1970: seconds)
            let ms = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
            let parts = CacheNames.stamp(date).split(separator: "~")
            #expect(parts.count == 2 && parts[0] == String(format: "%014lld", ms), "\(seconds)")
            #expect(CacheNames.parseStamp(parts[0]).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } == ms)
        }
        // Two writes in the same millisecond never share a name, from one thread or many.
        let now = Date()
        let names = Mutex(Set<String>())
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let mine = (0..<5_000).map { _ in CacheNames.stamp(now) }
            names.withLock { $0.formUnion(mine) }
        }
        #expect(names.withLock { $0.count } == 40_000)
    }

    @Test("a whole number's digits as Swift prints them, after what the bytes held: zero, signs, both ends of Int64")
    func decimalDigits() {
        var values: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, 1_234_567_890, .max, .min, .max - 1, .min + 1]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            values.append(Int64.random(in: .min ... .max, using: &generator) >> Int64.random(in: 0..<63))
        }
        for value in values {
            var bytes: [UInt8] = Array("x,".utf8)
            DecimalText.append(value, to: &bytes)
            #expect(bytes == Array("x,\(value)".utf8), "\(value)")
        }
        #expect(String(Int64.min).utf8.count == DecimalText.maxLength)
    }
}
