import Dispatch
import Foundation

/// An output file whose write(2) calls run on a second thread: the thread that
/// feeds libarchive (CRC-32, deflate) copies each block into one of a few
/// buffers and goes on, while the copy into the kernel's page cache, as long
/// again for stored media, happens beside it. At most `bufferCount` buffers
/// exist, so memory stays bounded and a slow disk slows the producer instead
/// of growing a queue. The first failed write is kept and reported by the
/// next `append` or by `finish`. Each block written is handed to the disk at
/// once (`Platform.startWriteback`), so the sync that publishes the bundle
/// (`AtomicFile.Output.commit`) waits for the last blocks only, not all of them.
final class WriteBehind: @unchecked Sendable {
    static let bufferSize = 1 << 20
    static let bufferCount = 4

    private let fd: Int32
    private let queue = DispatchQueue(label: "fpctl.write-behind")
    private let free = DispatchSemaphore(value: WriteBehind.bufferCount)
    private let lock = NSLock()
    // Guarded by `lock`: buffers returned by the writer, and its first error.
    private var spare: [UnsafeMutableRawBufferPointer] = []
    private var failure: Int32?
    // The producer's own.
    private var current: UnsafeMutableRawBufferPointer?
    private var filled = 0
    private var allocated: [UnsafeMutableRawBufferPointer] = []
    private var finished = false
    // The writer thread's own: where the next block goes.
    private var written = 0

    /// Writes to `descriptor` from its current offset; the caller owns it
    /// (opens, syncs and closes it: `AtomicFile.Output`).
    init(descriptor: Int32) {
        fd = descriptor
    }

    deinit {
        // Dropped after a failure: give back the buffer being filled (libdispatch
        // traps on a semaphore freed below its initial value) and let the
        // writer finish what it has.
        if current != nil { free.signal() }
        if !finished { queue.sync {} }
        for buffer in allocated { buffer.deallocate() }
    }

    /// Queues `bytes` to be written after everything appended before.
    func append(_ bytes: UnsafeRawBufferPointer) throws {
        if let error = lock.withLock({ failure }) { throw Self.error(error) }
        var rest = bytes
        while !rest.isEmpty {
            let buffer = current ?? takeBuffer()
            current = buffer
            let n = min(rest.count, buffer.count - filled)
            UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<filled + n]).copyMemory(
                from: UnsafeRawBufferPointer(rebasing: rest[0..<n]))
            filled += n
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if filled == buffer.count { submit() }
        }
    }

    /// Writes what is left and waits for every write.
    func finish() throws {
        guard !finished else { return }
        finished = true
        if current != nil { submit() }
        queue.sync {}
        if let error = lock.withLock({ failure }) { throw Self.error(error) }
    }

    private func takeBuffer() -> UnsafeMutableRawBufferPointer {
        free.wait()
        if let buffer = lock.withLock({ spare.popLast() }) { return buffer }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 64)
        allocated.append(buffer)
        return buffer
    }

    private func submit() {
        guard let buffer = current else { return }
        let count = filled
        current = nil
        filled = 0
        let fd = self.fd
        let block = Block(buffer: buffer)
        queue.async {
            if self.lock.withLock({ self.failure }) == nil {
                if let error = FlowPilotCore.writeAll(fd, UnsafeRawBufferPointer(rebasing: block.buffer[0..<count])) {
                    self.lock.withLock { self.failure = error }
                } else {
                    Platform.startWriteback(fd, offset: self.written, count: count)
                    self.written += count
                }
            }
            self.lock.withLock { self.spare.append(block.buffer) }
            self.free.signal()
        }
    }

    /// A buffer handed to the writer thread; the producer does not touch it
    /// until the writer gives it back through `spare`.
    private struct Block: @unchecked Sendable {
        let buffer: UnsafeMutableRawBufferPointer
    }

    private static func error(_ code: Int32) -> ArchiveError {
        ArchiveError(message: Errno.describe(code))
    }
}
