import Foundation
import Haul

/// Haul's own methods for uploads (name-spaced `haul.`, beside aria2's): files of the daemon's
/// machine sent to tus, IETF-draft or plain `PUT` targets, queued with the downloads (the same
/// `-j`, host limits and store). aria2's `pause`, `unpause`, `remove`, `forcePause`,
/// `forceRemove`, `removeDownloadResult` and `tellStatus` take an upload's GID too (`tellStatus`
/// answers with ``describe(_:)``'s object).
extension Aria2RPC {
    /// The options `haul.addUpload` takes besides the network ones of `addUri`.
    static let uploadOptionNames: Set<String> = ["protocol", "ietf-version", "max-upload-limit", "priority", "pause"]

    /// `addUri`'s options that say where a download goes or how it is split: meaningless for an upload.
    static let downloadOnlyOptionNames: Set<String> = [
        "dir", "out", "checksum", "split", "max-connection-per-server", "min-split-size", "max-download-limit", "allow-overwrite",
    ]

    /// `[file, url, options]`: queues the upload of `file` (an absolute path on the daemon's
    /// machine) to `url`; its GID. Adding the same file for the same URL again returns the
    /// upload there is. Needs the daemon's secret: an upload reads a file and sends it away.
    func addUpload(_ p: Parameters) async throws(RPCError) -> JSONValue {
        guard !(secret ?? "").isEmpty else {
            throw .failed(
                "haul.addUpload needs a daemon started with --rpc-secret: an upload reads a file of this machine and sends it away, which nobody who merely reaches the port may ask for"
            )
        }
        let (file, url) = (try p.string(0), try p.string(1))
        let options = try p.object(2) ?? [:]
        try FolderPolicy.refuseControlCharacters(file, "file")
        guard file.hasPrefix("/") else { throw .failed("the file to upload must be an absolute path on the daemon's machine, not \(file)") }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), !isFolder.boolValue else {
            throw .failed("no file to upload at \(file)")
        }
        try Aria2Options.validate(url: url)
        if let name = options.keys.sorted().first(where: { Self.downloadOnlyOptionNames.contains($0) }) {
            throw .failed("option \(name) is for downloads; an upload takes protocol, ietf-version, max-upload-limit, priority, pause and the network options")
        }
        let network = options.filter { !Self.uploadOptionNames.contains($0.key) }
        let (template, _) = try Aria2Options.request(urls: [url], options: network, defaults: globals, template: template)
        var request = UploadRequest(file: file, url: url)
        request.headers = template.headers
        request.network = template.network
        request.maxTries = template.maxTries
        request.retryWait = template.retryWait
        if let name = try Aria2Options.string(options["protocol"], "protocol") {
            guard let chosen = UploadProtocol(rawValue: name) else {
                throw .failed("option protocol must be auto, tus, ietf or put, not \(name)")
            }
            request.protocol = chosen
        }
        if let version = try Aria2Options.integer(options["ietf-version"], "ietf-version", in: 3...6) {
            request.ietfInteropVersion = Int(version)
        }
        if let limit = try Aria2Options.size(options["max-upload-limit"], "max-upload-limit"), limit > 0 {
            request.rateLimit = limit
        }
        let priority = Int(try Aria2Options.integer(options["priority"], "priority", in: -1000...1000) ?? 0)
        let paused = try Aria2Options.bool(options["pause"], "pause") ?? false
        do {
            return .string(try await manager.addUpload(request, priority: priority, paused: paused).description)
        } catch {
            throw .failed(error.message)
        }
    }

    /// `[]`: every upload, running first, then waiting, then finished.
    func tellUploads() async -> JSONValue {
        .array(await manager.uploads().map(Self.describe))
    }

    /// The upload of a whole GID, if it is one.
    func upload(_ gid: String) async -> DownloadManager.Upload? {
        guard let id = DownloadID(gid) else { return nil }
        return await manager.upload(id)
    }

    /// aria2's `tellStatus`, `remove`, `pause`, `unpause` and `removeDownloadResult` of an upload.
    func control(_ upload: DownloadManager.Upload, _ method: String, _ p: Parameters) async throws(RPCError) -> JSONValue {
        let (id, status) = (upload.id, upload.status)
        switch method {
        case "aria2.tellStatus":
            let keys = try p.keys(1)
            guard case .object(let object) = Self.describe(upload), let keys, !keys.isEmpty else { return Self.describe(upload) }
            return .object(object.filter { keys.contains($0.key) })
        case "aria2.remove", "aria2.forceRemove":
            guard status != .completed, status != .failed else { throw .failed("Active Download not found for GID#\(id)") }
            // Listed as removed (cancelled) when it was sending, as a download is.
            if status == .running { await manager.cancel(id) } else { await manager.remove(id) }
        case "aria2.pause", "aria2.forcePause":
            guard status == .running || status == .queued else { throw .failed("GID#\(id) cannot be paused now") }
            await manager.pause(id)
        case "aria2.unpause":
            // A failed upload is tried again too: a resumable one goes on from the server's offset.
            guard status == .paused || (status == .failed && upload.error?.kind != .cancelled) else {
                throw .failed("GID#\(id) cannot be unpaused now")
            }
            await manager.resume(id)
        default:
            guard status == .completed || status == .failed else { throw .failed("Could not remove download result of GID#\(id)") }
            await manager.remove(id)
            return "OK"
        }
        return .string(id.description)
    }

    static func describe(_ upload: DownloadManager.Upload) -> JSONValue {
        let length = upload.result?.bytes ?? upload.progress?.totalBytes
        let sent = upload.result?.bytes ?? upload.progress?.bytesSent ?? 0
        var object: [String: JSONValue] = [
            "gid": .string(upload.id.description),
            "status": .string(state(upload)),
            "file": .string(upload.file),
            "url": .string(upload.url),
            "priority": .string(String(upload.priority)),
            "uploadLength": .string(String(sent)),
            // What the server holds, for clients that read a download's progress.
            "completedLength": .string(String(sent)),
            "uploadSpeed": .string(String(upload.status == .running ? Int64(upload.progress?.bytesPerSecond ?? 0) : 0)),
        ]
        if let length { object["totalLength"] = .string(String(length)) }
        if let chosen = upload.result?.protocol ?? upload.progress?.protocol { object["protocol"] = .string(chosen.rawValue) }
        if let location = upload.result?.location { object["location"] = .string(location) }
        if let reason = upload.result?.restartReason ?? upload.progress?.restartReason { object["restartReason"] = .string(reason) }
        if let note = upload.progress?.note, upload.status == .running { object["note"] = .string(note) }
        if let error = upload.error { object["errorMessage"] = .string(error.message) }
        return .object(object)
    }

    /// aria2's words for where it stands: `active`, `waiting`, `paused`, `complete`, `error`,
    /// `removed` (cancelled).
    static func state(_ upload: DownloadManager.Upload) -> String {
        switch upload.status {
        case .running: "active"
        case .queued: "waiting"
        case .paused: "paused"
        case .completed: "complete"
        case .failed: upload.error?.kind == .cancelled ? "removed" : "error"
        }
    }
}
