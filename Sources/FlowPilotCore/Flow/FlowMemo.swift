import Foundation
import Synchronization

/// Flows already validated in this process, by their bytes as the backend
/// sent them: a warm receives the same few flows for thousands of identities,
/// and bytes equal to those of a flow validated before need neither parsing,
/// validating nor encoding again (the answer's other members are parsed; the
/// flow's are compared). Bounded: past `limit` distinct flows, new ones are
/// validated without being kept.
///
/// A flow is looked up by a probe, a hash of its length and its first and last
/// 64 bytes (hashing every byte cost more than the rest of an answer's
/// reading), then compared whole. At most `perProbe` flows share a probe, so
/// a backend that sends many flows alike at both ends costs a few comparisons
/// per answer, never a long chain.
final class FlowMemo: Sendable {
    private let flows = Mutex<(byProbe: [Int: [(bytes: Data, document: FlowDocument)]], count: Int)>(([:], 0))
    static let limit = 4096
    static let perProbe = 4

    /// The document for the flow whose JSON is `bytes`: the remembered one
    /// when the bytes are the same, else parsed and validated (and remembered
    /// when valid without findings).
    func validate(bytes: UnsafeRawBufferPointer, location: String) -> (FlowDocument?, [Finding]) {
        let probe = Self.probe(bytes)
        let known = flows.withLock { flows in
            flows.byProbe[probe]?.first { Self.same($0.bytes, bytes) }?.document
        }
        if let known { return (known, []) }
        let data = Data(bytes)
        let (doc, findings) = FlowDocument.validate(data: data, location: location)
        if let doc, findings.isEmpty {
            flows.withLock { flows in
                let alike = flows.byProbe[probe, default: []]
                guard flows.count < Self.limit, alike.count < Self.perProbe else { return }
                flows.byProbe[probe] = alike + [(data, doc)]
                flows.count += 1
            }
        }
        return (doc, findings)
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

    private static func same(_ data: Data, _ bytes: UnsafeRawBufferPointer) -> Bool {
        data.count == bytes.count
            && data.withUnsafeBytes { stored in
                guard let a = stored.baseAddress, let b = bytes.baseAddress else { return true }
                return memcmp(a, b, bytes.count) == 0
            }
    }
}
