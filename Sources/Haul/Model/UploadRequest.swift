import Foundation

/// What to upload, where, and how: a local file sent to an `http(s)` URL, resumable when the
/// server speaks tus or the IETF draft "Resumable Uploads for HTTP", and the same network
/// options as a download.
///
/// ```swift
/// var request = UploadRequest(file: "video.mp4", url: "https://uploads.example/files")
/// request.protocol = .tus
/// request.rateLimit = 2 << 20
/// request.network.tls.caCertificate = "/etc/company/ca.pem"
/// ```
public struct UploadRequest: Sendable, Hashable, Codable {
    /// The local file to send.
    public var file: String
    /// A tus creation endpoint, the IETF draft's upload target (the resource that takes the
    /// file, created there by a `POST`), or the URL a plain `PUT` stores the file at: a URL
    /// whose path ends with `/` names a folder, and the file is stored there under its own
    /// name (``putTarget``), as `curl -T` does.
    public var url: String
    /// Which protocol carries the bytes; ``UploadProtocol/auto`` asks the server.
    public var `protocol`: UploadProtocol = .auto
    /// The interop version of the IETF draft to speak (3, 5 or 6, see
    /// ``ietfInteropVersions``); nil lets Haul choose: 6, or the one the server names when it
    /// answers 6 with `400 Bad Request`. A version given here is kept to: a server that does not
    /// speak it fails the upload. An upload an earlier run began goes on in the version it began
    /// with. Only the IETF draft reads it.
    public var ietfInteropVersion: Int?
    /// Extra request headers, sent on every request of the upload.
    public var headers: [DownloadRequest.Header] = []
    /// This upload's own rate limit, in bytes per second (a ``Downloader``'s shared limit
    /// applies too).
    public var rateLimit: Int64?
    /// Failed tries in a row before giving up; a try that moved the server's offset resets it.
    public var maxTries = 5
    /// The wait before the first retry; it doubles each time.
    public var retryWait: Duration = .seconds(1)
    /// Proxies, TLS trust, credentials, cookies and identity, as for downloads.
    public var network = NetworkOptions()

    /// The interop versions of the IETF draft Haul speaks, as Apple's NIOResumableUpload serves
    /// them: 3 (completeness said by `Upload-Incomplete`), 5 (by `Upload-Complete`) and 6 (as
    /// 5, each `PATCH` typed `application/partial-upload`).
    public static let ietfInteropVersions = [3, 5, 6]

    /// A request to send `file` to `url`, the protocol chosen by asking the server.
    public init(file: String, url: String) {
        self.file = file
        self.url = url
    }

    /// Checks what can be checked before reading the file or connecting: an `http(s)` URL with
    /// a host, one-line headers, sane numbers, an interop version Haul speaks, the network
    /// options.
    ///
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/invalidRequest`` naming what is wrong.
    public func validate() throws(DownloadError) {
        guard !file.isEmpty else { throw .invalidRequest("an upload needs a file") }
        guard let parsed = HTTPURL(url), parsed.scheme == "http" || parsed.scheme == "https" else {
            throw .invalidRequest("not a URL Haul can upload to: it takes http:// and https:// URLs with a host")
        }
        for header in headers { try header.validate() }
        guard maxTries >= 1 else { throw .invalidRequest("tries must be at least 1, not \(maxTries)") }
        guard retryWait >= .zero else { throw .invalidRequest("the retry wait must not be negative") }
        if let rateLimit, rateLimit < 0 { throw .invalidRequest("the rate limit must not be negative") }
        if let version = ietfInteropVersion, !Self.ietfInteropVersions.contains(version) {
            throw .invalidRequest("the IETF draft's interop version must be 3, 5 or 6, not \(version)")
        }
        try network.validate()
    }

    /// The URL without the credentials it may carry, for messages.
    public var displayURL: String { URLRedaction.redact(url) }

    /// Where a plain `PUT` stores the file: ``url``, or when its path ends with `/` or is empty
    /// (a folder), ``url`` with the file's name appended, percent-encoded (its query, if any,
    /// kept after it). tus and the IETF draft take ``url`` as it is: an endpoint that makes a
    /// new upload for every file.
    public var putTarget: String {
        guard let parsed = HTTPURL(url), parsed.path.isEmpty || parsed.path.hasSuffix("/") else { return url }
        let name = PercentEncoding.encode(Array((file as NSString).lastPathComponent.utf8))
        // The path ends where the query or the fragment begins.
        let end = url.firstIndex { $0 == "?" || $0 == "#" } ?? url.endIndex
        return url[..<end] + (parsed.path.isEmpty ? "/" : "") + name + url[end...]
    }

    /// The request without the secrets ``DownloadRequest/withoutSecrets`` drops (passwords,
    /// `Authorization`, `Proxy-Authorization` and `Cookie` headers); itself when it carries
    /// none. A finished upload keeps only this.
    public var withoutSecrets: UploadRequest {
        var download = DownloadRequest(url: url, file: file)
        download.headers = headers
        download.network = network
        guard let plain = download.withoutSecrets else { return self }
        var request = self
        request.headers = plain.headers
        request.network = plain.network
        return request
    }
}

/// How an upload's bytes reach the server.
///
/// ``auto`` asks the server (one `OPTIONS` with `Tus-Resumable` and
/// `Upload-Draft-Interop-Version`): a tus server gets tus, a server of the IETF draft (its
/// `Upload-Limit` in the answer) the draft, any other a plain `PUT`.
public enum UploadProtocol: String, Sendable, Hashable, Codable, CaseIterable {
    /// Ask the server: tus if it speaks it, else the IETF draft if it speaks that, else a
    /// plain `PUT`.
    case auto
    /// The IETF draft "Resumable Uploads for HTTP" (interop versions 3, 5 and 6, as Apple's
    /// NIOResumableUpload speaks them; ``UploadRequest/ietfInteropVersion``): the upload created
    /// by a `POST` to the URL, its bytes appended by `PATCH` from the offset the server holds
    /// (`HEAD`), resumable after any interruption.
    case ietf
    /// tus 1.0.0 with its creation extension: resumable after any interruption.
    case tus
    /// One `PUT` of the whole file, started over after an interruption (as `curl -T`).
    case put
}
