import ArgumentParser
import Foundation
import Haul
import HaulDaemon

/// How hard to try and how to connect, for each download: the options `haul get`, `haul add`
/// and `haul daemon` (as its defaults) share, with one meaning. They fill a
/// ``DownloadRequest``, which the library checks once.
struct TransferOptions: ParsableArguments {
    @Option(
        name: [.customShort("x"), .long],
        help: "Connections per download when the server serves ranges of a file of known length, 1–16 (1 disables segmenting; default 4).")
    var connections: Int?

    @Option(help: "Never split a segment below this size: bytes, or with K, M or G (binary) suffix (default 1M).")
    var minSplitSize: String?

    @Option(help: "Give up after this many failed tries in a row; a try that made progress resets the count (default 5).")
    var maxTries: Int?

    @Option(help: "Seconds to wait before the first retry; doubles each time, with jitter. A server's Retry-After wins (default 1).")
    var retryWait: Double?

    @Option(name: [.customShort("H"), .long], help: "Extra request header 'Name: value' (repeatable).")
    var header: [String] = []

    @Option(help: ArgumentHelp("Extra request headers from a file, 'Name: value' a line ('#' starts a comment).", valueName: "file"))
    var headerFile: String?

    @Option(help: "Limit each download's rate, e.g. 500K (bytes per second; K, M, G suffixes; 0 for none).")
    var maxDownloadLimit: String?

    @Flag(
        name: [.customLong("overwrite"), .customLong("allow-overwrite")],
        help: "Replace a different file already at the destination instead of saving as name.1.ext.")
    var overwrite = false

    @Flag(
        help:
            "Fetch each file from the mirrors its server names too (Link: rel=duplicate headers, RFC 6249), checked against the server's Digest header when no checksum is given. With haul get, a URL whose answer is a Metalink document is saved, then each file it lists is downloaded."
    )
    var followMetalink = false

    @OptionGroup(title: "Network") var network: NetworkFlags

    static let defaultConnections = 4

    func validate() throws {
        var request = DownloadRequest(url: "http://check.invalid/", directory: ".")
        try apply(to: &request)
        do { try request.validate() } catch { throw ValidationError(Self.flagged(error.message)) }
    }

    /// Sets what was given on `request` (the rest keeps its defaults); the connections default
    /// to 4 either way.
    func apply(to request: inout DownloadRequest) throws {
        request.connections = connections ?? Self.defaultConnections
        if let minSplitSize {
            guard let size = ByteCount.parse(minSplitSize) else {
                throw ValidationError("--min-split-size must be a size such as 1M, not \(minSplitSize)")
            }
            request.minimumSplitSize = size
        }
        if let maxTries { request.maxTries = maxTries }
        if let retryWait {
            guard retryWait >= 0, retryWait <= 3600 else { throw ValidationError("--retry-wait must be between 0 and 3600 seconds") }
            request.retryWait = .milliseconds(Int64(retryWait * 1000))
        }
        request.headers = try Self.headers(try headerLines())
        if let maxDownloadLimit {
            guard let rate = ByteCount.parse(maxDownloadLimit) else {
                throw ValidationError("--max-download-limit must be a rate such as 2M, not \(maxDownloadLimit)")
            }
            request.rateLimit = rate > 0 ? rate : nil
        }
        request.overwrite = overwrite
        request.followMetalink = followMetalink
        try network.apply(to: &request.network)
    }

    /// The `-H` headers, after those of `--header-file`.
    func headerLines() throws -> [String] {
        guard let headerFile else { return header }
        guard let data = FileManager.default.contents(atPath: headerFile) else {
            throw ValidationError("cannot read the header file \(headerFile)")
        }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
        return lines + header
    }

    static func headers(_ lines: [String]) throws -> [DownloadRequest.Header] {
        try lines.map { line in
            do throws(DownloadError) { return try DownloadRequest.Header(parsing: line) } catch { throw ValidationError(error.message) }
        }
    }

    /// The same options as aria2 names them, for `haul add` (the daemon applies its defaults
    /// to what is not given).
    ///
    /// - Throws: `ValidationError` when the header file cannot be read.
    func aria2Options() throws -> [String: JSONValue] {
        var options: [String: JSONValue] = [:]
        if let connections {
            options["split"] = .string(String(connections))
            options["max-connection-per-server"] = .string(String(connections))
        }
        if let minSplitSize { options["min-split-size"] = .string(minSplitSize) }
        if let maxTries { options["max-tries"] = .string(String(maxTries)) }
        if let retryWait { options["retry-wait"] = .string(String(Int(retryWait.rounded(.up)))) }
        let headers = try headerLines()
        if !headers.isEmpty { options["header"] = .array(headers.map { .string($0) }) }
        if let maxDownloadLimit { options["max-download-limit"] = .string(maxDownloadLimit) }
        if overwrite { options["allow-overwrite"] = "true" }
        options.merge(network.aria2Options) { _, new in new }
        return options
    }

    /// The library's words with the flag a person typed.
    static func flagged(_ message: String) -> String {
        message.replacingOccurrences(of: "connections must", with: "--connections must")
            .replacingOccurrences(of: "tries must", with: "--max-tries must")
            .replacingOccurrences(of: "the minimum split size must", with: "--min-split-size must")
    }
}
