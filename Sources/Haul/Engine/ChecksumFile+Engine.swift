import Foundation

extension ChecksumFile {
    /// The name a download of `url` into a folder is saved under, before the server suggests
    /// another: its path's last segment, percent-decoded and made safe. What a list names it by.
    public static func fileName(ofURL url: String) -> String? {
        DestinationResolver.name(of: url)
    }

    /// Whether ``load(_:template:downloader:)`` fetches `location` (an `http(s)` URL) rather
    /// than reading it as a path.
    package static func isURL(_ location: String) -> Bool {
        let lowered = location.lowercased()
        return lowered.hasPrefix("http://") || lowered.hasPrefix("https://")
    }

    /// Reads the list at `location`: an `http://` or `https://` URL, fetched into memory with
    /// `template`'s network options, or a local path.
    ///
    /// - Throws: ``DownloadError`` when it cannot be fetched or read.
    package static func load(_ location: String, template: DownloadRequest, downloader: Downloader) async throws(DownloadError) -> ChecksumFile {
        guard isURL(location) else { return try ChecksumFile(contentsOfFile: location) }
        var request = template
        request.url = location
        let page = try await downloader.page(request, maxBytes: maxBytes, what: "a checksum file")
        return try ChecksumFile(parsing: page.body, source: URLRedaction.redact(location))
    }
}
