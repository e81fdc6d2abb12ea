// swift-tools-version:6.2
import PackageDescription

// libFuzzer targets for every input fpctl reads (CONTRIBUTING.md, "Fuzzing").
// Built apart from the main package, with `swift build --sanitize=fuzzer
// --sanitize=address` (Scripts/fuzz.sh), so the everyday build stays as it is.
// Each target reaches internals through `@testable import`: debug builds of a
// path dependency are compiled with testing enabled.
let targets = [
    "FuzzJSON", "FuzzBundle", "FuzzFlow", "FuzzRules", "FuzzIdentities", "FuzzCache", "FuzzKeys", "FuzzUnits",
    "FuzzResolveHandler", "FuzzProxy", "FuzzMedia", "FuzzPreview", "FuzzPaths", "FuzzOptions",
]

// A path dependency is known by its directory's name, whatever the clone is called.
let root = Context.packageDirectory.split(separator: "/").dropLast().last.map { String($0).lowercased() } ?? "fpctl"

let package = Package(
    name: "fpctl-fuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
    ],
    targets: [
        .target(
            name: "FuzzSupport",
            dependencies: [.product(name: "FlowPilotCore", package: root)]
        )
    ]
        + targets.map { name in
            .executableTarget(
                name: name,
                dependencies: [
                    "FuzzSupport",
                    .product(name: "FlowPilotCore", package: root),
                    .product(name: "FlowPilotServer", package: root),
                    .product(name: "FlowPilotOutput", package: root),
                    .product(name: "Crypto", package: "swift-crypto"),
                    .product(name: "NIOCore", package: "swift-nio"),
                    .product(name: "NIOEmbedded", package: "swift-nio"),
                    .product(name: "NIOHTTP1", package: "swift-nio"),
                ]
            )
        }
)
