import Foundation
import Haul

extension Mirror.Summary {
    /// The table that ends a run of `haul mirror`; with a checksum file it tells the verified
    /// and unlisted files too.
    func table(dryRun: Bool, checksFiles: Bool) -> String {
        var rows: [(String, String)] = [
            ("new", "\(new)"), ("updated", "\(updated)"), ("unchanged", "\(unchanged)"), ("deleted", "\(deleted)"),
            ("failed", "\(failed)"),
        ]
        if skipped > 0 { rows.append(("skipped", "\(skipped)")) }
        if checksFiles { rows += [("verified", "\(verified)"), ("unlisted", "\(unlisted)")] }
        if dryRun {
            rows = [("would fetch", "\(new)"), ("would check", "\(toCheck)"), ("would delete", "\(deleted)")]
            if checksFiles { rows.append(("unlisted", "\(unlisted)")) }
        }
        let width = rows.map(\.0.count).max() ?? 0
        var text = ""
        for (name, value) in rows { text += name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value + "\n" }
        if !dryRun { text += "fetched".padding(toLength: width, withPad: " ", startingAt: 0) + "  " + Format.bytes(bytesFetched) + "\n" }
        return text
    }
}
