import Foundation
import Testing

/// Debian's chromium, headless, with no network: in a network namespace of its
/// own when the tests run as root (only a loopback that is down), else pointed
/// at a proxy nobody listens on. What the preview tests look at a page with.
struct Browser {
    let chromium: String
    private let profile: TemporaryDirectory

    init() throws {
        chromium = try tool("chromium")
        profile = try TemporaryDirectory()
    }

    private func command(_ arguments: [String]) -> (String, [String]) {
        let flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--user-data-dir=\(profile.path)", "--force-device-scale-factor=1", "--hide-scrollbars",
        ]
        if getuid() == 0, let unshare = which("unshare") {
            return (unshare, ["--net", chromium] + flags + arguments)
        }
        return (chromium, flags + ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"] + arguments)
    }

    /// The DOM after the page loaded, as chromium serializes it.
    func dumpDOM(_ page: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let (program, arguments) = command(["--dump-dom", URL(fileURLWithPath: page).absoluteString])
        let result = try run(program, arguments, timeout: 90)
        #expect(result.status == 0, "chromium --dump-dom: \(result.stderr)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// A PNG of the page in a window of `width` by `height` CSS pixels at one device pixel each.
    func screenshot(_ page: String, to png: String, width: Int, height: Int) throws {
        let (program, arguments) = command([
            "--screenshot=\(png)", "--window-size=\(width),\(height)", URL(fileURLWithPath: page).absoluteString,
        ])
        let result = try run(program, arguments, timeout: 90)
        #expect(result.status == 0, "chromium --screenshot: \(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: png), "chromium wrote no screenshot: \(result.stderr)")
    }
}
