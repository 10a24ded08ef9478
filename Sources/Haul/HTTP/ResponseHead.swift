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
    var isChunked: Bool

    init(status: Int, reason: String = "", headers: HTTPHeaders, now: Date = Date()) {
        self.status = status
        self.reason = reason
        isChunked = headers[canonicalForm: "transfer-encoding"].contains { $0.lowercased() == "chunked" }
        contentLength = isChunked ? nil : headers.first(name: "content-length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        let rangeHeader = headers.first(name: "content-range")
        contentRange = rangeHeader.flatMap(ContentRange.parse)
        unsatisfiedLength = rangeHeader.flatMap(ContentRange.parseUnsatisfied)
        validators = Validators(etag: headers.first(name: "etag"), lastModified: headers.first(name: "last-modified"))
        acceptsRanges = headers[canonicalForm: "accept-ranges"].contains { $0.lowercased() == "bytes" }
        retryAfter = headers.first(name: "retry-after").flatMap { RetryAfter.delay(from: $0, now: now) }
        contentDisposition = headers.first(name: "content-disposition")
    }

    var error: DownloadError {
        .httpStatus(status, reason: reason, retryAfter: retryAfter)
    }
}
