import AsyncHTTPClient
import NIOCore

extension DownloadRunner {
    /// Hands the body to `sink` as it arrives, with no part file and no record: what
    /// `haul get -o -` does. A failure before the first byte is retried as usual; once bytes
    /// have gone out they cannot be taken back, so a later failure ends it (no resume).
    /// The checksum, if asked for, is checked at the end.
    ///
    /// - Returns: the bytes sent to `sink`.
    func stream(into sink: @Sendable (ByteBuffer) throws -> Void) async throws(DownloadError) -> Int64 {
        if !validated { try request.validate() }
        var retry = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        let answer = try await retrying(&retry) { () async throws(DownloadError) -> HTTPAnswer in
            let answer = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
            guard (200...299).contains(answer.head.status) else { throw answer.head.error }
            return answer
        }
        var digest = request.checksum.map { StreamingDigest($0.algorithm) }
        var sent: Int64 = 0
        let throttled = isThrottled
        do {
            for try await buffer in answer.body {
                if throttled { try await throttle(buffer.readableBytes) }
                try sink(buffer)
                digest?.update(buffer)
                sent += Int64(buffer.readableBytes)
            }
        } catch let error as DownloadError {
            throw error.with(url: request.url)
        } catch {
            throw HTTPTransport.map(error, stallTimeout: stallTimeout).with(url: request.url)
        }
        if let expected = answer.head.contentLength, sent != expected {
            throw DownloadError.sizeMismatch(expected: expected, actual: sent).with(url: request.url)
        }
        if let checksum = request.checksum, let actual = digest?.finalizeHex(), actual != checksum.hex {
            throw DownloadError.checksumMismatch(algorithm: checksum.algorithm.rawValue, expected: checksum.hex, actual: actual)
                .with(url: request.url)
        }
        return sent
    }
}
