import Crypto
import Dispatch
import Foundation

/// SHA-256 on a second core: the caller keeps reading (libarchive's inflate and
/// CRC, file I/O) while a serial queue hashes the blocks it has handed over.
/// At most `maxInFlight` copied blocks wait, so memory stays bounded.
///
/// Used where one pass must both move and hash every byte (validate, build).
final class HashPipeline: @unchecked Sendable {
    // Everything below is touched only on `queue`, except `inFlight`.
    private let queue = DispatchQueue(label: "fpctl.hash-pipeline")
    private let inFlight = DispatchSemaphore(value: 16)
    private var hashers: [Int: SHA256] = [:]
    private var digests: [Int: String] = [:]

    /// Queues a copy of `block` for entry `id`.
    func update(_ id: Int, _ block: UnsafeRawBufferPointer) {
        let copy = Data(block)
        inFlight.wait()
        queue.async {
            self.hashers[id, default: SHA256()].update(data: copy)
            self.inFlight.signal()
        }
    }

    /// Marks entry `id` complete; its digest is available from `digest(_:)` after `drain()`.
    func finish(_ id: Int) {
        queue.async {
            let hasher = self.hashers.removeValue(forKey: id) ?? SHA256()
            self.digests[id] = Digest.hex(hasher.finalize())
        }
    }

    /// Waits for every queued block; returns all finished digests by entry id.
    func drain() -> [Int: String] {
        queue.sync { digests }
    }
}
