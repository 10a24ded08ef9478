import Foundation
import NIOHTTP1

/// The parts of a response head the engine decides on.
struct ResponseHead: Sendable {
    var status: Int
    var reason: String
    var contentLength: Int64?
    var contentRange: ContentRange?
    /// `N` from `Content-Range: bytes */N` on a 416.
    var unsatisfiedLength: Int64?
    var validators: Validators
    var acceptsRanges: Bool
    var retryAfter: Duration?
    var contentDisposition: String?
    /// The media type as sent (`text/html; charset=utf-8`).
    var contentType: String?
    var isChunked: Bool
    /// Every `Link` header's value (RFC 8288; a server names a file's mirrors in them, RFC 6249).
    var links: [String] = []
    /// Every `Digest` header's value (RFC 3230).
    var digests: [String] = []

    init(status: Int, reason: String = "", headers: HTTPHeaders, now: Date = Date()) {
        self.status = status
        self.reason = reason
        // One pass over the headers (each name looked at once, nothing allocated for the ones
        // not wanted); for a single-valued header the first one counts.
        var chunked = false
        var ranges = false
        var length: String?, range: String?, etag: String?, lastModified: String?, retry: String?, disposition: String?
        var type: String?
        for (name, value) in headers {
            switch name.utf8.count {
            case 4 where Self.named(name, "etag"): etag = etag ?? value
            case 4 where Self.named(name, "link"): links.append(value)
            case 6 where Self.named(name, "digest"): digests.append(value)
            case 11 where Self.named(name, "retry-after"): retry = retry ?? value
            case 12 where Self.named(name, "content-type"): type = type ?? value
            case 13 where Self.named(name, "accept-ranges"): ranges = ranges || Self.lists(value, "bytes")
            case 13 where Self.named(name, "content-range"): range = range ?? value
            case 13 where Self.named(name, "last-modified"): lastModified = lastModified ?? value
            case 14 where Self.named(name, "content-length"): length = length ?? value
            case 17 where Self.named(name, "transfer-encoding"): chunked = chunked || Self.lists(value, "chunked")
            case 19 where Self.named(name, "content-disposition"): disposition = disposition ?? value
            default: break
            }
        }
        isChunked = chunked
        contentType = type
        contentLength = chunked ? nil : length.flatMap { Int64($0) ?? Int64($0.trimmingCharacters(in: .whitespaces)) }
        contentRange = range.flatMap(ContentRange.parse)
        unsatisfiedLength = range.flatMap(ContentRange.parseUnsatisfied)
        validators = Validators(etag: etag, lastModified: lastModified)
        acceptsRanges = ranges
        retryAfter = retry.flatMap { RetryAfter.delay(from: $0, now: now) }
        contentDisposition = disposition
    }

    /// Whether header name `name` is `lowercase` (which is in lower case), ignoring ASCII case.
    private static func named(_ name: String, _ lowercase: StaticString) -> Bool {
        let wanted = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        return name.utf8.elementsEqual(wanted) { byte, low in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == low : byte == low
        }
    }

    /// Whether the comma-separated list `value` has the token `lowercase` (in lower case),
    /// ignoring ASCII case and the spaces and tabs around each item. A scan of the bytes: every
    /// response of a long list has an `Accept-Ranges`.
    static func lists(_ value: String, _ lowercase: StaticString) -> Bool {
        let wanted = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var value = value
        return value.withUTF8 { bytes in
            var start = 0
            while start <= bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
                var (first, last) = (start, end)
                while first < last, isBlank(bytes[first]) { first += 1 }
                while last > first, isBlank(bytes[last - 1]) { last -= 1 }
                if last - first == wanted.count,
                    zip(bytes[first..<last], wanted).allSatisfy({ byte, low in
                        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 == low : byte == low
                    })
                {
                    return true
                }
                start = end + 1
            }
            return false
        }
    }

    var error: DownloadError {
        .httpStatus(status, reason: reason, retryAfter: retryAfter)
    }
}
