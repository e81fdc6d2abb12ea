import ArgumentParser
import FlowPilotCore
import FlowPilotOutput
import Foundation

struct BundlePreviewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview",
        abstract: "Render a bundle's screens, or two bundles side by side, as one offline HTML page",
        discussion: """
            Draws what the bundled default shows on a first launch with no network,
            from the bundle alone: for each placement, in manifest order, its flow id,
            version, content hash, experiment and variant, the count and bytes of its
            media and fonts, then every screen as a phone-sized frame with its
            persistent zones (navigation bar above, footer below, overlay on top).
            Text is set in the flow's font from the bundle and images come from the
            bundle's bytes; an image the bundle lacks is a red "missing image" box.
            Buttons show their action; navigate links to its screen's frame, and
            open_link shows its URL as text. Lottie and video are labelled boxes: they
            are never bundled. The bundle's validation findings, warnings included,
            come first.
            With two bundles (OLD NEW), each placement is shown side by side and marked
            changed (flow id, version or content hash differ), added, removed or same;
            changed placements come first.
            The page has no script, loads nothing (its Content-Security-Policy allows
            only data: images and fonts and inline styles), escapes every string of a
            flow, holds each image's and font's bytes once, and is the same bytes for
            the same bundles.
            An invalid bundle is still drawn, findings first, when its zip structure
            was read safely; otherwise it is refused with validate's findings.
            Exit status: 65 a bundle that cannot be read safely, 66 missing input,
            73 output not written.
            """
    )

    @Argument(help: "The .fpbundle file, or OLD and NEW to compare.")
    var bundles: [String]

    @Option(name: .shortAndLong, help: "The HTML file to write, or - for standard output.")
    var output = "-"

    @Flag(help: "Replace the output file when it exists.")
    var overwrite = false

    func validate() throws {
        guard (1...2).contains(bundles.count) else {
            throw ValidationError("give one bundle, or two (OLD NEW) to compare; got \(bundles.count)")
        }
    }

    func run() throws {
        let previews = try bundles.map(BundlePreview.open)
        let page =
            previews.count == 2
            ? PreviewPage.render(BundleComparison(old: previews[0], new: previews[1]))
            : PreviewPage.render(previews[0])
        for preview in previews where preview.findings.hasErrors {
            Console.warn("\(preview.file): invalid bundle, drawn with its findings at the top")
        }
        if output == "-" {
            StandardOutput.write(page)
        } else {
            try AtomicFile.write(page, to: output, overwrite: overwrite)
        }
    }
}
