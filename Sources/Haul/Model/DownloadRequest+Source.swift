extension DownloadRequest {
    /// One place the file can be fetched from: a URI, how much it is preferred, and where it is.
    ///
    /// Every source of a request must serve the same bytes; the engine spreads the file's
    /// segments over them and drops one that fails or disagrees on the length.
    public struct Source: Sendable, Hashable, Codable {
        /// The `http` or `https` URL.
        public var uri: String
        /// Lower is preferred (Metalink's 1…999999); nil when the source carries none, which
        /// leaves its place in the list as its preference.
        public var priority: Int?
        /// Where the source is (an ISO 3166-1 country code, as Metalink gives it), when known.
        public var location: String?

        /// A source at `uri`.
        public init(uri: String, priority: Int? = nil, location: String? = nil) {
            self.uri = uri
            self.priority = priority
            self.location = location
        }

        /// The URI as it may be shown: without the credentials it may carry.
        public var displayURI: String { URLRedaction.redact(uri) }
    }

    /// The most sources one request may have: aria2's `--split` bound, and more than a mirror
    /// list ever needs.
    public static let maxSources = 64

    /// A request for the same file from every source of `sources`, in order of preference,
    /// saved into `directory`.
    ///
    /// ```swift
    /// let request = DownloadRequest(
    ///     sources: [.init(uri: "https://a.example/f.iso"), .init(uri: "https://b.example/f.iso")],
    ///     directory: "/tmp")
    /// ```
    public init(sources: [Source], directory: String) {
        self.init(url: sources.first?.uri ?? "", directory: directory)
        self.sources = sources
    }

    /// A request for the same file from every source of `sources`, saved at `path`.
    public init(sources: [Source], file path: String) {
        self.init(url: sources.first?.uri ?? "", file: path)
        self.sources = sources
    }

    /// Checks every source: an `http`/`https` URL with a host, no URI twice, not too many.
    func validateSources() throws(DownloadError) {
        guard !sources.isEmpty else { throw .invalidRequest("a download needs at least one URL") }
        guard sources.count <= Self.maxSources else {
            throw .invalidRequest("\(sources.count) sources for one file; at most \(Self.maxSources)")
        }
        var seen = Set<String>()
        for source in sources {
            guard let parsed = HTTPURL(source.uri), parsed.scheme == "http" || parsed.scheme == "https" else {
                throw .invalidRequest(
                    "not a URL Haul can download: \(source.displayURI.debugDescription) (it takes http:// and https:// URLs with a host)")
            }
            guard seen.insert(source.uri).inserted else {
                throw .invalidRequest("\(source.displayURI) is given twice as a source of one file")
            }
            if let priority = source.priority, priority < 0 {
                throw .invalidRequest("the priority of \(source.displayURI) must not be negative")
            }
        }
    }
}
