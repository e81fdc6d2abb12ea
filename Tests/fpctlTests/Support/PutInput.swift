import Foundation

/// Writes a `cache put` input of one flow line at `path`: the demo's paywall
/// flow for user u-1, with `ttl` as its ttl_seconds, written as it stands.
func writePutLine(_ path: String, ttl: String = "300") throws {
    let flow = Paths.sample("demo") + "/flows/paywall.json"
    try #"{"placement":"paywall","user_id":"u-1","ttl_seconds":\#(ttl),"flow_file":"\#(flow)"}"#
        .write(toFile: path, atomically: true, encoding: .utf8)
}
