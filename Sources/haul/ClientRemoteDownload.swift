import Foundation
import HaulDaemon

/// A download as the daemon describes it: an aria2 status object, every number a decimal string.
struct RemoteDownload {
    /// The object as the daemon sent it (what `--json` prints).
    let json: JSONValue

    init(_ json: JSONValue) {
        self.json = json
    }

    /// The keys the client commands read, so a long list stays small on the wire.
    static let keys = [
        "gid", "status", "totalLength", "completedLength", "downloadSpeed", "connections",
        "dir", "files", "errorCode", "errorMessage", "daemon",
    ]

    var gid: String { json["gid"]?.string ?? "?" }
    /// active, waiting, paused, error, complete or removed.
    var status: String { json["status"]?.string ?? "?" }
    /// In a fleet, the daemon that holds it (`HOST/PID`); nil outside one, or in the pool.
    var daemon: String? { json["daemon"]?.string }
    var totalLength: Int64 { json["totalLength"]?.integer ?? 0 }
    var completedLength: Int64 { json["completedLength"]?.integer ?? 0 }
    /// An upload's object (`haul.tellUploads`, or `tellStatus` of an upload's GID) rather than a download's.
    var isUpload: Bool { json["uploadLength"] != nil }
    /// Bytes a second: received, or for an upload sent.
    var downloadSpeed: Int64 { json[isUpload ? "uploadSpeed" : "downloadSpeed"]?.integer ?? 0 }
    var connections: Int64 { json["connections"]?.integer ?? 0 }
    var errorCode: String? { json["errorCode"]?.string }
    /// aria2 sends "" for a download that did not fail.
    var errorMessage: String? { json["errorMessage"]?.string.flatMap { $0.isEmpty ? nil : $0 } }

    /// Still in the queue: active, waiting or paused.
    var isUnfinished: Bool { ["active", "waiting", "paused"].contains(status) }

    private var file: JSONValue? { json["files"]?.array?.first }

    /// The file's path once the daemon knows it.
    /// The file's path once the daemon knows it (an upload's, always).
    var path: String? {
        guard let path = isUpload ? json["file"]?.string : file?["path"]?.string, !path.isEmpty else { return nil }
        return path
    }

    /// The URL it comes from, or an upload's target.
    var url: String? { isUpload ? json["url"]?.string : file?["uris"]?.array?.first?["uri"]?.string }

    /// The file's name, else the URL's last path segment, else the URL.
    var name: String {
        if let path { return (path as NSString).lastPathComponent }
        guard let url else { return gid }
        return URLComponents(string: url)?.path.split(separator: "/").last.map(String.init) ?? url
    }

    var fraction: Double? {
        guard totalLength > 0 else { return status == "complete" ? 1 : nil }
        return min(1, Double(completedLength) / Double(totalLength))
    }

    var percent: String? { fraction.map { String(format: "%.0f%%", $0 * 100) } }

    var eta: Duration? {
        guard status == "active", downloadSpeed > 0, totalLength > completedLength else { return nil }
        return .seconds((totalLength - completedLength + downloadSpeed - 1) / downloadSpeed)
    }

    /// `1.2 MiB / 3.0 MiB`, or the bytes so far when the length is unknown.
    var bytes: String {
        totalLength > 0 ? "\(Format.bytes(completedLength)) / \(Format.bytes(totalLength))" : Format.bytes(completedLength)
    }

    /// The error a person reads: the daemon's message, else aria2's code.
    var errorText: String { errorMessage ?? "error code \(errorCode ?? "?")" }

    // MARK: Lines

    /// One live line, as `haul get` draws a running download: name (fitted into `nameWidth`
    /// so the lines of several downloads line up), percent, bar, bytes, speed, ETA.
    func liveLine(nameWidth: Int, bar barWidth: Int?) -> String {
        var parts = [ProgressDisplay.fit(name, nameWidth).padding(toLength: nameWidth, withPad: " ", startingAt: 0)]
        switch status {
        case "waiting":
            parts.append("waiting")
        case "paused":
            parts.append("paused")
            if let percent { parts.append(percent) }
            if completedLength > 0 { parts.append(bytes) }
        default:
            if totalLength == 0 && completedLength == 0 { return (parts + ["starting"]).joined(separator: "  ") }
            if let fraction {
                parts.append(String(format: "%3.0f%%", fraction * 100))
                if let barWidth { parts.append(ProgressDisplay.bar(fraction, width: barWidth)) }
            }
            parts.append(bytes)
            if downloadSpeed > 0 { parts.append(Format.rate(Double(downloadSpeed))) }
            if let eta { parts.append("ETA \(Format.duration(eta))") }
        }
        return parts.joined(separator: "  ")
    }

    /// How it ended, as `haul wait` and `haul watch` print it: `GID complete PATH`,
    /// `GID error: message` or `GID removed`; nil while it is unfinished.
    var endingLine: String? {
        switch status {
        case "complete": "\(gid) complete \(path ?? url ?? "")"
        case "error": "\(gid) error: \(errorText)"
        case "removed": "\(gid) removed"
        default: nil
        }
    }
}
