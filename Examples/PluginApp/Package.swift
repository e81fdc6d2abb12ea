// swift-tools-version:6.0
// An app's package that ships the bundled default the FlowPilotBundle plugin
// builds from Sources/PaywallDefaults/flowpilot (a copy of bundles/demo that
// Scripts/check-plugin.sh makes), with no source build of fpctl: the plugin
// package runs fpctl from its artifact bundle (docs/app-build.md). It does not
// build as checked in: README.md says what to make first.
import PackageDescription

let package = Package(
    name: "PluginApp",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [.library(name: "PaywallDefaults", targets: ["PaywallDefaults"])],
    dependencies: [.package(path: "../../FlowPilotPlugins")],
    targets: [
        .target(
            name: "PaywallDefaults",
            // The source is the plugin's input, not the target's resources:
            // the one resource is the .fpbundle the plugin builds from it.
            exclude: ["flowpilot"],
            plugins: [.plugin(name: "FlowPilotBundle", package: "FlowPilotPlugins")]),
        .testTarget(name: "PaywallDefaultsTests", dependencies: ["PaywallDefaults"]),
    ]
)
