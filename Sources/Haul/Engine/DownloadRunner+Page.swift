import NIOCore

/// A small page read whole into memory: a folder's listing.
package struct FetchedPage: Sendable {
    /// The URL after redirects.
    package var url: String
    /// The `Content-Type` it came with.
    package var contentType: String?
    package var body: [UInt8]
}

extension DownloadRunner {
    /// GETs the request's URL with its headers, retrying like a download, and returns the whole
    /// body; nothing is written to disk.
    ///
    /// - Throws: ``DownloadError``; of kind ``DownloadError/Kind/invalidRequest`` when the body
    ///   is longer than `maxBytes` (not retried: it would be as long again).
    func page(maxBytes: Int, what: String = "a listing") async throws(DownloadError) -> FetchedPage {
        if !validated { try request.validate() }
        var retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        let tooLong = DownloadError.invalidRequest("\(request.displayURL) is longer than \(maxBytes >> 20) MiB: not read as \(what)")
        return try await retrying(&retry) { () async throws(DownloadError) -> FetchedPage in
            let answer = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
            guard (200...299).contains(answer.head.status) else { throw answer.head.error.with(url: request.url) }
            if let length = answer.head.contentLength, length > maxBytes { throw tooLong }
            var body: [UInt8] = []
            do {
                for try await buffer in answer.body {
                    guard body.count + buffer.readableBytes <= maxBytes else { throw tooLong }
                    body += buffer.readableBytesView
                }
            } catch let error as DownloadError {
                throw error.with(url: request.url)
            } catch {
                throw HTTPTransport.map(error, stallTimeout: stallTimeout).with(url: request.url)
            }
            if let expected = answer.head.contentLength, Int64(body.count) != expected {
                throw DownloadError.sizeMismatch(expected: expected, actual: Int64(body.count)).with(url: request.url)
            }
            return FetchedPage(url: answer.url, contentType: answer.head.contentType, body: body)
        }
    }
}

extension Downloader {
    /// Reads a small page (a folder's listing, `what` errors call it) into memory, with the
    /// request's network options, credentials and retries; its destination is not used.
    ///
    /// - Throws: ``DownloadError``, of kind ``DownloadError/Kind/invalidRequest`` for a body
    ///   longer than `maxBytes`.
    package func page(_ request: DownloadRequest, maxBytes: Int, what: String = "a listing") async throws(DownloadError) -> FetchedPage {
        try await runner(request, id: .next(), events: .init()).page(maxBytes: maxBytes, what: what)
    }
}
