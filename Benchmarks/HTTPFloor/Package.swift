// swift-tools-version:6.2
// The floor under `fpctl warm`'s client CPU (Benchmarks/warm_wrk_bench.py
// --floor): AsyncHTTPClient, configured as fpctl's transport configures it,
// posting the same resolve-batch bodies with C requests in flight and reading
// each answer whole, with nothing parsed and nothing written. Not part of the
// fpctl package: CI never builds it.
import PackageDescription

let package = Package(
    name: "HTTPFloor",
    dependencies: [
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .executableTarget(
            name: "http-floor",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ])
    ]
)
