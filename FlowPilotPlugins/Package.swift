// swift-tools-version:6.1
// fpctl's SwiftPM plugins (docs/app-build.md): the bundled default built by the
// app's own build, and pulled or compared from the command line, with no
// source build of fpctl. The template of a package a release publishes in a
// repository of its own (as SwiftLintPlugins is), where the binary target
// names the release's artifact bundle by URL and checksum:
//     .binaryTarget(name: "fpctl", url: "https://…/fpctl-0.1.0.artifactbundle.zip", checksum: "…")
// Here it is the local zip Scripts/artifactbundle.sh writes.
import PackageDescription

let package = Package(
    name: "FlowPilotPlugins",
    products: [
        .plugin(name: "FlowPilotBundle", targets: ["FlowPilotBundle"]),
        .plugin(name: "FlowPilotPull", targets: ["FlowPilotPull"]),
    ],
    targets: [
        .binaryTarget(name: "fpctl", path: "Binaries/fpctl.artifactbundle.zip"),
        .plugin(name: "FlowPilotBundle", capability: .buildTool(), dependencies: ["fpctl"]),
        .plugin(
            name: "FlowPilotPull",
            capability: .command(
                intent: .custom(
                    verb: "fpctl-pull",
                    description: "Pull the bundle source from the FlowPilot backend (--diff: compare it instead)"),
                permissions: [
                    .allowNetworkConnections(
                        scope: .all(), reason: "fpctl resolves the placements and downloads their media"),
                    .writeToPackageDirectory(reason: "fpctl writes the bundle source (bundle.json, flows, assets)"),
                ]),
            dependencies: ["fpctl"]),
    ]
)
