import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// One upload: the file's first look, the choice of protocol, and the bytes until the server
/// confirms the last one.
///
/// The crash contract: a resumable upload's URL (tus, the IETF draft) is in the store, with
/// the file as it was when the upload began (``UploadFile/Identity``), before its first byte is
/// sent. A rerun after any interruption (`kill -9` included) finds it, asks the server for its
/// offset (`HEAD`) and sends the rest, unless the file changed since (then a new upload begins,
/// and ``UploadResult/restartReason`` says why) or the server lost the upload. A plain `PUT`
/// has no offset to ask for: it starts over, as `curl -T` does.
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
        let file = try UploadFile(path: request.file)
        let meter = UploadMeter(total: file.length, report: report)
        // Read only for a resumable upload (a plain PUT keeps no record): a sample of 4 MiB.
        var known: UploadFile.Identity?
        func identity() async throws(DownloadError) -> UploadFile.Identity {
            if let known { return known }
            let read = try await file.identity()
            known = read
            return read
        }
        var retries = RetryPolicy(maxTries: request.maxTries, baseWait: request.retryWait)
        var restartReason: String?
        // An upload an earlier run began by the protocol asked for (any, under auto).
        if request.protocol != .put, let row = try await store.upload(file: request.file, url: request.url),
            row.protocol == .tus || row.protocol == .ietf, request.protocol == .auto || request.protocol == row.protocol,
            let location = row.location
        {
            if let change = row.identity.change(to: try await identity()) {
                restartReason = "\(request.file) changed since its upload began (\(change)): starting a new upload"
            } else {
                let ietf = row.protocol == .ietf
                let known = try await retrying(&retries, meter) { () throws(DownloadError) -> ResumableUploadState in
                    if ietf { return try await ietfOffset(location, length: file.length, version: row.ietfVersion) }
                    return try await tusOffset(location, length: file.length)
                }
                switch known {
                case .complete:
                    // Whole on the server already: the last run was stopped before its answer.
                    meter.chose(row.protocol)
                    meter.sent(file.length)
                    try await store.deleteUpload(file: request.file, url: request.url)
                    return UploadResult(
                        file: request.file, location: URLRedaction.redact(location), protocol: row.protocol, bytes: file.length,
                        bytesSent: 0)
                case .offset(let offset):
                    meter.chose(row.protocol)
                    let sent = try await send(file, row: row, from: offset, meter: meter, retries: &retries)
                    return UploadResult(
                        file: request.file, location: URLRedaction.redact(location), protocol: row.protocol, bytes: file.length,
                        bytesSent: sent)
                case .gone(let why):
                    restartReason = why
                }
            }
        }
        if let restartReason { meter.restarting(restartReason) }
        let chosen: UploadProtocol
        var server: TusCapabilities?
        // The IETF draft's interop version: the request's, else the one the server names to
        // OPTIONS, else the latest (which the creation may change).
        var ietfVersion = request.ietfInteropVersion ?? Self.ietfInteropVersion
        // What the server's Upload-Limit says, when it said it (to OPTIONS, or to the creation).
        var ietfLimits: IETFLimits?
        switch request.protocol {
        case .put:
            chosen = .put
        case .tus:
            server = try await retrying(&retries, meter) { () throws(DownloadError) in try await askTus() } ?? TusCapabilities()
            chosen = .tus
        case .ietf:
            chosen = .ietf
        case .auto:
            switch try await retrying(&retries, meter, { () throws(DownloadError) in try await askServer() }) {
            case .tus(let capabilities):
                server = capabilities
                chosen = .tus
            case .ietf(let named, let limits):
                chosen = .ietf
                if request.ietfInteropVersion == nil, let named { ietfVersion = named }
                // A file the server would refuse is refused before any upload is made.
                try limits?.check(file.length, file: request.file)
                ietfLimits = limits
            case .plain:
                chosen = .put
            }
        }
        meter.chose(chosen)
        if chosen == .put {
            let sent = try await put(file, meter: meter, retries: &retries)
            return UploadResult(
                file: request.file, location: URLRedaction.redact(request.putTarget), protocol: .put, bytes: file.length,
                bytesSent: sent, restartReason: restartReason)
        }
        let ietf = chosen == .ietf
        let asked = ietfVersion
        let created = try await retrying(&retries, meter) {
            () throws(DownloadError) -> (location: String?, version: Int, limits: IETFLimits?) in
            if ietf { return try await ietfCreate(file, version: asked) }
            return (try await tusCreate(file, server: server ?? TusCapabilities()), asked, nil)
        }
        if let limits = created.limits { ietfLimits = limits }
        guard let location = created.location else {
            // An empty file, sent whole by the IETF draft's creation.
            try await store.deleteUpload(file: request.file, url: request.url)
            meter.sent(0)
            return UploadResult(
                file: request.file, location: request.displayURL, protocol: chosen, bytes: 0, bytesSent: 0, restartReason: restartReason)
        }
        let now = Date()
        let row = UploadRow(
            file: request.file, url: request.url, protocol: chosen, location: location, ietfInteropVersion: ietf ? created.version : nil,
            identity: try await identity(), createdAt: now, updatedAt: now)
        // On disk before the first byte goes: a rerun after a kill finds this upload.
        try await store.saveUpload(row)
        let sent = try await send(file, row: row, from: 0, meter: meter, retries: &retries, limits: ietfLimits)
        return UploadResult(
            file: request.file, location: URLRedaction.redact(location), protocol: chosen, bytes: file.length, bytesSent: sent,
            restartReason: restartReason)
    }

    /// Sends the rest of the resumable upload `row` from `offset`, by its protocol.
    private func send(
        _ file: UploadFile, row: UploadRow, from offset: Int64, meter: UploadMeter, retries: inout RetryPolicy,
        limits: IETFLimits? = nil
    ) async throws(DownloadError) -> Int64 {
        if row.protocol == .ietf {
            return try await ietfSend(file, row: row, from: offset, meter: meter, retries: &retries, limits: limits)
        }
        return try await tusSend(file, row: row, from: offset, meter: meter, retries: &retries)
    }

    // MARK: Choosing

    /// What a server's answer to `OPTIONS` says it speaks.
    enum ServerKind: Sendable, Equatable {
        case tus(TusCapabilities)
        /// The IETF draft: its `Upload-Limit` (or `Upload-Draft-Interop-Version`) in the answer,
        /// with the interop version the answer names when it is one spoken here (nil: the
        /// creation finds one), and the limits it states.
        case ietf(Int?, IETFLimits?)
        /// Neither: a plain `PUT`.
        case plain
    }

    /// Asks the server, by one `OPTIONS` that names both protocols, which it speaks; tus first,
    /// when it speaks both.
    ///
    /// A server of the draft answers `OPTIONS` with `Upload-Limit` (NIOResumableUpload does,
    /// whatever its application answers), but only when the request names the draft's interop
    /// version: the request's, else 6. The version its answer names, when spoken here, is the
    /// one the upload speaks; a server that does not speak the one asked answers
    /// `400 Bad Request` naming its own. The draft's other sign, the interim
    /// `104 Upload Resumption Supported` to an upload, would come only once the bytes are on
    /// their way, too late to choose, and NIO's decoder drops interim answers: a server that
    /// says nothing to `OPTIONS` gets a plain `PUT`.
    func askServer() async throws(DownloadError) -> ServerKind {
        let asked = request.ietfInteropVersion ?? Self.ietfInteropVersion
        var extra = Self.ietfHeaders(asked)
        extra["Tus-Resumable"] = Self.tusVersion
        let answer = try await transport.send(.OPTIONS, url: request.url, headers: headers(extra), stallTimeout: stallTimeout)
        await HTTPTransport.discard(answer.body)
        if answer.head.status >= 500 { throw failure(answer) }
        let named = Self.ietfNamedVersion(answer.headers)
        if answer.head.status == 400, let named, named != asked { return .ietf(named, nil) }
        guard (200..<300).contains(answer.head.status) else { return .plain }
        if let tus = Self.tusCapabilities(answer.headers) { return .tus(tus) }
        if answer.headers.contains(name: "Upload-Limit") || answer.headers.contains(name: "Upload-Draft-Interop-Version") {
            return .ietf(named, IETFLimits(answer.headers))
        }
        return .plain
    }

    // MARK: Plain PUT

    /// One `PUT` of the whole file (to ``UploadRequest/putTarget``), again from its start after
    /// a failure that may pass.
    private func put(_ file: UploadFile, meter: UploadMeter, retries: inout RetryPolicy) async throws(DownloadError) -> Int64 {
        let target = request.putTarget
        try await retrying(&retries, meter) { () throws(DownloadError) in
            let answer = try await transport.send(
                .PUT, url: target, headers: headers(["Content-Type": "application/octet-stream"]),
                body: body(file, from: 0, count: file.length, meter: meter), stallTimeout: stallTimeout)
            await HTTPTransport.discard(answer.body)
            guard (200..<300).contains(answer.head.status) else { throw failure(answer, url: target) }
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
        // Read on the connection's loop while nothing holds it back: a limit set meanwhile
        // applies from the next chunk on, through `chunk`.
        let readNow: @Sendable (Int64, inout ByteBuffer) -> Bool = { offset, buffer in
            guard limiters.allSatisfy({ $0.bytesPerSecond == 0 }) else { return false }
            let wanted = Int(min(Int64(RequestBody.directChunkSize), count - offset))
            guard file.readNow(at: start + offset, count: wanted, into: &buffer) else { return false }
            meter.sent(start + offset + Int64(buffer.readableBytes))
            return true
        }
        return RequestBody(length: count, readNow: readNow) { offset, spare in
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
                try await backOff(after: error, madeProgress: madeProgress, &retries, meter)
            }
        }
    }

    /// Waits the request's backoff after `error`, shown as a note; throws instead when the
    /// failure is final, the tries ran out or the upload was cancelled.
    func backOff(
        after error: DownloadError, madeProgress: Bool, _ retries: inout RetryPolicy, _ meter: UploadMeter
    ) async throws(DownloadError) {
        guard !Task.isCancelled, let wait = retries.delay(after: error, madeProgress: madeProgress, jitter: random()) else {
            throw Task.isCancelled ? .cancelled : error
        }
        meter.note("retrying in \(wait.formattedSeconds): \(error.message)")
        do { try await clock.sleep(for: wait) } catch { throw .cancelled }
    }

    /// The server's error answer as one line with the URL.
    func failure(_ answer: HTTPAnswer, url: String? = nil) -> DownloadError {
        DownloadError.httpStatus(answer.head.status, reason: answer.head.reason, retryAfter: answer.head.retryAfter).with(
            url: url ?? request.url)
    }
}
