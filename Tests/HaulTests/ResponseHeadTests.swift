import Foundation
import NIOHTTP1
import Testing
@testable import Haul

/// What the engine reads from a response head, whatever the case of the names.
struct ResponseHeadTests {
    @Test func readsTheHeadersItNeedsInAnyCase() {
        let head = ResponseHead(
            status: 206,
            headers: HTTPHeaders([
                ("CONTENT-LENGTH", " 10 "), ("content-length", "99"), ("Content-Range", "bytes 0-9/100"),
                ("ETag", "\"v1\""), ("etag", "\"v2\""), ("Last-Modified", "Wed, 21 Oct 2015 07:28:00 GMT"),
                ("Accept-Ranges", "none, Bytes"), ("Content-Disposition", "attachment; filename=a.bin"),
                ("Retry-After", "7"), ("X-Content-Length", "5"),
            ]))
        #expect(head.contentLength == 10)
        #expect(head.contentRange?.total == 100)
        #expect(head.validators == Validators(etag: "\"v1\"", lastModified: "Wed, 21 Oct 2015 07:28:00 GMT"))
        #expect(head.acceptsRanges)
        #expect(head.contentDisposition == "attachment; filename=a.bin")
        #expect(head.retryAfter == .seconds(7))
        #expect(!head.isChunked)
    }

    @Test func aChunkedBodyHasNoLength() {
        let head = ResponseHead(status: 200, headers: HTTPHeaders([("Transfer-Encoding", "gzip, Chunked"), ("Content-Length", "5")]))
        #expect(head.isChunked)
        #expect(head.contentLength == nil)
        #expect(!head.acceptsRanges)
        #expect(head.validators.isEmpty)
    }

    @Test func nothingIsReadFromLookalikeNames() {
        let head = ResponseHead(status: 416, headers: HTTPHeaders([("Content-Rangf", "bytes */5"), ("Accept-Rangez", "bytes"), ("E-Tag", "x")]))
        #expect(head.unsatisfiedLength == nil)
        #expect(!head.acceptsRanges)
        #expect(head.validators.isEmpty)
        let unsatisfied = ResponseHead(status: 416, headers: HTTPHeaders([("content-range", "bytes */5")]))
        #expect(unsatisfied.unsatisfiedLength == 5)
    }

    /// A token in a comma-separated header value (`Accept-Ranges`, `Transfer-Encoding`): whole
    /// items only, any ASCII case, spaces and tabs around an item ignored.
    @Test(arguments: [
        ("bytes", true), ("Bytes", true), (" none , BYTES ", true), ("\tbytes\t", true), ("bytes,", true), (",bytes", true),
        ("none, bytes, other", true), ("none", false), ("", false), (",", false), ("bytesx", false), ("xbytes", false),
        ("by tes", false), ("bytes;q=1", false), ("bytés", false),
    ])
    func findsATokenInAList(value: String, found: Bool) {
        #expect(ResponseHead.lists(value, "bytes") == found)
    }
}
