import ArgumentParser
import Foundation
import HaulDaemon

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the daemon's downloads: active, then waiting and paused, then stopped; then its mirrors and uploads.",
        discussion: """
            Columns: GID, STATUS (active, waiting, paused, error, complete, removed), PROGRESS, SIZE, \
            SPEED, ETA, NAME; in a fleet (daemons sharing a queue on PostgreSQL), the whole fleet's \
            downloads, with DAEMON before NAME: the one that holds each (HOST/PID; - while it waits \
            to be claimed). With --json, the aria2 status objects as the daemon sent them, for jq.

            The daemon's mirrors (haul mirror --every) follow the table (not the JSON), a line each with their files grouped: \
            ID, STATUS (active, waiting for the next run, complete, error), FILES (while it runs: \
            done of those queued; else what the last run found new, updated, unchanged and \
            deleted), SPEED, NEXT (when it runs again), and the URL and folder. Then its uploads \
            (haul put --daemon): UPLOAD (its GID), STATUS, PROGRESS, SIZE, SPEED, and the file and URL.

            Exit status: \(ClientExitStatus.summary)
            """,
        aliases: ["list"])

    @Flag(help: "Print a JSON array of aria2 status objects (every number a decimal string) instead of the table.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        let client = try daemon.connect()
        let listing: DaemonClient.Listing
        do throws(ClientFailure) {
            listing = try await client.everyDownload(keys: json ? nil : RemoteDownload.keys)
        } catch {
            throw error.report()
        }
        let downloads = listing.downloads
        if listing.changedMeanwhile {
            Terminal.error("the queue changed while it was listed: \(downloads.count) listed, \(listing.expected) counted before; run again for a steady list")
        }
        if json {
            StandardOutput.line(JSONValue.array(downloads.map(\.json)).description)
            return
        }
        if downloads.isEmpty {
            StandardOutput.line("no downloads")
        } else {
            StandardOutput.write(Self.table(downloads))
        }
        do throws(ClientFailure) {
            if let mirrors = try await client.list("haul.tellMirrors"), !mirrors.isEmpty {
                StandardOutput.write("\n" + Self.mirrorTable(mirrors, now: Date()))
            }
            if let uploads = try await client.uploads(), !uploads.isEmpty {
                StandardOutput.write("\n" + Self.uploadTable(uploads))
            }
        } catch {
            throw error.report()
        }
    }

    /// The daemon's uploads, a line each.
    static func uploadTable(_ uploads: [JSONValue]) -> String {
        var rows = [["UPLOAD", "STATUS", "PROGRESS", "SIZE", "SPEED", "FILE"]]
        for upload in uploads {
            let status = upload["status"]?.string ?? "-"
            let (sent, total) = (upload["uploadLength"]?.integer ?? 0, upload["totalLength"]?.integer)
            let speed = upload["uploadSpeed"]?.integer ?? 0
            let progress = total.map { $0 > 0 ? String(format: "%.1f%%", Double(sent) * 100 / Double($0)) : "100.0%" } ?? "-"
            rows.append([
                upload["gid"]?.string ?? "-", status, progress, total.map(Format.bytes) ?? "-",
                status == "active" && speed > 0 ? Format.rate(Double(speed)) : "-",
                "\(upload["file"]?.string ?? "-") → \(upload["url"]?.string ?? "-")",
            ])
        }
        return Table.render(rows, rightAligned: [2, 3, 4])
    }

    /// The daemon's mirrors, a line each: their files grouped in counts.
    static func mirrorTable(_ mirrors: [JSONValue], now: Date) -> String {
        var rows = [["MIRROR", "STATUS", "FILES", "SPEED", "NEXT", "SOURCE"]]
        for mirror in mirrors {
            func number(_ key: String, in object: JSONValue? = nil) -> Int64 { (object ?? mirror)[key]?.integer ?? 0 }
            let status = mirror["status"]?.string ?? "-"
            var files = "-"
            if status == "active" {
                let all = number("numActive") + number("numWaiting") + number("numComplete") + number("numFailed")
                files = "\(number("numComplete")) of \(all) done" + (number("numFailed") > 0 ? ", \(number("numFailed")) failed" : "")
            } else if let last = mirror["last"] {
                files = "\(number("new", in: last)) new, \(number("updated", in: last)) updated, \(number("unchanged", in: last)) unchanged"
                if number("deleted", in: last) > 0 { files += ", \(number("deleted", in: last)) deleted" }
                if number("failed", in: last) > 0 { files += ", \(number("failed", in: last)) failed" }
            }
            let speed = number("downloadSpeed")
            var next = "-"
            if let at = mirror["nextRun"]?.integer {
                let wait = max(0, Double(at) - now.timeIntervalSince1970)
                next = wait < 1 ? "now" : "in " + Format.duration(.seconds(wait))
            }
            rows.append([
                mirror["id"]?.string ?? "-", status, files, status == "active" && speed > 0 ? Format.rate(Double(speed)) : "-", next,
                "\(mirror["url"]?.string ?? "-") → \(mirror["dir"]?.string ?? "-")",
            ])
        }
        return Table.render(rows, rightAligned: [3])
    }

    /// The downloads, a line each; in a fleet, with the DAEMON that holds each (`-` for one
    /// waiting in the pool).
    static func table(_ downloads: [RemoteDownload]) -> String {
        let fleet = downloads.contains { $0.daemon != nil }
        var rows = [["GID", "STATUS", "PROGRESS", "SIZE", "SPEED", "ETA"] + (fleet ? ["DAEMON"] : []) + ["NAME"]]
        for download in downloads {
            let size = download.totalLength > 0 ? download.totalLength : download.completedLength
            rows.append(
                [
                    download.gid,
                    download.status,
                    download.percent ?? "-",
                    size > 0 ? Format.bytes(size) : "-",
                    download.status == "active" && download.downloadSpeed > 0 ? Format.rate(Double(download.downloadSpeed)) : "-",
                    download.eta.map(Format.duration) ?? "-",
                ] + (fleet ? [download.daemon ?? "-"] : []) + [download.name])
        }
        return Table.render(rows, rightAligned: [2, 3, 4, 5])
    }
}

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show one of the daemon's downloads (or uploads) in detail.",
        discussion: """
            Labelled lines: gid, status, url, file (or folder, until the server has named the file), \
            progress, speed, ETA and connections while active, error when it failed; for an upload, \
            the file, the URL it goes to and, once complete, its location. With --json, the aria2 \
            status object as the daemon sent it.

            Exit status: \(ClientExitStatus.summary)
            """)

    @Argument(help: "The download's GID, as haul add or haul ls printed it.")
    var gid: String

    @Flag(help: "Print the aria2 status object (every number a decimal string) instead of the lines.")
    var json = false

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        try GID.validate([gid])
    }

    func run() async throws {
        let client = try daemon.connect()
        let download: RemoteDownload
        do throws(ClientFailure) { download = try await client.status(gid) } catch { throw error.report() }
        if json {
            StandardOutput.line(download.json.description)
        } else {
            StandardOutput.write(Table.render(Self.lines(download).map { [$0.0, $0.1] }))
        }
    }

    static func lines(_ download: RemoteDownload) -> [(String, String)] {
        var lines = [("gid", download.gid), ("status", download.status)]
        if let url = download.url { lines.append(("url", url)) }
        if let path = download.path {
            lines.append(("file", path))
        } else if let dir = download.json["dir"]?.string {
            lines.append(("folder", dir))
        }
        var progress = download.percent.map { "\($0)  " } ?? ""
        progress += download.bytes
        progress +=
            download.totalLength > 0
            ? " (\(download.completedLength) / \(download.totalLength) bytes)" : " (length not known yet)"
        lines.append(("progress", progress))
        if download.status == "active" {
            lines.append(("speed", Format.rate(Double(download.downloadSpeed))))
            if let eta = download.eta { lines.append(("ETA", Format.duration(eta))) }
            if !download.isUpload { lines.append(("connections", String(download.connections))) }
        }
        if download.status == "error" {
            lines.append(("error", download.isUpload ? download.errorText : "\(download.errorText) (aria2 error code \(download.errorCode ?? "?"))"))
        }
        if download.isUpload, let location = download.json["location"]?.string { lines.append(("location", location)) }
        return lines
    }
}
