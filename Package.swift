// swift-tools-version:6.2
import PackageDescription

// The project's own targets build without warnings: a warning is an error here
// (dependencies are not affected: SwiftPM applies this to root targets only).
let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "fpctl",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "fpctl", targets: ["fpctl"]),
        .library(name: "FlowPilotCore", targets: ["FlowPilotCore"]),
        .library(name: "FlowPilotServer", targets: ["FlowPilotServer"]),
        .library(name: "FlowPilotOutput", targets: ["FlowPilotOutput"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
    ],
    targets: [
        // libarchive from the system (Debian: libarchive-dev), found by pkg-config.
        .systemLibrary(
            name: "CArchive",
            pkgConfig: "libarchive",
            providers: [.apt(["libarchive-dev"])]
        ),
        // libdeflate from the system (Debian: libdeflate-dev): its CRC-32 uses the
        // CPU's carry-less multiply, several times faster than zlib's, which
        // libarchive uses. `bundle validate` checks each entry's CRC with it.
        .systemLibrary(
            name: "CDeflate",
            pkgConfig: "libdeflate",
            providers: [.apt(["libdeflate-dev"])]
        ),
        // zlib from the system (Debian: zlib1g-dev): the one deflate a bundle's
        // bytes come from (docs/bundle-format.md, "Byte identity").
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // The domain: flows, bundles, archives. No argument parsing in here.
        .target(
            name: "FlowPilotCore",
            dependencies: [
                "CArchive",
                "CDeflate",
                "CZlib",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strict
        ),
        // How core results look to people: tables, CSV, JSON documents and the
        // preview's HTML page; no argument parsing.
        .target(
            name: "FlowPilotOutput",
            dependencies: ["FlowPilotCore"],
            swiftSettings: strict
        ),
        // `fpctl serve`: a local resolve backend on Hummingbird.
        .target(
            name: "FlowPilotServer",
            dependencies: [
                "FlowPilotCore",
                "FlowPilotOutput",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            swiftSettings: strict
        ),
        // The command line: parse, call the core, render.
        .executableTarget(
            name: "fpctl",
            dependencies: [
                "FlowPilotCore",
                "FlowPilotServer",
                "FlowPilotOutput",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "FlowPilotCoreTests",
            dependencies: [
                "FlowPilotCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "FlowPilotOutputTests",
            dependencies: ["FlowPilotOutput", "FlowPilotCore"],
            swiftSettings: strict
        ),
        // Runs the built fpctl binary, as a pipeline or a person would.
        .testTarget(
            name: "fpctlTests",
            dependencies: [
                "fpctl", "FlowPilotCore", "FlowPilotServer", "FlowPilotOutput",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            exclude: ["Fixtures", "Golden"],
            swiftSettings: strict
        ),
    ]
)
