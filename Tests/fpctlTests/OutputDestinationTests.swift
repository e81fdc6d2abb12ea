import Foundation
import Testing

/// What is already where an output goes: a device or a FIFO is written
/// through and stays what it was, a symbolic link is followed to the file it
/// names, a directory is refused. Never a node renamed over.
@Suite("outputs onto devices, FIFOs, symbolic links and directories")
struct OutputDestinationTests {
    func kind(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : 0
    }

    @Test("a character device (a null device made in a temporary directory) is written through and stays a device")
    func characterDevice() throws {
        let tmp = try TemporaryDirectory()
        let null = tmp.file("mynull")
        // 1:3 is /dev/null's device number; making the node needs root, as CI has.
        try #require(mknod(null, S_IFCHR | 0o666, 259) == 0, "mknod: \(String(cString: strerror(errno)))")
        let overwritten = try fpctl("bundle", "build", Paths.sample("demo"), "-o", null, "--overwrite")
        #expect(overwritten.status == 0, "\(overwritten.stderr)")
        // No --overwrite is needed to write to a device, as with a shell's `>`.
        let plain = try fpctl("bundle", "build", Paths.sample("demo"), "-o", null)
        #expect(plain.status == 0, "\(plain.stderr)")
        let page = try fpctl("bundle", "preview", try tmp.buildSample("demo"), "-o", null)
        #expect(page.status == 0, "\(page.stderr)")
        #expect(kind(null) == S_IFCHR)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).sorted() == ["demo.fpbundle", "mynull"])
    }

    @Test("a FIFO is written through: its reader gets the same bytes as a file would, and it stays a FIFO")
    func fifo() throws {
        let tmp = try TemporaryDirectory()
        let fifo = tmp.file("pipe")
        #expect(mkfifo(fifo, 0o644) == 0)
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: try tool("sh"))
        reader.arguments = ["-c", "cat '\(fifo)' > '\(tmp.file("received"))'"]
        try reader.run()
        let r = try fpctl("bundle", "build", Paths.sample("demo"), "-o", fifo, "--overwrite")
        reader.waitUntilExit()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(kind(fifo) == S_IFIFO)
        let file = try tmp.buildSample("demo")
        #expect(
            FileManager.default.contents(atPath: tmp.file("received")) == FileManager.default.contents(atPath: file))
    }

    @Test("a symbolic link is followed: the file it names is replaced, the link stays")
    func symlink() throws {
        let tmp = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: tmp.file("release"), withIntermediateDirectories: false)
        let real = tmp.file("release/app.fpbundle")
        try Data("old".utf8).write(to: URL(fileURLWithPath: real))
        let link = tmp.file("current.fpbundle")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "release/app.fpbundle")
        let refused = try fpctl("bundle", "build", Paths.sample("demo"), "-o", link)
        #expect(refused.status == 73 && refused.stderr.contains("--overwrite"))
        let r = try fpctl("bundle", "build", Paths.sample("demo"), "-o", link, "--overwrite")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(kind(link) == S_IFLNK)
        #expect(try fpctl("bundle", "validate", real).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.file("release")) == ["app.fpbundle"])

        // A dangling link: the file it names is made, and the link then leads to it.
        let dangling = tmp.file("next.fpbundle")
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: "release/next.fpbundle")
        #expect(try fpctl("bundle", "build", Paths.sample("demo"), "-o", dangling).status == 0)
        #expect(kind(dangling) == S_IFLNK)
        #expect(try fpctl("bundle", "validate", dangling).status == 0)
    }

    @Test("a directory where the output goes is refused with 73 and left as it was")
    func directory() throws {
        let tmp = try TemporaryDirectory()
        let dir = tmp.file("out.fpbundle")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        try Data("mine".utf8).write(to: URL(fileURLWithPath: "\(dir)/mine.txt"))
        let r = try fpctl("bundle", "build", Paths.sample("demo"), "-o", dir, "--overwrite")
        #expect(r.status == 73)
        #expect(r.stderr == "fpctl: error: \(dir): is a directory\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["mine.txt"])
    }

    @Test("keygen checks both names before writing either, and takes a name, not a directory")
    func keygen() throws {
        let tmp = try TemporaryDirectory()
        try Data("theirs".utf8).write(to: URL(fileURLWithPath: tmp.file("rel.pub")))
        let r = try fpctl("bundle", "keygen", "-o", tmp.file("rel"))
        #expect(r.status == 73 && r.stderr == "fpctl: error: \(tmp.file("rel.pub")): already exists\n", "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: tmp.file("rel.key")))
        #expect(FileManager.default.contents(atPath: tmp.file("rel.pub")) == Data("theirs".utf8))

        try FileManager.default.createDirectory(atPath: tmp.file("keys"), withIntermediateDirectories: false)
        let directory = try fpctl("bundle", "keygen", "-o", tmp.file("keys") + "/")
        #expect(directory.status == 64, "\(directory.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.file("keys")).isEmpty)

        let made = try fpctl("bundle", "keygen", "-o", tmp.file("keys/release"))
        #expect(made.status == 0, "\(made.stderr)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: tmp.file("keys")).sorted() == [
                "release.key", "release.pub",
            ])
    }

    @Test("'-' and '' are not file names: usage errors (64), and no file named '-' appears")
    func dashAndEmpty() throws {
        let tmp = try TemporaryDirectory()
        for name in ["-", ""] {
            let r = try fpctl(["bundle", "build", Paths.sample("demo"), "-o", name], currentDirectory: tmp.path)
            #expect(r.status == 64, "\(name.debugDescription): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).isEmpty)
    }
}
