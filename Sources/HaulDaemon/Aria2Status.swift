import Foundation
import Haul

/// How a managed download looks to an aria2 client: status words, error codes and the
/// `tellStatus` object, every number a decimal string.
extension DownloadManager.Download {
    /// aria2's status word. A cancelled download is `removed`; one that failed for any other
    /// reason is `error`.
    var aria2Status: String {
        switch status {
        case .queued: "waiting"
        case .running: "active"
        case .paused: "paused"
        case .completed: "complete"
        case .failed: error?.kind == .cancelled ? "removed" : "error"
        }
    }

    /// Waiting, paused or active: still in the queue (aria2's tellActive and tellWaiting).
    var isUnfinished: Bool { [.queued, .running, .paused].contains(status) }

    /// aria2's exit-status code for how it ended: "0" for success, aria2's number for the
    /// closest cause otherwise (3 not found, 24 authorization, 22 other HTTP status, 6 network,
    /// 2 timeout, 19 name resolution, 9 disk full, 17 file I/O, 32 checksum, 31 removed, 1
    /// anything else), from the error's kind and ``DownloadError/Reason``.
    var aria2ErrorCode: String? {
        switch status {
        case .completed: return "0"
        case .failed:
            guard let error else { return "1" }
            switch error.kind {
            case .cancelled: return "31"
            case .http:
                switch error.status {
                case 404?, 410?: return "3"
                case 401?, 403?, 407?: return "24"
                default: return "22"
                }
            case .network:
                switch error.reason {
                case .stalled?, .connectTimeout?: return "2"
                case .nameNotResolved?: return "19"
                default: return "6"
                }
            case .io: return error.reason == .diskFull ? "9" : "17"
            case .checksum: return "32"
            case .invalidRequest: return "28"
            default: return "1"
            }
        default: return nil
        }
    }

    /// The folder the file goes into.
    var directory: String {
        destinationIsFile ? (destination as NSString).deletingLastPathComponent : destination
    }

    /// The file's path once known, else "" (as aria2 before the server has answered).
    var filePath: String { destinationIsFile ? destination : "" }

    var totalLength: Int64 { result?.bytes ?? progress?.totalBytes ?? 0 }
    var completedLength: Int64 { result?.bytes ?? progress?.bytesDone ?? 0 }
    var downloadSpeed: Int64 { status == .running ? Int64(progress?.bytesPerSecond ?? 0) : 0 }

    /// aria2 reports progress in pieces; Haul keeps byte ranges and reports 1 MiB pieces.
    static let pieceLength: Int64 = 1 << 20

    /// The `files` entry: Haul downloads one file per download from one URL.
    var aria2Files: JSONValue {
        [
            [
                "index": "1",
                "path": .string(filePath),
                "length": .string(String(totalLength)),
                "completedLength": .string(String(completedLength)),
                "selected": "true",
                "uris": aria2URIs,
            ]
        ]
    }

    /// Every source of the file, each `used` while the download runs. Beyond aria2's keys, a
    /// running download from several sources gives each one's `downloadSpeed`, and `dropped`
    /// (why) for one it stopped using (then `waiting`, as aria2 lists a URI it does not use).
    var aria2URIs: JSONValue {
        let states = status == .running ? progress?.sources ?? [] : []
        return .array(
            request.sources.enumerated().map { index, source in
                var entry: [String: JSONValue] = ["uri": .string(source.displayURI), "status": .string(status == .running ? "used" : "waiting")]
                if index < states.count {
                    if let dropped = states[index].dropped {
                        entry["status"] = "waiting"
                        entry["dropped"] = .string(dropped)
                    } else {
                        entry["downloadSpeed"] = .string(String(Int64(states[index].bytesPerSecond)))
                    }
                }
                return .object(entry)
            })
    }

    /// aria2's `bitfield`: one bit a piece of ``pieceLength``, the first piece in the highest
    /// bit of the first hex digit, padded with zero bits to whole bytes. A piece's bit is set
    /// only when all of its bytes are in `ranges` (the last piece may be shorter).
    static func bitfield(_ ranges: ByteRanges, totalLength: Int64) -> String {
        let pieces = Int(max(1, (totalLength + pieceLength - 1) / pieceLength))
        var bytes = [UInt8](repeating: 0, count: (pieces + 7) / 8)
        for range in ranges.ranges {
            // Whole pieces only: from the first piece that starts inside the range to the last
            // that ends inside it (or at the end of the file).
            let first = (range.lowerBound + pieceLength - 1) / pieceLength
            let end = range.upperBound >= totalLength ? Int64(pieces) : range.upperBound / pieceLength
            var piece = first
            while piece < end {
                bytes[Int(piece / 8)] |= 0x80 >> UInt8(piece % 8)
                piece += 1
            }
        }
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    /// The full `tellStatus` object, or only `keys` when given (unknown keys are left out).
    /// `extra` adds keys worked out elsewhere (`bitfield`, Haul's `waitingReason`).
    func aria2Object(keys: [String]? = nil, extra: [String: JSONValue] = [:]) -> JSONValue {
        var object: [String: JSONValue] = [
            "gid": .string(id.description),
            "status": .string(aria2Status),
            "totalLength": .string(String(totalLength)),
            "completedLength": .string(String(completedLength)),
            "uploadLength": "0",
            "downloadSpeed": .string(String(downloadSpeed)),
            "uploadSpeed": "0",
            "connections": .string(status == .running ? String(max(1, progress?.connections ?? 1)) : "0"),
            "dir": .string(directory),
            "files": aria2Files,
            "pieceLength": .string(String(Self.pieceLength)),
            "numPieces": .string(String(max(1, (totalLength + Self.pieceLength - 1) / Self.pieceLength))),
        ]
        // Haul's own: in a fleet, the daemon that holds it (HOST/PID).
        if let daemon { object["daemon"] = .string(daemon) }
        if let code = aria2ErrorCode {
            object["errorCode"] = .string(code)
            object["errorMessage"] = .string(aria2Status == "error" ? error?.message ?? "" : "")
        }
        object.merge(extra) { _, new in new }
        if let keys, !keys.isEmpty {
            object = object.filter { keys.contains($0.key) }
        }
        return .object(object)
    }
}
