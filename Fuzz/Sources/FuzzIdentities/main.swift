import Foundation
import FuzzSupport

@testable import FlowPilotCore

// Identities JSON Lines: never crashes, and how the input is cut into read
// chunks never changes what is read (the same identities, or the same error).
func read(_ data: Data, chunk: Int) -> Result<[String], FPError> {
    var lines = LineBuffer()
    var out: [String] = []
    var number = 0
    var offset = 0
    var atEnd = false
    do {
        while true {
            if let line = lines.nextLine() ?? (atEnd ? lines.remainder() : nil) {
                number += 1
                if let identity = try IdentityLines.identity(line, name: "ids.jsonl", lineNumber: number) {
                    out.append(identity.userID + "|" + identity.fingerprint)
                }
                continue
            }
            if atEnd { return .success(out) }
            if offset < data.count {
                let end = min(data.count, offset + chunk)
                lines.append(data.subdata(in: offset..<end))
                offset = end
            } else {
                atEnd = true
            }
        }
    } catch let error as FPError {
        return .failure(error)
    } catch {
        Fuzz.fail("not an FPError: \(error)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIdentities(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let chunk = Int(start.load(as: UInt8.self)) % 17 + 1
    let data = Fuzz.bytes(start + 1, count - 1)
    let whole = read(data, chunk: max(data.count, 1))
    let pieces = read(data, chunk: chunk)
    switch (whole, pieces) {
    case (.success(let a), .success(let b)): Fuzz.check(a == b, "chunking changed the identities read")
    case (.failure(let a), .failure(let b)): Fuzz.check("\(a)" == "\(b)", "chunking changed the error: \(a) / \(b)")
    default: Fuzz.fail("chunking changed success into failure or back")
    }
    for line in Array(data).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
        checkLine(line)
    }
    return 0
}

/// A line read as a member list (the fast path) gives the identity the
/// whole value gives: a line is an identity exactly when it is an object
/// with a string user_id, with the same user id and attributes.
func checkLine(_ line: ArraySlice<UInt8>) {
    let read = try? IdentityLines.identity(line, name: "ids.jsonl", lineNumber: 1)
    let value = try? JSONValue.parse(Data(line))
    let user = value?["user_id"]?.stringValue
    Fuzz.check((read != nil) == (user != nil), "a line with a string user_id is an identity, and only such a line")
    if let read, let value, let user {
        let expected = Identity(userID: user, attributes: value["attributes"]?.objectValue ?? [:])
        Fuzz.check(
            read.userID.sameBytes(as: user) && read.fingerprint.sameBytes(as: expected.fingerprint),
            "another identity than the line's")
    }
}
