import Foundation
import Haul

/// The daemon-wide options of aria2 that Haul honours, as `getGlobalOption` shows them and
/// `changeGlobalOption` changes them. Per-download options start from these.
struct GlobalOptions: Sendable {
    /// Where downloads go without a `dir` option.
    var dir: String
    /// Which folders a client may write to; fixed when the daemon starts.
    let folders: FolderPolicy
    /// Connections per download (aria2's `split`). aria2's default is 5 with 1 connection per
    /// server, which makes 1; Haul defaults both to 4, like `haul get -x`.
    var split = 4
    var maxConnectionPerServer = 4
    var minSplitSize: Int64 = 1 << 20
    /// Each new download's own rate limit, 0 for none.
    var maxDownloadLimit: Int64 = 0
    var maxTries = 5
    var retryWait = 1
    /// Headers every download sends (aria2's global `header`).
    var headers: [DownloadRequest.Header] = []
    var allowOverwrite = false
    /// Proxies, TLS, credentials, cookies and identity of every new download.
    var network = NetworkOptions()

    var connections: Int { min(split, maxConnectionPerServer) }

    /// aria2's 0 means no limit.
    func apply(rateLimitTo request: inout DownloadRequest) {
        request.rateLimit = maxDownloadLimit > 0 ? maxDownloadLimit : nil
    }

    /// aria2's 0 means no end to the tries.
    func apply(triesTo request: inout DownloadRequest) {
        request.maxTries = maxTries == 0 ? Int.max : maxTries
    }

    /// At least a second between tries.
    func apply(retryWaitTo request: inout DownloadRequest) {
        request.retryWait = .seconds(max(1, retryWait))
    }
}

/// Reading aria2 options (every value a string, as aria2 wants them; JSON numbers are accepted
/// too) into a ``DownloadRequest``, and writing one back for `getOption`.
enum Aria2Options {
    /// The library's range of connections, as aria2's options take it.
    static let connectionRange = Int64(DownloadRequest.connectionRange.lowerBound)...Int64(DownloadRequest.connectionRange.upperBound)

    /// The option names `addUri` and `changeOption` understand. Any other is refused with an
    /// error naming it: an option silently dropped (a proxy, a password) would make a download
    /// go somewhere or as someone it was not meant to.
    static let perDownload: Set<String> = Set([
        "dir", "out", "split", "max-connection-per-server", "min-split-size", "checksum", "header", "pause",
        "max-download-limit", "max-tries", "retry-wait", "allow-overwrite",
    ]).union(network)

    /// The network options among them (aria2's names).
    static let network: Set<String> = [
        "all-proxy", "http-proxy", "https-proxy", "no-proxy", "all-proxy-user", "all-proxy-passwd",
        "http-proxy-user", "http-proxy-passwd", "https-proxy-user", "https-proxy-passwd",
        "ca-certificate", "check-certificate", "certificate", "private-key", "http-user", "http-passwd",
        "netrc-path", "no-netrc", "load-cookies", "user-agent", "referer", "connect-timeout", "max-redirect",
        // Haul's own: aria2 has no HTTP/2.
        "http2",
    ]

    /// The options `changeGlobalOption` understands: the defaults of new downloads (not
    /// `out`, `checksum` or `pause`, which only mean something for one) and the daemon's own.
    static let globalOptionNames: Set<String> = perDownload.subtracting(["out", "checksum", "pause", "header", "allow-overwrite"])
        .union(["max-concurrent-downloads", "max-overall-download-limit"])

    /// Refuses the first option not in `known`, by name.
    static func refuseUnknown(_ options: [String: JSONValue], known: Set<String>) throws(RPCError) {
        if let unknown = options.keys.sorted().first(where: { !known.contains($0) }) {
            throw .failed("option \(unknown) is not supported by Haul")
        }
    }

    /// A new request for the file at `urls` (one URL, or one and its mirrors) from `options` over `defaults` (whose request is `template`), and
    /// whether to add it paused. Copies of one template share its options: a queue of 100,000
    /// downloads added with the daemon's defaults holds one set of them, not 100,000.
    static func request(
        urls: [String], options: [String: JSONValue], defaults: GlobalOptions,
        template: DownloadRequest
    ) throws(RPCError) -> (DownloadRequest, paused: Bool) {
        for url in urls { try validate(url: url) }
        var request = template
        request.sources = urls.map { DownloadRequest.Source(uri: $0) }
        if !options.isEmpty { try apply(options, to: &request, defaults: defaults) }
        return (request, try bool(options["pause"], "pause") ?? false)
    }

    /// The request every new download starts from, with `defaults` (and no URL yet).
    static func template(_ defaults: GlobalOptions) -> DownloadRequest {
        var request = DownloadRequest(url: "", directory: defaults.dir)
        request.connections = defaults.connections
        request.minimumSplitSize = defaults.minSplitSize
        defaults.apply(rateLimitTo: &request)
        defaults.apply(triesTo: &request)
        defaults.apply(retryWaitTo: &request)
        request.headers = defaults.headers
        request.overwrite = defaults.allowOverwrite
        request.network = defaults.network
        // Checked again when each download starts: a link planted after the add is refused then.
        if defaults.folders.confined { request.confinement = defaults.folders.root }
        return request
    }

    /// Changes `request` by `options`. `dir` and `out` together make the destination.
    static func apply(_ options: [String: JSONValue], to request: inout DownloadRequest, defaults: GlobalOptions) throws(RPCError) {
        try refuseUnknown(options, known: perDownload)
        let current = destinationParts(request.destination)
        if options["dir"] != nil || options["out"] != nil {
            let folders = defaults.folders
            let dir =
                try string(options["dir"], "dir").map { dir throws(RPCError) in try folders.folder(dir, base: defaults.dir) }
                ?? current.dir
            let out = try string(options["out"], "out") ?? current.out
            if let out, !out.isEmpty {
                request.destination = .file(try folders.file(out, in: dir))
            } else {
                request.destination = .directory(dir)
            }
        }
        var tuned = defaults
        try tune(&tuned, by: options)
        if options["split"] != nil || options["max-connection-per-server"] != nil { request.connections = tuned.connections }
        if options["min-split-size"] != nil { request.minimumSplitSize = tuned.minSplitSize }
        if let text = try string(options["checksum"], "checksum") {
            do { request.checksum = try Checksum(parsing: text) } catch { throw .failed("checksum: \(error)") }
        }
        if let headers = options["header"] {
            request.headers = try headerList(headers).map { line throws(RPCError) in
                guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                    throw .failed("header must be 'Name: value', not \(line)")
                }
                let name = line[..<colon].trimmingCharacters(in: .whitespaces)
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                guard !name.contains(where: { $0.isWhitespace || $0.isNewline }), !value.contains(where: \.isNewline) else {
                    throw .failed("header must be one line 'Name: value', not \(line.debugDescription)")
                }
                return DownloadRequest.Header(name: name, value: value)
            }
        }
        if options["max-download-limit"] != nil { tuned.apply(rateLimitTo: &request) }
        if options["max-tries"] != nil { tuned.apply(triesTo: &request) }
        if options["retry-wait"] != nil { tuned.apply(retryWaitTo: &request) }
        if let overwrite = try bool(options["allow-overwrite"], "allow-overwrite") {
            request.overwrite = overwrite
        }
        try apply(network: options, to: &request.network)
        do { try request.network.validate() } catch { throw .failed(error.message) }
    }

    /// Reads aria2's network options into `network`; what is not given stays.
    static func apply(network options: [String: JSONValue], to network: inout NetworkOptions) throws(RPCError) {
        func text(_ name: String) throws(RPCError) -> String? { try string(options[name], name) }
        func path(_ name: String) throws(RPCError) -> String? {
            guard let value = try text(name) else { return nil }
            guard value.hasPrefix("/") else { throw .failed("option \(name) must be an absolute path, not \(value)") }
            return value
        }
        for (name, keyPath) in [("all-proxy", \ProxySettings.all), ("http-proxy", \.http), ("https-proxy", \.https)] {
            if let value = try text(name) { network.proxy[keyPath: keyPath] = value.isEmpty ? nil : value }
        }
        if let list = try text("no-proxy") { network.proxy.noProxy = ProxySettings.list(list) }
        for prefix in ["all-proxy", "http-proxy", "https-proxy"] {
            if let user = try text(prefix + "-user") { network.proxy.user = user.isEmpty ? nil : user }
            if let password = try text(prefix + "-passwd") { network.proxy.password = password.isEmpty ? nil : password }
        }
        if let ca = try path("ca-certificate") { network.tls.caCertificate = ca }
        if let verify = try bool(options["check-certificate"], "check-certificate") { network.tls.verify = verify }
        if let certificate = try path("certificate") { network.tls.certificate = certificate }
        if let key = try path("private-key") { network.tls.privateKey = key }
        if let user = try text("http-user") { network.user = user.isEmpty ? nil : user }
        if let password = try text("http-passwd") { network.password = password.isEmpty ? nil : password }
        if let netrc = try path("netrc-path") {
            network.netrcPath = netrc
            network.useNetrc = true
        }
        if let noNetrc = try bool(options["no-netrc"], "no-netrc") { network.useNetrc = !noNetrc }
        if let cookies = try path("load-cookies") { network.cookieFile = cookies }
        if let agent = try text("user-agent") { network.userAgent = agent.isEmpty ? nil : agent }
        if let referer = try text("referer") { network.referer = referer.isEmpty ? nil : referer }
        if let seconds = try integer(options["connect-timeout"], "connect-timeout", in: 1...600) {
            network.connectTimeout = .seconds(seconds)
        }
        if let redirects = try integer(options["max-redirect"], "max-redirect", in: 0...100) { network.maxRedirects = Int(redirects) }
        if let http2 = try bool(options["http2"], "http2") { network.http2 = http2 }
    }

    /// An option's value as Haul shows it (`getOption`, `getGlobalOption`, the daemon's log):
    /// a password as `********`, a proxy URL without its credentials.
    static func shown(_ name: String, _ value: String) -> String {
        if name.hasSuffix("-passwd") { return value.isEmpty ? "" : "********" }
        if ["all-proxy", "http-proxy", "https-proxy"].contains(name) { return URLRedaction.redact(value) }
        return value
    }

    /// The network options as `getOption` shows them; passwords are masked.
    static func describe(network: NetworkOptions, into object: inout [String: JSONValue]) {
        let pairs: [(String, String?)] = [
            ("all-proxy", network.proxy.all), ("http-proxy", network.proxy.http), ("https-proxy", network.proxy.https),
            ("no-proxy", network.proxy.noProxy.isEmpty ? nil : network.proxy.noProxy.joined(separator: ",")),
            ("all-proxy-user", network.proxy.user), ("all-proxy-passwd", network.proxy.password),
            ("ca-certificate", network.tls.caCertificate), ("certificate", network.tls.certificate),
            ("private-key", network.tls.privateKey), ("http-user", network.user),
            ("http-passwd", network.password), ("netrc-path", network.netrcPath),
            ("load-cookies", network.cookieFile), ("user-agent", network.userAgent), ("referer", network.referer),
        ]
        for (name, value) in pairs { if let value { object[name] = .string(shown(name, value)) } }
        object["check-certificate"] = .string(network.tls.verify ? "true" : "false")
        object["no-netrc"] = .string(network.useNetrc ? "false" : "true")
        object["connect-timeout"] = .string(String(network.connectTimeout.components.seconds))
        object["max-redirect"] = .string(String(network.maxRedirects))
        object["http2"] = .string(network.http2 ? "true" : "false")
    }

    /// Reads the options a download and the daemon's defaults share (`split`,
    /// `max-connection-per-server`, `min-split-size`, `max-download-limit`, `max-tries`,
    /// `retry-wait`) into `tuned`, checking each; what is not given stays.
    static func tune(_ tuned: inout GlobalOptions, by options: [String: JSONValue]) throws(RPCError) {
        if let split = try integer(options["split"], "split", in: Self.connectionRange) { tuned.split = Int(split) }
        if let perServer = try integer(options["max-connection-per-server"], "max-connection-per-server", in: Self.connectionRange) {
            tuned.maxConnectionPerServer = Int(perServer)
        }
        if let size = try size(options["min-split-size"], "min-split-size") {
            guard size >= 1 << 20 else { throw .failed("min-split-size must be between 1M and 1G") }
            tuned.minSplitSize = size
        }
        if let limit = try size(options["max-download-limit"], "max-download-limit") { tuned.maxDownloadLimit = limit }
        if let tries = try integer(options["max-tries"], "max-tries", in: 0...1000) { tuned.maxTries = Int(tries) }
        if let wait = try integer(options["retry-wait"], "retry-wait", in: 0...600) { tuned.retryWait = Int(wait) }
    }

    /// `getOption`'s answer for one download.
    static func describe(_ request: DownloadRequest) -> JSONValue {
        let parts = destinationParts(request.destination)
        var object: [String: JSONValue] = [
            "dir": .string(parts.dir),
            "split": .string(String(request.connections)),
            "max-connection-per-server": .string(String(request.connections)),
            "min-split-size": .string(String(request.minimumSplitSize)),
            "max-download-limit": .string(String(request.rateLimit ?? 0)),
            "max-tries": .string(String(request.maxTries == Int.max ? 0 : request.maxTries)),
            "retry-wait": .string(String(request.retryWait.components.seconds)),
            "allow-overwrite": .string(request.overwrite ? "true" : "false"),
        ]
        if let out = parts.out { object["out"] = .string(out) }
        if let checksum = request.checksum { object["checksum"] = .string(checksum.description) }
        if !request.headers.isEmpty {
            object["header"] = .array(request.headers.map { .string("\($0.name): \($0.value)") })
        }
        describe(network: request.network, into: &object)
        return .object(object)
    }

    /// A URL Haul can download: `http` or `https` with a host.
    static func validate(url: String) throws(RPCError) {
        guard let components = URLComponents(string: url),
            let scheme = components.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = components.host, !host.isEmpty
        else {
            throw .failed("not a URL Haul can download: it takes http:// and https:// URLs only")
        }
    }

    static func destinationParts(_ destination: DownloadRequest.Destination) -> (dir: String, out: String?) {
        switch destination {
        case .directory(let dir): (absolute(dir), nil)
        case .file(let path):
            ((absolute(path) as NSString).deletingLastPathComponent, (path as NSString).lastPathComponent)
        }
    }

    static func absolute(_ path: String) -> String { DownloadRequest.absolutePath(path) }

    // MARK: Values

    static func string(_ value: JSONValue?, _ name: String) throws(RPCError) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case .int(let number)?: return String(number)
        default: throw .failed("option \(name) must be a string")
        }
    }

    /// A value as text: a string as it is, anything else as JSON.
    static func text(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text }
        return value.description
    }

    static func integer(_ value: JSONValue?, _ name: String, in range: ClosedRange<Int64>) throws(RPCError) -> Int64? {
        guard let text = try string(value, name) else { return nil }
        guard let number = Int64(text), range.contains(number) else {
            throw .failed("option \(name) must be a number between \(range.lowerBound) and \(range.upperBound), not \(text)")
        }
        return number
    }

    static func size(_ value: JSONValue?, _ name: String) throws(RPCError) -> Int64? {
        guard let text = try string(value, name) else { return nil }
        guard let bytes = ByteCount.parse(text) else {
            throw .failed("option \(name) must be a size such as 1048576, 512K or 2M, not \(text)")
        }
        return bytes
    }

    static func bool(_ value: JSONValue?, _ name: String) throws(RPCError) -> Bool? {
        switch value {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        case .string("true")?: return true
        case .string("false")?: return false
        default: throw .failed("option \(name) must be true or false")
        }
    }

    /// aria2 takes `header` as one string or a list of them.
    static func headerList(_ value: JSONValue) throws(RPCError) -> [String] {
        switch value {
        case .string(let line): return [line]
        case .array(let lines):
            return try lines.map { line throws(RPCError) in
                guard let text = line.string else { throw .failed("header must be a list of strings") }
                return text
            }
        default: throw .failed("header must be a string or a list of strings")
        }
    }
}
