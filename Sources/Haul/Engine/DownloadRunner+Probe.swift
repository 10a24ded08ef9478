import NIOHTTP1

/// What the server says about a URL before any byte is written.
struct ProbeResult: Sendable {
    var url: String
    var totalLength: Int64?
    var validators: Validators
    var acceptsRanges: Bool
    var suggestedName: String?
}

extension DownloadRunner {
    /// HEAD, falling back to a one-byte ranged GET when HEAD is refused or says nothing useful.
    func probe() async throws(DownloadError) -> ProbeResult {
        let head = try await transport.send(.HEAD, url: request.url, headers: request.headers.map { ($0.name, $0.value) }, stallTimeout: stallTimeout)
        if (200...299).contains(head.head.status), head.head.contentLength != nil || head.head.isChunked {
            return ProbeResult(head.head, url: head.url)
        }
        // A busy server (503, 429…) is asked again later, HEAD and all. But some servers
        // refuse HEAD (405, 501), forbid it, or answer it without a length: a ranged GET
        // for one byte costs one round trip and tells the truth.
        if head.head.error.isRetryable, head.head.status != 501 { throw head.head.error }
        var headers = request.headers.map { ($0.name, $0.value) }
        headers.append(("Range", RangeHeader.value(from: 0, to: 0)))
        let get = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
        // The body is dropped unread, which cancels the request.
        let answer = get.head
        switch answer.status {
        case 206:
            var result = ProbeResult(answer, url: get.url)
            result.totalLength = answer.contentRange?.total
            result.acceptsRanges = true
            return result
        case 200...299:
            return ProbeResult(answer, url: get.url)
        case 416 where answer.unsatisfiedLength == 0:
            // Even byte 0 is out of range: the file is empty.
            var result = ProbeResult(answer, url: get.url)
            result.totalLength = 0
            return result
        default:
            throw answer.error
        }
    }
}

extension ProbeResult {
    init(_ head: ResponseHead, url: String) {
        self.url = url
        totalLength = head.contentLength
        validators = head.validators
        acceptsRanges = head.acceptsRanges
        suggestedName = head.contentDisposition.flatMap(ContentDisposition.filename(from:))
    }
}
