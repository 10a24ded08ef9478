import Foundation
import Haul

/// Haul's own methods for mirrors (name-spaced `haul.`, beside aria2's): folder trees the
/// daemon copies and keeps in sync (``DaemonMirrors``).
extension Aria2RPC {
    /// The options `haul.addMirror` takes besides the per-download ones of `addUri`.
    static let mirrorOptionNames: Set<String> = [
        "every", "delete", "include", "exclude", "level", "max-concurrent-downloads", "checksum-file", "require-checksum",
    ]

    /// `[url, options]`: adds a mirror of the folder at `url` into `dir` (default: the daemon's
    /// folder) and runs it now; with `every` (`90s`, `30m`, `1h`, `1d` or seconds) it runs again
    /// that long after each run ends. Its id (the same for the same URL and folder: adding it
    /// again changes its options).
    func addMirror(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let url = try p.string(0)
        try Aria2Options.validate(url: url)
        guard Mirror.Configuration.isFolderURL(url) else { throw .failed("not a folder URL Haul can mirror: \(url)") }
        let options = try p.object(1) ?? [:]
        for name in ["out", "checksum", "pause"] where options[name] != nil {
            throw .failed("\(name) cannot be given with a mirror: each file has its own name")
        }
        let perDownload = options.filter { !Self.mirrorOptionNames.contains($0.key) }
        let (request, _) = try Aria2Options.request(urls: [url], options: perDownload, defaults: globals, template: template)
        var definition = DaemonMirrors.Definition(
            url: url, dir: request.destination.path, maxConcurrentDownloads: await manager.maxConcurrentDownloads,
            template: request)
        definition.every = try Self.every(options["every"])
        definition.deletesGone = try Aria2Options.bool(options["delete"], "delete") ?? false
        definition.include = try Self.globs(options["include"], "include")
        definition.exclude = try Self.globs(options["exclude"], "exclude")
        definition.level = Int(try Aria2Options.integer(options["level"], "level", in: 0...1000) ?? 50)
        if let limit = try Aria2Options.integer(options["max-concurrent-downloads"], "max-concurrent-downloads", in: 1...1000) {
            definition.maxConcurrentDownloads = Int(limit)
        }
        definition.checksumFile = try checksumFile(options["checksum-file"])
        if try Aria2Options.bool(options["require-checksum"], "require-checksum") == true {
            guard definition.checksumFile != nil else { throw .failed("option require-checksum needs checksum-file") }
            definition.requiresChecksum = true
        }
        do { return .string(try await mirrors.add(definition)) } catch { throw .failed(error.description) }
    }

    /// `checksum-file`: an http(s) URL, or (with the daemon's secret: the daemon reads it, and
    /// its errors quote it) an absolute path on the daemon's machine.
    func checksumFile(_ value: JSONValue?) throws(RPCError) -> String? {
        guard let location = try Aria2Options.string(value, "checksum-file") else { return nil }
        if ChecksumFile.isURL(location) {
            try Aria2Options.validate(url: location)
            return location
        }
        try FolderPolicy.refuseControlCharacters(location, "checksum-file")
        guard !(secret ?? "").isEmpty else {
            throw .failed("option checksum-file must be an http(s) URL: a daemon without --rpc-secret reads no file of its machine for a client")
        }
        guard location.hasPrefix("/") else { throw .failed("option checksum-file must be an http(s) URL or an absolute path, not \(location)") }
        return location
    }

    /// `[]`: every mirror, its options, whether it runs (and its files now), its last run.
    func tellMirrors() async -> JSONValue {
        .array(await mirrors.statuses().map(Self.describe))
    }

    /// `[id]`: stops and forgets a mirror. Its files and records stay: adding it again continues.
    func removeMirror(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let id = try Self.mirrorID(p)
        let removed: Bool
        do { removed = try await mirrors.remove(id) } catch { throw .failed(error.description) }
        guard removed else { throw .failed("no mirror \(id)") }
        return "OK"
    }

    /// `[id]`: runs a mirror now, unless it runs already.
    func runMirror(_ p: Parameters) async throws(RPCError) -> JSONValue {
        let id = try Self.mirrorID(p)
        guard await mirrors.runNow(id) else { throw .failed("no mirror \(id)") }
        return "OK"
    }

    static func mirrorID(_ p: Parameters) throws(RPCError) -> String {
        let id = try p.string(0).lowercased()
        guard id.count == 16, id.allSatisfy(\.isHexDigit) else { throw .failed("Invalid mirror id \(id)") }
        return id
    }

    /// `every`: seconds, or a number and `s`, `m`, `h` or `d`; at least one second.
    static func every(_ value: JSONValue?) throws(RPCError) -> Int? {
        guard let text = try Aria2Options.string(value, "every")?.trimmingCharacters(in: .whitespaces) else { return nil }
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        let (digits, unit) = text.last.flatMap { units[$0] }.map { (text.dropLast(), $0) } ?? (Substring(text), 1)
        guard let count = Int(digits), count > 0, count <= 366 * 86400 / unit else {
            throw .failed("option every must be a time such as 90s, 30m, 1h or 1d (at most a year), not \(text)")
        }
        return count * unit
    }

    /// `include` and `exclude`: one glob or a list of them.
    static func globs(_ value: JSONValue?, _ name: String) throws(RPCError) -> [String] {
        switch value {
        case nil, .null?: return []
        case .string(let glob)?: return [glob]
        case .array(let list)?:
            return try list.map { item throws(RPCError) in
                guard let glob = item.string else { throw .failed("option \(name) must be a glob or a list of them") }
                return glob
            }
        default: throw .failed("option \(name) must be a glob or a list of them")
        }
    }

    static func describe(_ status: DaemonMirrors.Status) -> JSONValue {
        let definition = status.definition
        var object: [String: JSONValue] = [
            "id": .string(status.id),
            "url": .string(URLRedaction.redact(definition.url)),
            "dir": .string(definition.dir),
            "every": .string(String(definition.every ?? 0)),
            "delete": .string(String(definition.deletesGone)),
            "status": .string(Self.state(status)),
            "problems": .array(definition.problems.map { .string($0) }),
        ]
        if !definition.include.isEmpty { object["include"] = .array(definition.include.map { .string($0) }) }
        if !definition.exclude.isEmpty { object["exclude"] = .array(definition.exclude.map { .string($0) }) }
        if let checksumFile = definition.checksumFile { object["checksumFile"] = .string(URLRedaction.redact(checksumFile)) }
        if definition.requiresChecksum == true { object["requireChecksum"] = "true" }
        if let started = definition.lastStarted { object["lastStarted"] = .string(String(Int64(started.timeIntervalSince1970))) }
        if let ended = definition.lastEnded { object["lastEnded"] = .string(String(Int64(ended.timeIntervalSince1970))) }
        if status.totals == nil, let next = definition.nextRun, next > .distantPast {
            object["nextRun"] = .string(String(Int64(next.timeIntervalSince1970)))
        }
        if let totals = status.totals {
            object["numActive"] = .string(String(totals.running))
            object["numWaiting"] = .string(String(totals.queued + totals.paused))
            object["numComplete"] = .string(String(totals.completed))
            object["numFailed"] = .string(String(totals.failed))
            object["completedLength"] = .string(String(totals.bytesDone))
            object["downloadSpeed"] = .string(String(Int64(totals.bytesPerSecond)))
        }
        if let last = definition.last {
            object["last"] = [
                "new": .string(String(last.new)), "updated": .string(String(last.updated)),
                "unchanged": .string(String(last.unchanged)), "deleted": .string(String(last.deleted)),
                "failed": .string(String(last.failed)), "skipped": .string(String(last.skipped)),
                "bytesFetched": .string(String(last.bytesFetched)), "interrupted": .string(String(last.interrupted)),
            ]
        }
        return .object(object)
    }

    /// `active` while it runs; else `waiting` for its next run, or how its last run ended:
    /// `complete`, or `error` when a file or listing failed.
    static func state(_ status: DaemonMirrors.Status) -> String {
        if status.totals != nil { return "active" }
        let definition = status.definition
        if definition.every != nil || definition.nextRun == .distantPast { return "waiting" }
        guard let last = definition.last, last.failed == 0 else { return "error" }
        return "complete"
    }
}
