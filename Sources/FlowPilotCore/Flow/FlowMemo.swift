import Foundation
import Synchronization

/// Flows already validated in this process, by their bytes as the backend
/// sent them: a warm receives the same few flows for thousands of identities,
/// and bytes equal to those of a flow validated before need neither parsing,
/// validating nor encoding again (the answer's other members are parsed; the
/// flow's are compared). Bounded: past `limit` distinct flows, new ones are
/// validated without being kept.
///
/// A flow is looked for first among the few met last (`recent`), compared
/// whole, then by a probe, a hash of its length and its first and last
/// 64 bytes (hashing every byte cost more than the rest of an answer's
/// reading), then compared whole. At most `perProbe` flows share a probe, so
/// a backend that sends many flows alike at both ends costs a few comparisons
/// per answer, never a long chain.
///
/// The flows validated last (`recent`, up to `recentLimit`) also let an
/// answer's reading skip a flow's bytes: `prefix(of:)` finds one the answer
/// goes on with (`JSONParser.parseKeepingRaw`).
final class FlowMemo: Sendable, KnownValues {
    /// A flow kept: its bytes as sent, its document, how deeply it nests.
    private final class Known: Sendable {
        /// As an array: compared against answers without `Data`'s checked accesses.
        let raw: [UInt8]
        let document: FlowDocument
        let nesting: Int

        init(raw: [UInt8], document: FlowDocument, nesting: Int) {
            (self.raw, self.document, self.nesting) = (raw, document, nesting)
        }
    }

    private struct State {
        var byProbe: [Int: [Known]] = [:]
        var count = 0
        /// The flows validated or found last, newest last.
        var recent: [Known] = []

        mutating func used(_ known: Known) {
            guard !recent.contains(where: { $0 === known }) else { return }
            if recent.count == FlowMemo.recentLimit { recent.removeFirst() }
            recent.append(known)
        }
    }

    private let flows = Mutex(State())
    static let limit = 4096
    static let perProbe = 4
    static let recentLimit = 8

    /// The document for the flow whose JSON is `bytes`: the remembered one
    /// when the bytes are the same, else parsed and validated (and remembered
    /// when valid without findings).
    func validate(bytes: UnsafeRawBufferPointer, location: String) -> (FlowDocument?, [Finding]) {
        // The flows met last first, compared whole (a length differs, or `memcmp` stops at the first
        // byte that does): a warm's few flows are found with no hash made.
        let recent = flows.withLock { flows in flows.recent.last { Self.same($0.raw, bytes) }?.document }
        if let recent { return (recent, []) }
        let probe = Self.probe(bytes)
        let known = flows.withLock { flows -> FlowDocument? in
            guard let known = flows.byProbe[probe]?.first(where: { Self.same($0.raw, bytes) }) else { return nil }
            flows.used(known)
            return known.document
        }
        if let known { return (known, []) }
        let data = Data(bytes)
        let (doc, findings) = FlowDocument.validate(data: data, location: location)
        if let doc, findings.isEmpty, let nesting = JSONParser.nesting(of: bytes) {
            let known = Known(raw: Array(bytes), document: doc, nesting: nesting)
            flows.withLock { flows in
                let alike = flows.byProbe[probe, default: []]
                guard flows.count < Self.limit, alike.count < Self.perProbe else { return }
                flows.byProbe[probe] = alike + [known]
                flows.count += 1
                flows.used(known)
            }
        }
        return (doc, findings)
    }

    /// The length and nesting of a recent flow whose bytes `bytes` begins with.
    func prefix(of bytes: UnsafeRawBufferPointer) -> (length: Int, nesting: Int)? {
        flows.withLock { flows in
            for known in flows.recent.reversed() where known.raw.count <= bytes.count {
                let equal = known.raw.withUnsafeBytes { stored in
                    guard let a = stored.baseAddress, let b = bytes.baseAddress else { return false }
                    return memcmp(a, b, stored.count) == 0
                }
                if equal { return (known.raw.count, known.nesting) }
            }
            return nil
        }
    }

    /// How many flows are kept.
    var count: Int { flows.withLock { $0.count } }

    private static func probe(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes.count)
        hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.prefix(64)))
        hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: bytes.suffix(64)))
        return hasher.finalize()
    }

    private static func same(_ raw: [UInt8], _ bytes: UnsafeRawBufferPointer) -> Bool {
        raw.count == bytes.count
            && raw.withUnsafeBytes { stored in
                guard let a = stored.baseAddress, let b = bytes.baseAddress else { return true }
                return memcmp(a, b, bytes.count) == 0
            }
    }
}
