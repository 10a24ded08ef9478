import Foundation
import Haul

extension Aria2RPC {
    /// The `tellStatus` objects of `downloads` (a page of a list, or one), with the keys aria2
    /// does not compute from a ``DownloadManager/Download`` alone: `waitingReason` (Haul's
    /// own, for waiting and paused downloads; aria2 clients ignore keys they do not know) and,
    /// when `bitfield` is true, aria2's `bitfield` from the ranges the store holds.
    ///
    /// One manager call for the page's reasons, one store read for a bitfield: the cost
    /// follows the page, never the queue.
    func statusObjects(_ downloads: [DownloadManager.Download], keys: [String]?, bitfield: Bool = false) async -> [JSONValue] {
        let wants = { (key: String) in keys?.isEmpty ?? true || keys?.contains(key) == true }
        var reasons: [DownloadManager.ID: DownloadManager.WaitReason] = [:]
        let waiting = downloads.filter { $0.status == .queued || $0.status == .paused }.map(\.id)
        if wants("waitingReason"), !waiting.isEmpty { reasons = await manager.waitReasons(of: waiting) }
        var objects: [JSONValue] = []
        objects.reserveCapacity(downloads.count)
        for download in downloads {
            var extra: [String: JSONValue] = [:]
            if let reason = reasons[download.id] { extra["waitingReason"] = await describe(reason) }
            if bitfield, wants("bitfield"), let field = await self.bitfield(of: download) { extra["bitfield"] = .string(field) }
            objects.append(download.aria2Object(keys: keys, extra: extra))
        }
        return objects
    }

    /// `{"kind": "slot" | "writing" | "host" | "dependency" | "paused" | "starting", …}`, numbers as strings.
    func describe(_ reason: DownloadManager.WaitReason) async -> JSONValue {
        switch reason {
        case .paused: return ["kind": "paused"]
        case .starting: return ["kind": "starting"]
        case .slot(let running, let limit):
            return ["kind": "slot", "running": .string(String(running)), "limit": .string(String(limit))]
        case .writing(let pending, let limit):
            return ["kind": "writing", "pending": .string(String(pending)), "limit": .string(String(limit))]
        case .host(let host, let limit):
            return ["kind": "host", "host": .string(host), "limit": .string(String(limit))]
        case .dependency(let id):
            let name =
                await manager.download(id).map { download in
                    download.destinationIsFile ? (download.destination as NSString).lastPathComponent : download.url
                } ?? ""
            return ["kind": "dependency", "gid": .string(id.description), "name": .string(name)]
        }
    }

    /// The download's pieces on disk: all of them once complete, else those the store
    /// records as written (what a restart keeps); nil while its length is unknown.
    func bitfield(of download: DownloadManager.Download) async -> String? {
        let total = download.totalLength
        guard total > 0 else { return nil }
        if download.status == .completed { return DownloadManager.Download.bitfield(ByteRanges([0..<total]), totalLength: total) }
        guard let ranges = try? await manager.durableRanges(of: download.id) else { return nil }
        return DownloadManager.Download.bitfield(ranges.clamped(to: total), totalLength: total)
    }
}
