import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One upload: the file's first look, the choice of protocol, and the bytes until the server
/// confirms the last one.
///
/// The crash contract: a tus upload's URL is in the store, with the file as it was when the
/// upload began (``UploadFile/Identity``), before its first byte is sent. A rerun after any
/// interruption (`kill -9` included) finds it, asks the server for its offset (`HEAD`) and
/// sends the rest, unless the file changed since (then a new upload begins, and
/// ``UploadResult/restartReason`` says why) or the server lost the upload. A plain `PUT` has
/// no offset to ask for: it starts over, as `curl -T` does.
struct UploadRunner: Sendable {
    /// The request, its file path absolute.
    let request: UploadRequest
    let store: Store
    let transport: HTTPTransport
    let limiters: [RateLimiter]
    let stallTimeout: Duration
    let clock: any Clock<Duration>
    let random: @Sendable () -> Double
    let report: @Sendable (UploadProgress) -> Void

    func run() async throws(DownloadError) -> UploadResult {
        if request.protocol == .ietf {
            throw .invalidRequest("the IETF resumable-upload draft is not spoken yet: use --protocol tus or put (or auto)")
        }
        let file = try UploadFile(path: request.file)
        let meter = UploadMeter(total: file.length, report: report)
        let identity = try await file.identity()
        var retries = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        var restartReason: String?
        if request.protocol != .put, let row = try await store.upload(file: request.file, url: request.url), row.protocol == .tus,
            let location = row.location
        {
            if let change = row.identity.change(to: identity) {
                restartReason = "\(request.file) changed since its upload began (\(change)): starting a new upload"
            } else {
                let known = try await retrying(&retries, meter) { () throws(DownloadError) in try await tusOffset(location, length: file.length) }
                switch known {
                case .offset(let offset):
                    meter.chose(.tus)
                    let sent = try await tusSend(file, row: row, from: offset, meter: meter, retries: &retries)
                    return UploadResult(
                        file: request.file, location: URLRedaction.redact(location), protocol: .tus, bytes: file.length, bytesSent: sent)
                case .gone(let why):
                    restartReason = why
                }
            }
        }
        if let restartReason { meter.restarting(restartReason) }
        let chosen: UploadProtocol
        var server: TusCapabilities?
        switch request.protocol {
        case .put:
            chosen = .put
        case .tus:
            server = try await retrying(&retries, meter) { () throws(DownloadError) in try await askTus() } ?? TusCapabilities()
            chosen = .tus
        default:
            server = try await retrying(&retries, meter) { () throws(DownloadError) in try await askTus() }
            chosen = server == nil ? .put : .tus
        }
        meter.chose(chosen)
        if chosen == .put {
            let sent = try await put(file, meter: meter, retries: &retries)
            return UploadResult(
                file: request.file, location: request.displayURL, protocol: .put, bytes: file.length, bytesSent: sent,
                restartReason: restartReason)
        }
        let location = try await retrying(&retries, meter) { () throws(DownloadError) in
            try await tusCreate(file, server: server ?? TusCapabilities())
        }
        let now = Date()
        let row = UploadRow(
            file: request.file, url: request.url, protocol: .tus, location: location, identity: identity,
            createdAt: now, updatedAt: now)
        // On disk before the first byte goes: a rerun after a kill finds this upload.
        try await store.saveUpload(row)
        let sent = try await tusSend(file, row: row, from: 0, meter: meter, retries: &retries)
        return UploadResult(
            file: request.file, location: URLRedaction.redact(location), protocol: .tus, bytes: file.length, bytesSent: sent,
            restartReason: restartReason)
    }

    // MARK: Plain PUT

    /// One `PUT` of the whole file, again from its start after a failure that may pass.
    private func put(_ file: UploadFile, meter: UploadMeter, retries: inout RetryPolicy) async throws(DownloadError) -> Int64 {
        try await retrying(&retries, meter) { () throws(DownloadError) in
            let answer = try await transport.send(
                .PUT, url: request.url, headers: headers(["Content-Type": "application/octet-stream"]),
                body: body(file, from: 0, count: file.length, meter: meter), stallTimeout: stallTimeout)
            await Self.drain(answer.body)
            guard (200..<300).contains(answer.head.status) else { throw failure(answer) }
        }
        meter.sent(file.length)
        return file.length
    }

    // MARK: Shared

    /// `extra` after the request's own headers (which they replace when named alike).
    func headers(_ extra: [String: String]) -> [(String, String)] {
        let own = request.headers.filter { header in !extra.keys.contains { $0.caseInsensitiveCompare(header.name) == .orderedSame } }
        return own.map { ($0.name, $0.value) } + extra.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// `count` bytes of `file` from `start`, read a chunk at a time as the connection takes
    /// them, through the rate limits, each chunk counted as sent.
    ///
    /// Under a rate limit a chunk is about a tenth of a second's worth (16 KiB to 1 MiB), as a
    /// download's reads are: the limit paces smoothly, and a chunk waited for never outlasts
    /// the stall timeout, which a server not taking bytes runs into.
    func body(_ file: UploadFile, from start: Int64, count: Int64, meter: UploadMeter) -> RequestBody {
        let limiters = self.limiters
        let paced = limiters.map(\.bytesPerSecond).filter { $0 > 0 }.min().map { min(max($0 / 10, 16 << 10), 1 << 20) }
        let most = paced ?? Int64(RequestBody.chunkSize)
        return RequestBody(length: count) { offset, spare in
            // A cancelled upload stops at the next chunk, not at the end of the request.
            if Task.isCancelled { throw DownloadError.cancelled }
            let wanted = Int(min(most, count - offset))
            for limiter in limiters { try await limiter.acquire(wanted) }
            let chunk = try await file.chunk(at: start + offset, count: wanted, reusing: consume spare)
            meter.sent(start + offset + Int64(chunk.readableBytes))
            return chunk
        }
    }

    /// Runs `work` until it succeeds, a failure is final, or the tries run out; the waits
    /// between are the request's backoff, shown as a note.
    func retrying<T>(
        _ retries: inout RetryPolicy, _ meter: UploadMeter, madeProgress: Bool = false,
        _ work: () async throws(DownloadError) -> T
    ) async throws(DownloadError) -> T {
        // Bounded: every failure counts against the request's tries.
        while true {
            do {
                return try await work()
            } catch {
                guard !Task.isCancelled, let wait = retries.delay(after: error, madeProgress: madeProgress, jitter: random()) else {
                    throw Task.isCancelled ? .cancelled : error
                }
                meter.note("retrying in \(wait.formattedSeconds): \(error.message)")
                do { try await clock.sleep(for: wait) } catch { throw .cancelled }
            }
        }
    }

    /// The server's error answer as one line with the URL.
    func failure(_ answer: HTTPAnswer) -> DownloadError {
        DownloadError.httpStatus(answer.head.status, reason: answer.head.reason, retryAfter: answer.head.retryAfter).with(url: request.url)
    }

    /// Reads and drops a small answer body (so its connection can serve the next request).
    static func drain(_ body: HTTPClientResponse.Body) async {
        var left = 64 << 10
        do {
            for try await buffer in body {
                left -= buffer.readableBytes
                if left < 0 { return }
            }
        } catch {}
    }
}
