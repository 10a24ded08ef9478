import Foundation

/// Metalink/HTTP (RFC 6249): a server names a file's mirrors and its Metalink document in
/// `Link` headers and its digest in a `Digest` header (RFC 3230).
extension Metalink {
    /// The mirrors a response names: its `Link` headers with `rel=duplicate`, the most preferred
    /// (lowest `pri`) first, each with its `geo` as the location.
    ///
    /// ```swift
    /// let mirrors = Metalink.duplicates(inLinkHeaders: ["<http://m1/f>; rel=duplicate; pri=1; geo=de"])
    /// // [Source(uri: "http://m1/f", priority: 1, location: "de")]
    /// ```
    ///
    /// - Parameters:
    ///   - values: the value of each `Link` header (a header may hold several links, separated
    ///     by commas).
    ///   - base: the URL of the response, against which relative links are resolved; without
    ///     it, relative links are left out.
    /// - Returns: `http`/`https` URLs only, each once, at most ``DownloadRequest/maxSources``.
    public static func duplicates(inLinkHeaders values: [String], base: String? = nil) -> [DownloadRequest.Source] {
        MetalinkHTTP.duplicates(inLinkHeaders: values, base: base)
    }

    /// The URL of the Metalink document a response points to: its first `Link` header with
    /// `rel=describedby` and the type `application/metalink4+xml` (or Metalink 3's
    /// `application/metalink+xml`); nil when there is none.
    ///
    /// - Parameters:
    ///   - values: the value of each `Link` header.
    ///   - base: the URL of the response, against which a relative link is resolved.
    public static func documentURL(inLinkHeaders values: [String], base: String? = nil) -> String? {
        MetalinkHTTP.documentURL(inLinkHeaders: values, base: base)
    }

    /// The strongest digest the `Digest` headers give (RFC 3230: `SHA-256=<base64>`, also
    /// `SHA-512`, `SHA` for SHA-1 and `MD5`), as a ``Checksum`` in hex; nil when they give none
    /// Haul checks. A value that is not base64 of the algorithm's length is left out.
    ///
    /// ```swift
    /// Metalink.checksum(inDigestHeaders: ["SHA-256=n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg="])
    /// // sha-256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    /// ```
    public static func checksum(inDigestHeaders values: [String]) -> Checksum? {
        MetalinkHTTP.checksum(inDigestHeaders: values)
    }
}
