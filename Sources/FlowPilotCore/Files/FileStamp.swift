import Foundation

/// What a file's inode says of its content: device, inode, size, modification
/// and status-change times. The same stamp before and after a read means the
/// bytes read are the bytes there, as git's index assumes, except for a file
/// changed within the file system's timestamp granularity of being stamped
/// (git's "racy" files): `stamp(_:)` gives no stamp for those, and callers read
/// them again instead.
struct FileStamp: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int
    let modifiedNanoseconds: Int
    let changedSeconds: Int
    let changedNanoseconds: Int

    /// A status change this close to the stamping (seconds) makes the stamp
    /// unsafe: Linux takes file times from a clock that ticks every few
    /// milliseconds, so a second write in the same tick leaves them unchanged.
    static let racyWindow = 2

    init?(fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        let times = Platform.times(st)
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        (modifiedSeconds, modifiedNanoseconds) = times.modified
        (changedSeconds, changedNanoseconds) = times.changed
    }

    /// The stamp of an open file, or nil when it is racy: changed less than
    /// `racyWindow` seconds before `now`, or in the future.
    static func stamp(_ fd: Int32, now: Date = Date()) -> FileStamp? {
        guard let stamp = FileStamp(fd: fd) else { return nil }
        let latest = max(stamp.modifiedSeconds, stamp.changedSeconds)
        return latest + racyWindow <= Int(now.timeIntervalSince1970) ? stamp : nil
    }
}
