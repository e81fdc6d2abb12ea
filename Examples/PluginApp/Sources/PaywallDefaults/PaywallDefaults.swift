import Foundation

/// The bundled default flows the app falls back to with no network: the
/// `.fpbundle` the FlowPilotBundle plugin built from `flowpilot/` at build time.
public enum PaywallDefaults {
    /// The bundle file in the module's resources.
    public static var url: URL? { Bundle.module.url(forResource: "flowpilot", withExtension: "fpbundle") }
}
