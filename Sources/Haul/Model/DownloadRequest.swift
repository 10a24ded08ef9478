import Foundation
import Synchronization

/// What to download, where to, and how hard to try: the one description of a download.
///
/// The command line, the daemon's RPC options and library callers all build one of these; the
/// manager checks it once (``validate()``) and stores it as it is.
///
/// ```swift
/// var request = DownloadRequest(url: "https://example.com/big.iso", directory: "/tmp")
/// request.checksum = try Checksum(parsing: "sha-256=…")
/// request.headers = [.init(name: "Authorization", value: "Bearer …")]
/// ```
public struct DownloadRequest: Sendable, Hashable, Codable {
    /// Where the file goes.
    public enum Destination: Sendable, Hashable, Codable {
        /// Exactly this path.
        case file(String)
        /// This folder, under the name the server suggests (Content-Disposition) or the URL's last segment.
        case directory(String)

        /// The path given, file or folder.
        public var path: String {
            switch self {
            case .file(let path), .directory(let path): path
            }
        }
    }

    /// An extra request header.
    public struct Header: Sendable, Hashable, Codable {
        /// The header's name, a token (`Authorization`).
        public var name: String
        /// Its value, one line.
        public var value: String

        /// A header; ``DownloadRequest/validate()`` checks it when the download starts.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }

        /// `Name: value`, refusing anything that could smuggle a second header or request line.
        public init(parsing line: String) throws(DownloadError) {
            guard let colon = line.firstIndex(of: ":") else {
                throw .invalidRequest("bad header \"\(line)\": expected 'Name: value'")
            }
            self.init(
                name: line[..<colon].trimmingCharacters(in: .whitespaces),
                value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            try validate()
        }

        /// A token name and a value without control characters (a tab is allowed).
        func validate() throws(DownloadError) {
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(Self.isTokenCharacter) else {
                throw .invalidRequest("bad header name \"\(name)\": letters, digits and !#$%&'*+-.^_`|~ only")
            }
            guard !value.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) else {
                throw .invalidRequest("header \(name) contains control characters")
            }
        }

        private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
            guard scalar.isASCII else { return false }
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9": return true
            default: return "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar)
            }
        }
    }

    /// The first source's URL: the one URL of a download from one place. Setting it replaces the
    /// first source's URI and keeps the others.
    public var url: String {
        didSet { if !allSources.isEmpty { allSources[0].uri = url } }
    }
    /// Where the file can be fetched from, in order of preference: the URL of a plain request, or
    /// that URL and its mirrors. Every source must serve the same bytes.
    public var sources: [Source] {
        get { allSources.isEmpty ? [Source(uri: url)] : allSources }
        set {
            // A download from its one URL keeps no list: a queue of 1,000,000 URLs holds no
            // array for each.
            let plain = newValue.count == 1 && newValue[0].priority == nil && newValue[0].location == nil
            allSources = plain || newValue.isEmpty ? [] : newValue
            url = newValue.first?.uri ?? ""
        }
    }
    /// Every source, when there is more to keep than the URL (mirrors, a priority, a location);
    /// empty otherwise.
    private var allSources: [Source] = []
    /// Where the file goes.
    public var destination: Destination
    /// Extra request headers (`Authorization`, `Cookie`, …), sent on every request.
    public var headers: [Header] {
        get { options.value.headers }
        set { update(\.headers, to: newValue) }
    }
    /// A digest the finished file must match.
    public var checksum: Checksum? {
        get { options.value.checksum }
        set { update(\.checksum, to: newValue) }
    }
    /// The digests of the file's pieces, each checked as soon as its bytes are in: a piece that
    /// does not match is fetched again from another source, and the source that served it is
    /// dropped. Recorded progress holds verified pieces only.
    public var pieces: PieceChecksums? {
        get { options.value.pieces }
        set { update(\.pieces, to: newValue) }
    }
    /// Take the mirrors and the digest the server names in its first answer (Metalink/HTTP,
    /// RFC 6249: `Link: <…>; rel=duplicate` headers, and `Digest: SHA-256=…`) as more sources
    /// and the checksum of this download. Off by default: the server then chooses other hosts
    /// to fetch from.
    public var followMetalink: Bool {
        get { options.value.followMetalink }
        set { update(\.followMetalink, to: newValue) }
    }
    /// Tries in a row that may fail before giving up; a try that made progress resets the count.
    public var maxTries: Int {
        get { options.value.maxTries }
        set { update(\.maxTries, to: newValue) }
    }
    /// The first retry wait; it doubles on each further failure (with jitter).
    public var retryWait: Duration {
        get { options.value.retryWait }
        set { update(\.retryWait, to: newValue) }
    }
    /// Replace a different file already at the destination instead of saving as `name.1.ext`.
    public var overwrite: Bool {
        get { options.value.overwrite }
        set { update(\.overwrite, to: newValue) }
    }
    /// Connections for one download when the server serves ranges of a file of known length
    /// (aria2's `-x`); 1 disables segmenting.
    public var connections: Int {
        get { options.value.connections }
        set { update(\.connections, to: newValue) }
    }
    /// A segment is never split below this size (aria2's `--min-split-size`).
    public var minimumSplitSize: Int64 {
        get { options.value.minimumSplitSize }
        set { update(\.minimumSplitSize, to: newValue) }
    }
    /// This download's own rate limit in bytes per second, on top of the downloader's global one.
    public var rateLimit: Int64? {
        get { options.value.rateLimit }
        set { update(\.rateLimit, to: newValue) }
    }
    /// Proxies, TLS trust, credentials, cookies and identity.
    public var network: NetworkOptions {
        get { options.value.network }
        set { update(\.network, to: newValue) }
    }
    /// A folder the file must stay inside, whatever was planted on the way: when the download
    /// starts, its folder is opened beneath this one (a symbolic link or `..` leading out of it
    /// is refused), and its part file is made and renamed relative to that open folder. Nil
    /// (the default): the destination's folders are taken as they are, links included.
    ///
    /// The daemon without a secret confines every download to its download folder; `haul get`
    /// confines a list's downloads to `--dir`.
    public var confinement: String? {
        get { options.value.confinement }
        set { update(\.confinement, to: newValue.map(FilePaths.absolute)) }
    }

    /// Everything but the URL and the destination, held once for all the copies of a request:
    /// the requests of a list of 100,000 made from one command line share one (a request is
    /// a few dozen bytes, not 144, in each of them).
    private var options = OptionsBox.standard

    /// Whether this request and `other` hold the very same options (not only equal ones): what
    /// copies of one template do until one of them changes an option.
    func sharesOptions(with other: DownloadRequest) -> Bool { options === other.options }

    /// Sets one option: a value equal to the one held changes nothing (the requests of a list
    /// set their checksum, most often to none, and keep sharing the template's options without
    /// a copy of them being made and compared).
    private mutating func update<Value: Equatable>(_ option: WritableKeyPath<Options, Value>, to value: Value) {
        guard options.value[keyPath: option] != value else { return }
        var changed = options.value
        changed[keyPath: option] = value
        options = changed == OptionsBox.standard.value ? .standard : OptionsBox(changed)
    }

    /// What a request asks besides its URL and destination.
    struct Options: Sendable, Hashable {
        var headers: [Header] = []
        var checksum: Checksum?
        var pieces: PieceChecksums?
        var followMetalink = false
        var maxTries = 5
        var retryWait: Duration = .seconds(1)
        var overwrite = false
        var connections = 1
        var minimumSplitSize: Int64 = 1 << 20
        var rateLimit: Int64?
        var network = NetworkOptions()
        var confinement: String?

        /// The checks of ``DownloadRequest/validate()`` that depend on the options alone.
        func validate() throws(DownloadError) {
            for header in headers { try header.validate() }
            try pieces?.validate()
            guard DownloadRequest.connectionRange.contains(connections) else {
                throw .invalidRequest("connections must be between 1 and 16, not \(connections)")
            }
            guard maxTries >= 1 else { throw .invalidRequest("tries must be at least 1, not \(maxTries)") }
            guard retryWait >= .zero else { throw .invalidRequest("the retry wait must not be negative") }
            guard minimumSplitSize >= DownloadRequest.smallestSplit else {
                throw .invalidRequest("the minimum split size must be at least 1K, not \(minimumSplitSize)")
            }
            if let rateLimit, rateLimit < 0 { throw .invalidRequest("the rate limit must not be negative") }
            try network.validate()
        }
    }

    /// The request without the secrets it carries — Basic and proxy passwords, credentials in
    /// proxy URLs, `Authorization`, `Proxy-Authorization` and `Cookie` headers — or nil when it
    /// carries none. A finished download keeps only this: its secrets were needed to fetch it,
    /// not to remember it. A password written inside the URL stays: the URL is the download's
    /// identity (give it with `--http-passwd` instead).
    public var withoutSecrets: DownloadRequest? {
        let secretHeaders = Self.secretHeaders
        let proxy = network.proxy
        // Asked of every download that completes: most carry nothing, and are not copied.
        guard
            network.password != nil || proxy.password != nil
                || [proxy.all, proxy.http, proxy.https].contains(where: { $0?.contains("@") == true })
                || headers.contains(where: { secretHeaders.contains($0.name.lowercased()) })
        else { return nil }
        var plain = self
        plain.network.password = nil
        plain.network.proxy.password = nil
        for keyPath in [\ProxySettings.all, \ProxySettings.http, \ProxySettings.https] {
            plain.network.proxy[keyPath: keyPath] = plain.network.proxy[keyPath: keyPath].map(URLRedaction.redact)
        }
        plain.headers.removeAll { secretHeaders.contains($0.name.lowercased()) }
        return plain == self ? nil : plain
    }

    /// The headers ``withoutSecrets`` drops, lowercased.
    private static let secretHeaders: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The URL as it may be shown: without the credentials it may carry.
    public var displayURL: String { URLRedaction.redact(url) }

    /// Whether the request has more than its one URL (or details of that URL worth keeping).
    var hasMirrors: Bool { !allSources.isEmpty }

    /// Connections a download may use: aria2's `-x` range.
    public static let connectionRange = 1...16
    /// The smallest `minimumSplitSize`.
    public static let smallestSplit: Int64 = 1 << 10

    /// Reads a stored request; options added in later versions take their defaults.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        url = try container.decode(String.self, forKey: .url)
        destination = try container.decode(Destination.self, forKey: .destination)
        var decoded = Options()
        decoded.headers = try container.decodeIfPresent([Header].self, forKey: .headers) ?? []
        decoded.checksum = try container.decodeIfPresent(Checksum.self, forKey: .checksum)
        decoded.pieces = try container.decodeIfPresent(PieceChecksums.self, forKey: .pieces)
        decoded.followMetalink = try container.decodeIfPresent(Bool.self, forKey: .followMetalink) ?? false
        decoded.maxTries = try container.decodeIfPresent(Int.self, forKey: .maxTries) ?? 5
        decoded.retryWait = try container.decodeIfPresent(Duration.self, forKey: .retryWait) ?? .seconds(1)
        decoded.overwrite = try container.decodeIfPresent(Bool.self, forKey: .overwrite) ?? false
        decoded.connections = try container.decodeIfPresent(Int.self, forKey: .connections) ?? 1
        decoded.minimumSplitSize = try container.decodeIfPresent(Int64.self, forKey: .minimumSplitSize) ?? 1 << 20
        decoded.rateLimit = try container.decodeIfPresent(Int64.self, forKey: .rateLimit)
        decoded.network = try container.decodeIfPresent(NetworkOptions.self, forKey: .network) ?? NetworkOptions()
        decoded.confinement = try container.decodeIfPresent(String.self, forKey: .confinement)
        update(\.self, to: decoded)
        // Requests stored before a download had sources carry only their URL.
        if let sources = try container.decodeIfPresent([Source].self, forKey: .sources) { self.sources = sources }
    }

    private enum CodingKeys: String, CodingKey {
        case url, sources, destination, headers, checksum, maxTries, retryWait, overwrite, connections, minimumSplitSize, rateLimit, network
        case confinement, pieces, followMetalink
    }

    /// Writes the URL, the destination and what differs from the defaults, which
    /// ``init(from:)`` fills back in: each stored row carries its request, and a list's 100,000
    /// rows written with every default were most of the store's bytes.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let defaults = OptionsBox.standard.value
        try container.encode(url, forKey: .url)
        if hasMirrors { try container.encode(sources, forKey: .sources) }
        try container.encode(destination, forKey: .destination)
        if !headers.isEmpty { try container.encode(headers, forKey: .headers) }
        try container.encodeIfPresent(checksum, forKey: .checksum)
        try container.encodeIfPresent(pieces, forKey: .pieces)
        if followMetalink { try container.encode(true, forKey: .followMetalink) }
        if maxTries != defaults.maxTries { try container.encode(maxTries, forKey: .maxTries) }
        if retryWait != defaults.retryWait { try container.encode(retryWait, forKey: .retryWait) }
        if overwrite { try container.encode(true, forKey: .overwrite) }
        if connections != defaults.connections { try container.encode(connections, forKey: .connections) }
        if minimumSplitSize != defaults.minimumSplitSize { try container.encode(minimumSplitSize, forKey: .minimumSplitSize) }
        try container.encodeIfPresent(rateLimit, forKey: .rateLimit)
        if network != defaults.network { try container.encode(network, forKey: .network) }
        try container.encodeIfPresent(confinement, forKey: .confinement)
    }

    /// A request for `url` saved into `directory`.
    public init(url: String, directory: String) {
        self.url = url
        self.destination = .directory(directory)
    }

    /// A request for `url` saved at `path`.
    public init(url: String, file path: String) {
        self.url = url
        self.destination = .file(path)
    }

    /// Checks the request once, for every way one is made: `http`/`https` URLs with a host (each
    /// source once), headers that are one line each, connections in 1…16, at least one try,
    /// sane sizes, readable files for the options that name one. Options shared with a request
    /// that passed already (the requests of one list) are not checked again.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` naming what is wrong.
    public func validate() throws(DownloadError) {
        if allSources.isEmpty {
            guard !url.isEmpty else { throw .invalidRequest("a download needs at least one URL") }
            guard let parsed = HTTPURL(url), parsed.scheme == "http" || parsed.scheme == "https" else {
                throw .invalidRequest("not a URL Haul can download: it takes http:// and https:// URLs with a host")
            }
        } else {
            try validateSources()
        }
        guard !destination.path.isEmpty else { throw .invalidRequest("the destination is empty") }
        // The control characters (general category Cc) are exactly C0, DEL and C1: ranges, where
        // a lookup of each scalar's category cost a long list a percent of its time.
        guard !destination.path.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw .invalidRequest("the destination \(destination.path.debugDescription) contains control characters")
        }
        if let confinement {
            let path = FilePaths.absolute(destination.path)
            let inside = path.hasPrefix(confinement == "/" ? "/" : confinement + "/")
            guard inside || (path == confinement && destination == .directory(destination.path)) else {
                throw .invalidRequest("\(path) is outside \(confinement), the folder this download must stay in")
            }
        }
        try options.validate()
    }

    /// `path` as destinations are stored: `~` expanded, made absolute against the current
    /// folder, and standardized.
    public static func absolutePath(_ path: String) -> String {
        FilePaths.absolute(path)
    }

    /// The request with its destination made absolute (what is stored and compared).
    var absolutized: DownloadRequest {
        var request = self
        switch destination {
        case .file(let path): request.destination = .file(Self.absolutePath(path))
        case .directory(let path): request.destination = .directory(Self.absolutePath(path))
        }
        return request
    }
}

/// A request's options behind one reference, compared by value.
final class OptionsBox: Sendable, Hashable {
    let value: DownloadRequest.Options
    /// Whether ``validate()`` passed: the options a list's requests share are checked once for
    /// the list, not once a request (the files they name looked up each time were 3% of a list
    /// of small files).
    private let valid = Atomic(false)

    /// The defaults, shared by every request that changes none.
    static let standard = OptionsBox(DownloadRequest.Options())

    init(_ value: DownloadRequest.Options) { self.value = value }

    /// ``DownloadRequest/Options/validate()``, once it has passed remembered.
    func validate() throws(DownloadError) {
        guard !valid.load(ordering: .relaxed) else { return }
        try value.validate()
        valid.store(true, ordering: .relaxed)
    }

    static func == (lhs: OptionsBox, rhs: OptionsBox) -> Bool { lhs === rhs || lhs.value == rhs.value }
    func hash(into hasher: inout Hasher) { hasher.combine(value) }
}
