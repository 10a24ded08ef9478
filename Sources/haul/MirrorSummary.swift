import Foundation
import Haul

/// What a run of `haul mirror` did, as the table that ends it or as JSON.
struct MirrorSummary {
    var new = 0
    var updated = 0
    var unchanged = 0
    var deleted = 0
    var failed = 0
    /// Files in the way that this mirror did not write (left alone).
    var skipped = 0
    /// Dry run: files copied before, which a real run would check with the server.
    var toCheck = 0
    /// Whether a checksum file was given: the table then tells the two counts below.
    var checksFiles = false
    /// Files fetched and found to match the checksum file.
    var verified = 0
    /// Files the checksum file does not list.
    var unlisted = 0
    var bytesFetched: Int64 = 0
    var errors: [DownloadError] = []

    func table(dryRun: Bool) -> String {
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

    var json: String {
        #"{"new":\#(new),"updated":\#(updated),"unchanged":\#(unchanged),"deleted":\#(deleted),"failed":\#(failed),"skipped":\#(skipped),"verified":\#(verified),"unlisted":\#(unlisted),"bytesFetched":\#(bytesFetched)}"#
    }
}
