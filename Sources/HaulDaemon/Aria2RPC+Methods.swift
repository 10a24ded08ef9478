import Foundation
import Haul

extension Aria2RPC {
    func dispatch(_ method: String, _ p: Parameters, _ exchange: inout Exchange) async throws(RPCError) -> JSONValue {
        if Self.uploadControls.contains(method), let upload = await upload(try p.gid(0)) { return try await control(upload, method, p) }
        if let answer = try await carry(method, p, &exchange) { return answer }
        switch method {
        case "aria2.addUri": return try await addURI(p)
        case "aria2.addMetalink": return try await addMetalink(p)
        case "aria2.addTorrent", "aria2.getPeers":
            throw .failed("\(method) is not supported: Haul downloads http:// and https:// URLs only (no BitTorrent)")
        case "aria2.remove", "aria2.forceRemove": return try await remove(p)
        case "aria2.pause", "aria2.forcePause": return try await pause(p)
        case "aria2.pauseAll", "aria2.forcePauseAll":
            // In a fleet, the pool too: claimed here, so that nobody starts it meanwhile.
            if fleet != nil, !exchange.carried {
                do { try await manager.claimPool() } catch { throw .failed(error.message) }
            }
            await manager.pauseAll()
            try await carryEverywhere(method, exchange)
            // What another daemon offered before it heard: claimed and paused too.
            if fleet != nil, !exchange.carried {
                do { try await manager.claimPool() } catch { throw .failed(error.message) }
                await manager.pauseAll()
            }
            return "OK"
        case "aria2.unpause": return try await unpause(p)
        case "aria2.unpauseAll":
            await manager.resumeAll()
            try await carryEverywhere(method, exchange)
            return "OK"
        case "aria2.tellStatus":
            let download = try await fleetDownload(p.gid(0))
            return await statusObjects([download], keys: try p.keys(1), bitfield: true)[0]
        case "aria2.tellActive":
            let keys = try p.keys(0)
            let active: [DownloadManager.Download]
            do { active = try await manager.fleetActive() } catch { throw .failed(error.message) }
            try exchange.charge(active.count)
            return .array(await statusObjects(active, keys: keys))
        case "aria2.tellWaiting", "aria2.tellStopped":
            let (offset, count, keys) = (try p.int(0), try p.int(1), try p.keys(2))
            guard count >= 0 else {
                throw .failed("The integer parameter at 1 has invalid value: the value must be greater than or equal to 0.")
            }
            let page = try await self.page(waiting: method == "aria2.tellWaiting", offset: offset, count: count, &exchange)
            return .array(await statusObjects(page, keys: keys))
        case "aria2.getUris":
            let download = try await fleetDownload(p.gid(0))
            guard download.isUnfinished else { throw .failed("No URI data is available for GID#\(download.id)") }
            return download.aria2URIs
        case "aria2.getFiles": return try await fleetDownload(p.gid(0)).aria2Files
        case "aria2.getServers": return try await servers(p)
        case "aria2.changePosition": return try await changePosition(p)
        case "aria2.changeUri": return try await changeURI(p)
        case "aria2.getOption": return Aria2Options.describe(try await fleetDownload(p.gid(0)).request)
        case "aria2.changeOption": return try await changeOption(p)
        case "aria2.getGlobalOption": return await globalOptions()
        case "aria2.changeGlobalOption": return try await changeGlobalOption(p, exchange)
        case "aria2.getGlobalStat": return try await globalStat()
        case "aria2.purgeDownloadResult":
            await manager.removeAllStopped()
            try await carryEverywhere(method, exchange)
            return "OK"
        case "aria2.removeDownloadResult": return try await removeResult(p)
        case "aria2.getVersion":
            return ["version": .string(HaulVersion.string), "enabledFeatures": ["HTTPS", "Message Digest", "Metalink"]]
        case "aria2.getSessionInfo": return ["sessionId": .string(sessionID)]
        case "aria2.shutdown", "aria2.forceShutdown":
            requestShutdown()
            return "OK"
        case "aria2.saveSession": return "OK"
        case "system.listMethods": return .array(Self.methods.map { .string($0) })
        case "system.listNotifications": return .array(Self.notifications.map { .string($0) })
        case "haul.addUpload": return try await addUpload(p)
        case "haul.tellUploads": return await tellUploads()
        case "haul.addMirror": return try await addMirror(p)
        case "haul.tellMirrors": return await tellMirrors()
        case "haul.removeMirror": return try await removeMirror(p)
        case "haul.runMirror": return try await runMirror(p)
        default: throw .noSuchMethod(method)
        }
    }

    // MARK: Methods

    func addURI(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let uris = try p.strings(0)
        guard !uris.isEmpty else { throw .failed("URI is not provided.") }
        let options = try p.object(1) ?? [:]
        if p.count > 2, try p.int(2) < 0 { throw .failed("Position must be greater than or equal to 0.") }
        // Several URIs are sources of one file, as in aria2.
        let (request, paused) = try Aria2Options.request(urls: uris, options: options, defaults: globals, template: template)
        let id: DownloadManager.ID
        do { id = try await manager.add(request, paused: paused) } catch { throw .failed(error.description) }
        if p.count > 2 {
            let position = try p.int(2)
            if await manager.waitingPosition(of: id) != nil { await manager.move(id, to: position) }
        }
        return .string(id.description)
    }

    /// `[base64 metalink, options, position]`: one download for each file of the document, with
    /// the options as `addUri` takes them (`dir` is where the files go, each under its Metalink
    /// name); its GIDs, in the document's order. Nothing is added when one file cannot be.
    func addMetalink(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let encoded = try p.string(0).filter { !$0.isWhitespace }
        guard encoded.utf8.count <= (Metalink.maxDocumentBytes / 3 + 1) * 4 else {
            throw .failed("the Metalink document is larger than \(Metalink.maxDocumentBytes) bytes")
        }
        guard let data = Data(base64Encoded: encoded) else { throw .failed("the Metalink document is not valid base64") }
        let options = try p.object(1) ?? [:]
        if p.count > 2, try p.int(2) < 0 { throw .failed("Position must be greater than or equal to 0.") }
        for name in ["out", "checksum"] where options[name] != nil {
            throw .failed("\(name) cannot be given with a Metalink: each file has its own name and digests")
        }
        let metalink: Metalink
        do { metalink = try Metalink(parsing: data) } catch { throw .failed(error.message) }
        var requests: [DownloadRequest] = []
        var paused = false
        for file in metalink.files {
            let (base, pause) = try Aria2Options.request(
                urls: file.sources.map(\.uri), options: options, defaults: globals, template: template)
            paused = pause
            // The name is checked as an `out` is: inside the folder, each part short enough.
            let folder = base.destination.path
            _ = try globals.folders.file(file.name, in: folder)
            let request = file.request(in: folder, template: base)
            do { try request.validate() } catch { throw .failed("\(file.name): \(error.message)") }
            requests.append(request)
        }
        let results: [Result<DownloadManager.ID, DownloadError>]
        do { results = try await manager.add(contentsOf: requests, paused: paused) } catch { throw .failed(error.description) }
        let ids = results.compactMap { try? $0.get() }
        if ids.count < results.count {
            for id in ids { await manager.remove(id) }
            let (index, error) = results.enumerated().lazy.compactMap { item -> (Int, DownloadError)? in
                guard case .failure(let error) = item.element else { return nil }
                return (item.offset, error)
            }.first!
            throw .failed("\(metalink.files[index].name): \(error.message)")
        }
        if p.count > 2 {
            let position = try p.int(2)
            for (offset, id) in ids.enumerated() {
                if await manager.waitingPosition(of: id) != nil { await manager.move(id, to: position + offset) }
            }
        }
        return .array(ids.map { .string($0.description) })
    }

    func remove(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        switch download.status {
        case .running:
            // Listed as removed (errorCode 31) until its result is removed, as in aria2.
            await manager.cancel(download.id)
        case .queued, .paused:
            // A download that is not transferring vanishes, as in aria2.
            await manager.remove(download.id)
        default:
            throw .failed("Active Download not found for GID#\(download.id)")
        }
        return .string(download.id.description)
    }

    func pause(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        guard download.status == .running || download.status == .queued else {
            throw .failed("GID#\(download.id) cannot be paused now")
        }
        await manager.pause(download.id)
        return .string(download.id.description)
    }

    func unpause(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        guard download.status == .paused else { throw .failed("GID#\(download.id) cannot be unpaused now") }
        await manager.resume(download.id)
        return .string(download.id.description)
    }

    func servers(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        guard download.status == .running else { throw .failed("No active download for GID#\(download.id)") }
        // Each source in use with its own speed; one URL's is the download's.
        let speeds = download.progress?.sources ?? []
        var servers: [JSONValue] = []
        for (index, source) in download.request.sources.enumerated() {
            let speed: Int64
            if index < speeds.count {
                guard speeds[index].dropped == nil else { continue }
                speed = Int64(speeds[index].bytesPerSecond)
            } else {
                speed = download.request.sources.count == 1 ? download.downloadSpeed : 0
            }
            let uri = JSONValue.string(source.displayURI)
            servers.append(["uri": uri, "currentUri": uri, "downloadSpeed": .string(String(speed))])
        }
        return [["index": "1", "servers": .array(servers)]]
    }

    func changePosition(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let gid = try await download(p.gid(0)).id
        let offset = try p.int(1)
        let how = try p.string(2)
        guard let current = await manager.waitingPosition(of: gid) else {
            throw .failed("GID#\(gid) not found in the waiting queue.")
        }
        let count = await manager.waitingCount
        let target: Int
        switch how {
        case "POS_SET": target = offset
        case "POS_CUR": target = current + offset
        case "POS_END": target = count - 1 + offset
        default: throw .failed("Illegal argument.")
        }
        let landed = await manager.move(gid, to: min(max(0, target), count - 1)) ?? current
        return .int(Int64(landed))
    }

    func changeURI(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        let fileIndex = try p.int(1)
        guard fileIndex >= 1 else {
            throw .failed("The integer parameter at 1 has invalid value: the value must be greater than or equal to 1.")
        }
        guard fileIndex == 1 else { throw .failed("fileIndex is out of range") }
        let deleting = try p.strings(2)
        let adding = try p.strings(3)
        for url in adding { try Aria2Options.validate(url: url) }
        var uris = download.request.sources.map(\.uri)
        var deleted = 0
        for url in deleting {
            if let index = uris.firstIndex(of: url) {
                uris.remove(at: index)
                deleted += 1
            }
        }
        let position = p.count > 4 ? min(max(0, try p.int(4)), uris.count) : uris.count
        uris.insert(contentsOf: adding, at: position)
        guard !uris.isEmpty else {
            throw .failed("GID#\(download.id) would have no URI left: add one in the same call")
        }
        // A URI given twice is one source.
        var seen = Set<String>()
        uris = uris.filter { seen.insert($0).inserted }
        if uris != download.request.sources.map(\.uri) {
            let kept = Dictionary(download.request.sources.map { ($0.uri, $0) }, uniquingKeysWith: { first, _ in first })
            let sources = uris.map { kept[$0] ?? DownloadRequest.Source(uri: $0) }
            do { try await manager.change(download.id) { $0.sources = sources } } catch { throw .failed(error.description) }
        }
        return [.int(Int64(deleted)), .int(Int64(adding.count))]
    }

    func changeOption(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        guard download.isUnfinished else { throw .failed("Cannot change option for GID#\(download.id)") }
        let options = try p.object(1) ?? [:]
        var request = download.request
        try Aria2Options.apply(options, to: &request, defaults: globals)
        let changed = request
        do {
            try await manager.change(download.id) { $0 = changed }
        } catch {
            throw .failed(error.description)
        }
        return "OK"
    }

    func globalOptions() async -> JSONValue {
        var object: [String: JSONValue] = [
            "dir": .string(globals.dir),
            "max-concurrent-downloads": .string(String(await manager.maxConcurrentDownloads)),
            "max-overall-download-limit": .string(String(downloader.rateLimit ?? 0)),
            "max-download-limit": .string(String(globals.maxDownloadLimit)),
            "split": .string(String(globals.split)),
            "max-connection-per-server": .string(String(globals.maxConnectionPerServer)),
            "min-split-size": .string(String(globals.minSplitSize)),
            "max-tries": .string(String(globals.maxTries)),
            "retry-wait": .string(String(globals.retryWait)),
        ]
        Aria2Options.describe(network: globals.network, into: &object)
        return .object(object)
    }

    func changeGlobalOption(_ p: Parameters, _ exchange: Exchange) async throws(RPCError) -> JSONValue {
        let options = try p.object(0) ?? [:]
        let saved = try await applyGlobalOptions(options)
        // Every later download follows these (a proxy, certificate checks), so each change is
        // said where whoever runs the daemon sees it.
        for (name, value) in options.sorted(by: { $0.key < $1.key }) {
            logger.notice(
                "changeGlobalOption from \(exchange.client ?? "this process"): \(name)=\(Aria2Options.shown(name, Aria2Options.text(value)).debugDescription)")
        }
        // Kept in the store (beside the downloads, whose rows hold credentials too), so a
        // restart does not quietly undo a change made on the web page.
        do { try await manager.saveSettings(saved.mapValues(\.description)) } catch {
            throw .failed("the options apply until the daemon stops, but could not be saved for its next start: \(error.message)")
        }
        return "OK"
    }

    /// Checks every option, then applies them all (or none); returns them as they are to be
    /// saved (`dir` as the folder it resolved to, so it means the same after a restart).
    @discardableResult
    func applyGlobalOptions(_ options: [String: JSONValue]) async throws(RPCError) -> [String: JSONValue] {
        // Without a secret any program on this machine, and any page allowed to call, gets here:
        // turning certificate checks off for every later download must come from whoever
        // started the daemon.
        if !hasSecret, try Aria2Options.bool(options["check-certificate"], "check-certificate") == false {
            throw .failed(
                "check-certificate=false is refused by changeGlobalOption on a daemon without a secret: start the daemon with --rpc-secret, or pass --check-certificate=false on its command line"
            )
        }
        // Check everything before changing anything.
        var next = globals
        var saved = options
        if let dir = try Aria2Options.string(options["dir"], "dir") {
            next.dir = try globals.folders.folder(dir, base: globals.dir)
            saved["dir"] = .string(next.dir)
        }
        try Aria2Options.refuseUnknown(options, known: Aria2Options.globalOptionNames)
        try Aria2Options.tune(&next, by: options)
        try Aria2Options.apply(network: options, to: &next.network)
        do { try next.network.validate() } catch { throw .failed(error.message) }
        let concurrent = try Aria2Options.integer(options["max-concurrent-downloads"], "max-concurrent-downloads", in: 1...1000)
        let overall = try Aria2Options.size(options["max-overall-download-limit"], "max-overall-download-limit")
        globals = next
        if let concurrent { await manager.setMaxConcurrentDownloads(Int(concurrent)) }
        if let overall { downloader.setRateLimit(overall) }
        return saved
    }

    /// At start: applies the options saved by earlier ``changeGlobalOption(_:_:)`` calls over
    /// the defaults, except those given on the command line (`explicit`, aria2's names), which
    /// win; each one skipped or refused is said in the log.
    func restoreSavedOptions(except explicit: Set<String>) async {
        let saved: [String: String]
        do { saved = try await manager.savedSettings() } catch {
            logger.error("the settings changed on the web page or by changeGlobalOption could not be read, the defaults apply: \(error.message)")
            return
        }
        var applied: [String] = []
        // The mirrors' definitions are kept beside the settings (DaemonMirrors reads them).
        for (name, stored) in saved.sorted(by: { $0.key < $1.key }) where !name.hasPrefix(DaemonMirrors.settingPrefix) {
            let value = (try? JSONValue.parse(Data(stored.utf8))) ?? .string(stored)
            let shown = "\(name)=\(Aria2Options.shown(name, Aria2Options.text(value)).debugDescription)"
            guard !explicit.contains(name) else {
                logger.notice("saved setting \(shown) not applied: the command line sets \(name)")
                continue
            }
            // One at a time: a saved folder that is gone, or an option this start refuses
            // (check-certificate=false without a secret), leaves the others applied.
            do {
                try await applyGlobalOptions([name: value])
                applied.append(shown)
            } catch {
                logger.warning("saved setting \(shown) not applied: \(error.message)")
            }
        }
        if !applied.isEmpty { logger.notice("settings saved by changeGlobalOption applied: \(applied.joined(separator: ", "))") }
    }

    /// Across the fleet, when there is one.
    func globalStat() async throws(RPCError) -> JSONValue {
        let totals: DownloadManager.Totals
        do { totals = try await manager.fleetTotals() } catch { throw .failed(error.message) }
        let stopped = String(totals.completed + totals.failed)
        return [
            "downloadSpeed": .string(String(Int64(totals.bytesPerSecond))),
            "uploadSpeed": .string(String(Int64(totals.uploadBytesPerSecond))),
            "numActive": .string(String(totals.running)),
            "numWaiting": .string(String(totals.queued + totals.paused)),
            "numStopped": .string(stopped),
            "numStoppedTotal": .string(stopped),
        ]
    }

    func removeResult(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let download = try await download(p.gid(0))
        guard !download.isUnfinished else { throw .failed("Could not remove download result of GID#\(download.id)") }
        await manager.remove(download.id)
        return "OK"
    }

    // MARK: Lookups

    /// The download of a GID, or of a unique prefix of one (aria2 takes both).
    func download(_ gid: String) async throws(RPCError) -> DownloadManager.Download {
        if let id = DownloadID(gid), let download = await manager.download(id) { return download }
        let matches = gid.count < 16 ? await manager.downloads(withIDPrefix: gid, limit: 2) : []
        guard matches.count == 1 else { throw .notFound(gid) }
        return matches[0]
    }

    /// ``download(_:)``, or for a whole GID this daemon does not hold, the download as the
    /// store records it: in a fleet, one that another daemon runs or that waits to be claimed.
    func fleetDownload(_ gid: String) async throws(RPCError) -> DownloadManager.Download {
        do { return try await download(gid) } catch {
            guard manager.queueIsShared, let id = DownloadID(gid), gid.count == 16 else { throw error }
            let stored: DownloadManager.Download?
            do { stored = try await manager.storedDownload(id) } catch let failure { throw .failed(failure.message) }
            guard let stored else { throw error }
            return stored
        }
    }

    /// aria2's paging of the waiting or stopped list: `count` from `offset` forwards, or for a
    /// negative offset from that far from the end backwards (-1 is the last, listed first).
    /// Costs the page, not the list; the page is charged to `exchange` before it is read. In a
    /// fleet, the list of the whole queue.
    func page(waiting: Bool, offset: Int, count: Int, _ exchange: inout Exchange) async throws(RPCError) -> [DownloadManager.Download] {
        let list: DownloadManager.FleetList = waiting ? .waiting : .stopped
        let total: Int
        do { total = try await manager.fleetCount(list) } catch { throw .failed(error.message) }
        guard let (start, limit, reversed) = Self.pageBounds(total: total, offset: offset, count: count) else { return [] }
        try exchange.charge(limit)
        let page: [DownloadManager.Download]
        do { page = try await manager.fleetDownloads(list, from: start, limit: limit) } catch { throw .failed(error.message) }
        return reversed ? page.reversed() : page
    }
}
