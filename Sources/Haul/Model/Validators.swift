/// The validators a server gave for a representation (RFC 9110 §8.8).
public struct Validators: Sendable, Hashable, Codable {
    /// The `ETag`, verbatim (quotes and any `W/` included).
    public var etag: String?
    /// The `Last-Modified` date, verbatim.
    public var lastModified: String?

    /// Creates validators from raw header values.
    public init(etag: String? = nil, lastModified: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The `If-Range` value: a strong ETag, else the Last-Modified date.
    /// RFC 9110 §13.1.5 forbids weak ETags in If-Range.
    var ifRange: String? {
        if let etag, !etag.hasPrefix("W/") { return etag }
        return lastModified
    }

    /// Whether `other` (from a later answer) contradicts these: a validator both sides have differs.
    func contradicts(_ other: Validators) -> Bool {
        if let a = etag, let b = other.etag, a != b { return true }
        if let a = lastModified, let b = other.lastModified, a != b { return true }
        return false
    }

    var isEmpty: Bool { etag == nil && lastModified == nil }
}
