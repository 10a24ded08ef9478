import Foundation
import NIOHTTP1

/// What the server says about a URL before any byte is written.
struct ProbeResult: Sendable {
    var url: String
    var totalLength: Int64?
    var validators: Validators
    var acceptsRanges: Bool
    var suggestedName: String?
    /// The `Link` and `Digest` headers, for ``DownloadRequest/followMetalink``.
    var links: [String] = []
    var digests: [String] = []
}

/// The first answer of an attempt: what it says about the file, and its body when it was a
/// GET whose bytes can be kept.
struct FirstContact: Sendable {
    var probe: ProbeResult
    var answer: HTTPAnswer?
}

extension DownloadRunner {
    var headers: [(String, String)] { request.headers.map { ($0.name, $0.value) } }

    /// A GET straight away when nothing of this download is on disk yet (one request, as curl
    /// and aria2 make, instead of a HEAD and a GET), else a HEAD to learn what to resume.
    func firstContact(streamFirst: Bool, urlName: String?) async throws(DownloadError) -> FirstContact {
        guard streamFirst, nothingOnDisk(urlName: urlName) else { return FirstContact(probe: try await probe()) }
        let answer = try await transport.send(.GET, url: request.url, headers: headers, stallTimeout: stallTimeout)
        let head = answer.head
        guard (200...299).contains(head.status) else { throw head.error }
        var probe = ProbeResult(head, url: answer.url)
        if head.status == 206 {
            // Only a 206 of the whole file is the same as a 200.
            guard let range = head.contentRange, range.first == 0, let total = range.total, range.last == total - 1 else {
                return FirstContact(probe: try await self.probe())
            }
            probe.totalLength = total
            probe.acceptsRanges = true
        }
        return FirstContact(probe: probe, answer: answer)
    }

    /// Whether neither the file nor its part file is where the download would go, as far as
    /// can be told before the server names the file.
    func nothingOnDisk(urlName: String?) -> Bool {
        switch request.destination {
        case .file(let path):
            // A mirror's files, or a list's with their own names: a few folders, each of many files.
            let path = FilePaths.absolute(path)
            let (folder, name) = (FilePaths.folder(of: path), FilePaths.name(of: path))
            return !(folders.contains(name, or: name + ".part", in: folder) ?? Self.fileOrPartExists(path))
        case .directory(let directory):
            // A list into one folder asks this for every file: the folder's listing answers.
            guard let urlName else { return false }
            let folder = FilePaths.absolute(directory)
            if let taken = folders.contains(urlName, or: urlName + ".part", in: folder) { return !taken }
            return !Self.fileOrPartExists(folder + "/" + urlName)
        }
    }

    private static func fileOrPartExists(_ path: String) -> Bool {
        DestinationResolver.exists(path) || DestinationResolver.exists(path + ".part")
    }

    /// HEAD, falling back to a one-byte ranged GET when HEAD is refused or says nothing useful.
    func probe() async throws(DownloadError) -> ProbeResult {
        let head = try await transport.send(.HEAD, url: request.url, headers: headers, stallTimeout: stallTimeout)
        if (200...299).contains(head.head.status), head.head.contentLength != nil || head.head.isChunked {
            return ProbeResult(head.head, url: head.url)
        }
        // A busy server (503, 429…) is asked again later, HEAD and all. But some servers
        // refuse HEAD (405, 501), forbid it, or answer it without a length: a ranged GET
        // for one byte costs one round trip and tells the truth.
        if head.head.error.isRetryable, head.head.status != 501 { throw head.head.error }
        let get = try await transport.send(
            .GET, url: request.url, headers: headers + [("Range", RangeHeader.value(from: 0, to: 0))],
            stallTimeout: stallTimeout)
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

    /// A download completed before, asked for again: one conditional request with the
    /// validators it was saved with. Unchanged → nothing fetched. Changed → the new version is
    /// downloaded and replaces Haul's own file once complete. Returns nil when the file is
    /// gone or is no longer the one Haul wrote (then the usual rules apply).
    func revalidated(_ retry: inout RetryPolicy) async throws(DownloadError) -> DownloadResult? {
        // The completion is committed unless it happened moments ago in this process: only then
        // is the writer flushed (a flush for each file of a list cuts its group commits short).
        var stored = try await store.committedRow(id)
        if stored?.resultBytes == nil { stored = try await store.row(id) }
        var info = stat()
        guard let row = stored, let path = row.path, let bytes = row.resultBytes, stat(path, &info) == 0, row.isAsWritten(info)
        else { return nil }
        let unchanged = DownloadResult(path: path, bytes: bytes, bytesFetched: 0, wasAlreadyComplete: true)
        let known = row.validators
        guard !known.isEmpty else {
            // Nothing to ask conditionally: the length is all there is to compare.
            let probe = try await retrying(&retry) { () async throws(DownloadError) in try await self.probe() }
            return probe.totalLength == bytes ? unchanged : nil
        }
        let answer = try await conditional(.GET, since: known, &retry)
        if answer.head.status == 304 {
            // Read to its end (it has none), so that the connection goes back to the pool
            // rather than being closed as an answer dropped halfway would be.
            await HTTPTransport.discard(answer.body)
            return unchanged
        }
        // A 200 is not read if unneeded: dropping it closes the connection.
        if Self.saysUnchanged(answer.head, bytes: bytes, known: known) { return unchanged }
        let probe = ProbeResult(answer.head, url: answer.url)
        logger.debug("changed on the server", metadata: ["path": "\(path)"])
        guard let part = try lockNow(partOf: path, in: openFolder(of: path)) else { return nil }
        events.resolved(path)
        return try await transfer(to: path, part: part, probe: probe, first: answer, replacing: true, retry: &retry)
    }
}

extension DownloadRunner {
    /// One request with `known`'s conditions (`If-None-Match`, `If-Modified-Since`), retried
    /// like a download; its answer is a 304 or a 200, whose body (of a GET) is left unread.
    func conditional(_ method: HTTPMethod, since known: Validators, _ retry: inout RetryPolicy) async throws(DownloadError) -> HTTPAnswer {
        let conditions = Self.conditions(known)
        return try await retrying(&retry) { () async throws(DownloadError) in
            let answer = try await transport.send(method, url: request.url, headers: headers + conditions, stallTimeout: stallTimeout)
            let status = answer.head.status
            // A HEAD refused is not asked again: a GET is the way to ask that server.
            if method == .HEAD, status == 405 || status == 501 { throw .invalidRequest("the server refuses HEAD (\(status))") }
            guard status == 304 || status == 200 else { throw answer.head.error }
            return answer
        }
    }

    /// Whether a conditional request's answer says the file of `bytes` saved with `known` is
    /// unchanged: a 304, or a server that ignores conditions but sends the same validators
    /// and length (it sent the same file).
    static func saysUnchanged(_ head: ResponseHead, bytes: Int64, known: Validators) -> Bool {
        if head.status == 304 { return true }
        let probe = ProbeResult(head, url: "")
        return probe.totalLength == bytes && !probe.validators.isEmpty && probe.validators == known
    }

    /// The conditions (`If-None-Match`, `If-Modified-Since`) of a request about a file saved
    /// with `known` validators.
    static func conditions(_ known: Validators) -> [(String, String)] {
        var conditions: [(String, String)] = []
        if let etag = known.etag { conditions.append(("If-None-Match", etag)) }
        if let lastModified = known.lastModified { conditions.append(("If-Modified-Since", lastModified)) }
        return conditions
    }

    /// Asks the server whether the file of `bytes` saved with `known` (not empty) changed: one
    /// conditional HEAD, so that a changed file's body is not sent only to be dropped, tried
    /// once; nothing is written. A server that refuses HEAD (405, 501) throws: ask it with a GET.
    func isUnchanged(since known: Validators, bytes: Int64) async throws(DownloadError) -> Bool {
        if !validated { try request.validate() }
        // One try: what fails is asked again by the download that follows, with its retries.
        var retry = RetryPolicy(maxTries: 1, baseWait: request.retryWait)
        let answer = try await conditional(.HEAD, since: known, &retry)
        // An answer without a body, read to its end: the connection goes back to the pool.
        await HTTPTransport.discard(answer.body)
        return Self.saysUnchanged(answer.head, bytes: bytes, known: known)
    }
}

extension Downloader {
    /// Whether the file at the request's URL, saved before as `bytes` with `known` validators
    /// (not empty), is unchanged on the server: one conditional `HEAD`, tried once, with the
    /// request's network options and credentials; nothing is written.
    package func isUnchanged(_ request: DownloadRequest, since known: Validators, bytes: Int64) async throws(DownloadError) -> Bool {
        try await runner(request, id: .next(), events: .init()).isUnchanged(since: known, bytes: bytes)
    }

    /// Whether ``areUnchanged(_:)`` pipelines the `HEAD`s of `request`'s files (of its URL's
    /// server, with its options): not through a proxy, nor over HTTP/2.
    package func pipelinesHEADs(_ request: DownloadRequest) -> Bool {
        transport(for: request).pipelines(request.url)
    }

    /// Whether each of many files of one server, saved before as `bytes` with `known`
    /// validators (not empty), is unchanged there, as ``isUnchanged(_:since:bytes:)`` asks, but
    /// with their `HEAD`s pipelined on one connection: one write and a few reads for them all
    /// where one at a time costs each a write, a read and two thread switches.
    ///
    /// The requests differ only in their URLs and destinations (the files of one mirror): the
    /// first one's options are checked and used for all. An answer the pipeline does not
    /// settle is nil, for the caller to ask alone: no answer (the server closed the connection
    /// first, or the requests cannot be pipelined, ``pipelinesHEADs(_:)``) or a redirect.
    ///
    /// - Throws: what kept the first answer from coming (the server down, a stall).
    package func areUnchanged(_ files: [(request: DownloadRequest, known: Validators, bytes: Int64)]) async throws(DownloadError) -> [Bool?] {
        guard let first = files.first?.request else { return [] }
        try first.validate()
        let given = first.headers.map { ($0.name, $0.value) }
        let heads = try await transport(for: first).heads(
            files.map { file in (file.request.url, given + DownloadRunner.conditions(file.known)) }, stallTimeout: configuration.stallTimeout)
        return zip(heads, files).map { head, file in
            guard let head else { return nil }
            switch head.status {
            case 304, 200: return DownloadRunner.saysUnchanged(head, bytes: file.bytes, known: file.known)
            case 301, 302, 303, 307, 308: return nil  // followed when asked alone
            default: return false  // the download asks again, with its retries, and says what fails
            }
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
        links = head.links
        digests = head.digests
    }
}
