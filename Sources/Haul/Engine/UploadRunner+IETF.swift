import Foundation
import NIOCore
import NIOHTTP1

/// The IETF draft "Resumable Uploads for HTTP" (httpbis), in its interop versions 3, 5 and 6:
/// the upload made by a request to the target that says it is incomplete, its URL in the
/// answer's `Location`, the bytes appended by `PATCH` from the offset the server holds, the
/// last one saying it completes the upload, and `HEAD` for that offset after an interruption.
///
/// The versions differ in how a request says whether it completes the upload: version 3 by
/// `Upload-Incomplete: ?1` or `?0` (the inverse), 5 and 6 by `Upload-Complete: ?0` or `?1`; and
/// version 6 types each `PATCH` `application/partial-upload`. Every request names its version
/// (`Upload-Draft-Interop-Version`). An answer is read in either form, whatever the version:
/// NIOResumableUpload answers a completing request in the other version's form.
///
/// The version is the request's (``UploadRequest/ietfInteropVersion``), else 6, the latest;
/// a server that answers 6 with `400 Bad Request` naming 3 or 5 is asked again in that one.
/// An upload's row keeps the version it began with, which a rerun speaks.
///
/// The upload is created without bytes, then filled: its URL is in the store before the first
/// byte goes, as a tus upload's is. Sending the first bytes with the creation would save a round
/// trip, but the URL would then come only in the interim `104 Upload Resumption Supported`,
/// which NIO's HTTP/1.1 decoder drops (as most clients' do) and proxies may not pass on: a
/// `kill -9` in the middle of that request would leave an upload no rerun can find.
///
/// Checked against Apple's NIOResumableUpload (swift-nio-extras), which speaks interop
/// versions 3, 5 and 6.
extension UploadRunner {
    /// The interop version sent when the request names none: the latest, which
    /// NIOResumableUpload names in its `400 Bad Request` to a version it does not know.
    static let ietfInteropVersion = 6

    /// The draft's headers of a request in `version`: the version, and when `complete` is
    /// given, whether the request completes the upload, in that version's form.
    static func ietfHeaders(_ version: Int, complete: Bool? = nil) -> [String: String] {
        var headers = ["Upload-Draft-Interop-Version": String(version)]
        if let complete {
            if version >= 5 {
                headers["Upload-Complete"] = complete ? "?1" : "?0"
            } else {
                headers["Upload-Incomplete"] = complete ? "?0" : "?1"
            }
        }
        return headers
    }

    /// Whether an answer says the upload is complete, by `Upload-Complete` or
    /// `Upload-Incomplete`, whichever it carries; nil when it says neither.
    static func ietfComplete(_ headers: HTTPHeaders) -> Bool? {
        switch headers.first(name: "Upload-Complete") {
        case "?1": return true
        case "?0": return false
        default: break
        }
        switch headers.first(name: "Upload-Incomplete") {
        case "?1": return false
        case "?0": return true
        default: return nil
        }
    }

    /// The interop version an answer names, when it is one spoken here.
    static func ietfNamedVersion(_ headers: HTTPHeaders) -> Int? {
        headers.first(name: "Upload-Draft-Interop-Version").flatMap { Int($0) }.flatMap {
            UploadRequest.ietfInteropVersions.contains($0) ? $0 : nil
        }
    }

    /// What a server's `Upload-Limit` says (a structured-field dictionary, RFC 8941): the
    /// largest upload it takes and the bounds of one appending request's body. Members it does
    /// not name, and members Haul does not know (`expires`), are not limits here.
    struct IETFLimits: Sendable, Hashable {
        var maxSize: Int64?
        var maxAppendSize: Int64?
        var minAppendSize: Int64?

        /// The limits of an answer's `Upload-Limit`, nil when it has none.
        init?(_ headers: HTTPHeaders) {
            let fields = headers["Upload-Limit"]
            guard !fields.isEmpty else { return nil }
            for member in fields.joined(separator: ",").split(separator: ",") {
                let parts = member.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, let value = Int64(parts[1]), value >= 0 else { continue }
                switch parts[0] {
                case "max-size": maxSize = value
                case "max-append-size": maxAppendSize = value
                case "min-append-size": minAppendSize = value
                default: continue
                }
            }
        }

        init(maxSize: Int64? = nil, maxAppendSize: Int64? = nil, minAppendSize: Int64? = nil) {
            (self.maxSize, self.maxAppendSize, self.minAppendSize) = (maxSize, maxAppendSize, minAppendSize)
        }

        /// Refuses a file longer than the server takes, in one line.
        func check(_ length: Int64, file: String) throws(DownloadError) {
            if let maxSize, length > maxSize {
                throw .invalidRequest("\(file) is \(length) bytes; the server takes at most \(maxSize) (Upload-Limit: max-size)")
            }
        }

        /// The bytes one `PATCH` carries: ``UploadRunner/ietfChunkSize``, within the server's
        /// append bounds (a minimum above its maximum leaves the maximum).
        var chunkSize: Int64 {
            var size = UploadRunner.ietfChunkSize
            if let minAppendSize { size = max(size, minAppendSize) }
            if let maxAppendSize { size = min(size, max(1, maxAppendSize)) }
            return size
        }
    }

    /// The most one `PATCH` carries, as for tus (``tusChunkSize``): a server that keeps
    /// nothing of a cut request loses at most this much to a `kill -9`. NIOResumableUpload keeps
    /// every byte it read.
    static let ietfChunkSize: Int64 = 8 << 20

    /// Makes a new upload of `file` at the request's URL (`POST` saying it is incomplete, with
    /// its length) in interop `version`, and returns its URL, the version the server took and
    /// the limits its answer states (a file over its `max-size` is refused); an empty file is
    /// sent whole by the creation, and no URL returned.
    ///
    /// A server that answers `400 Bad Request` naming another version spoken here is asked once
    /// more, in that version, unless the request named its own.
    func ietfCreate(_ file: UploadFile, version: Int) async throws(DownloadError) -> (location: String?, version: Int, limits: IETFLimits?) {
        let complete = file.length == 0
        var version = version
        var answer = try await ietfCreation(length: file.length, version: version)
        if answer.head.status == 400, request.ietfInteropVersion == nil, let named = Self.ietfNamedVersion(answer.headers),
            named != version
        {
            await HTTPTransport.discard(answer.body)
            version = named
            answer = try await ietfCreation(length: file.length, version: version)
        }
        await HTTPTransport.discard(answer.body)
        if answer.head.status == 400, let named = answer.headers.first(name: "Upload-Draft-Interop-Version"), named != String(version) {
            let message =
                Self.ietfNamedVersion(answer.headers) == nil
                ? "the server speaks interop version \(named) of the IETF draft, which haul does not (it speaks 3, 5 and 6)"
                : "the server does not speak interop version \(version) of the IETF draft but \(named): use --ietf-version \(named), or leave it out"
            throw DownloadError(kind: .protocolViolation, message: message, url: request.displayURL)
        }
        guard (200..<300).contains(answer.head.status) else { throw failure(answer) }
        let limits = IETFLimits(answer.headers)
        try limits?.check(file.length, file: request.file)
        if complete { return (nil, version, limits) }
        guard let location = answer.headers.first(name: "Location"),
            let resolved = URL(string: location, relativeTo: URL(string: answer.url))?.absoluteString,
            let scheme = HTTPURL(resolved)?.scheme, scheme == "http" || scheme == "https"
        else {
            throw DownloadError(
                kind: .protocolViolation,
                message: "the server sent no upload URL (Location) for a resumable upload: it may not speak the IETF draft (try --protocol put)",
                url: request.displayURL)
        }
        return (resolved, version, limits)
    }

    /// One creation request in interop `version` for a file of `length` bytes, whole when it
    /// is empty; its body is left to the caller.
    private func ietfCreation(length: Int64, version: Int) async throws(DownloadError) -> HTTPAnswer {
        var extra = Self.ietfHeaders(version, complete: length == 0)
        extra["Upload-Length"] = String(length)
        extra["Content-Length"] = "0"
        return try await transport.send(.POST, url: request.url, headers: headers(extra), stallTimeout: stallTimeout)
    }

    /// The offset the server holds of the upload at `location` (`HEAD` in interop `version`),
    /// or why it cannot be continued.
    func ietfOffset(_ location: String, length: Int64, version: Int) async throws(DownloadError) -> ResumableUploadState {
        let answer = try await transport.send(
            .HEAD, url: location, headers: headers(Self.ietfHeaders(version)), stallTimeout: stallTimeout)
        await HTTPTransport.discard(answer.body)
        let status = answer.head.status
        if [403, 404, 410].contains(status) {
            return .gone("the server no longer has the upload (HTTP \(status)): starting a new upload")
        }
        guard (200..<300).contains(status) else { throw failure(answer).with(url: location) }
        guard let offset = answer.headers.first(name: "Upload-Offset").flatMap({ Int64($0) }), offset >= 0 else {
            throw DownloadError.badResponse("the server's answer to HEAD has no valid Upload-Offset").with(url: location)
        }
        if let serverLength = answer.headers.first(name: "Upload-Length").flatMap({ Int64($0) }), serverLength != length {
            return .gone("the server's upload is \(serverLength) bytes long, the file \(length): starting a new upload")
        }
        if offset > length {
            return .gone("the server holds \(offset) bytes of the upload, more than the file's \(length): starting a new upload")
        }
        if Self.ietfComplete(answer.headers) == true {
            guard offset == length else {
                return .gone("the server finished the upload at \(offset) of \(length) bytes: starting a new upload")
            }
            return .complete
        }
        return .offset(offset)
    }

    /// Sends `file` from `offset` by `PATCH`es of at most ``ietfChunkSize`` (or what the server's
    /// `Upload-Limit` bounds an appending request to, when this run learnt it) until the server
    /// has taken all of it, the last `PATCH` saying so; after a failure (a `409 Conflict`
    /// included), the server's offset is asked again and sending goes on from there. Every
    /// request is in the interop version the upload began with (``UploadRow/ietfVersion``).
    /// Returns the bytes sent (and accepted) by this run.
    func ietfSend(
        _ file: UploadFile, row: UploadRow, from offset: Int64, meter: UploadMeter, retries: inout RetryPolicy,
        limits: IETFLimits? = nil
    ) async throws(DownloadError) -> Int64 {
        let chunkSize = (limits ?? IETFLimits()).chunkSize
        guard let location = row.location else { throw .invalidRequest("no resumable upload to continue") }
        let version = row.ietfVersion
        var offset = offset
        var sent: Int64 = 0
        var resync = false
        var progressed = false
        // The last PATCH says it completes the upload, even an empty one (a rerun after a
        // kill that came after the last byte but before the server's answer): only the server's
        // answer to it says the upload is whole.
        var completed = false
        meter.sent(offset)
        // Bounded: each pass sends a chunk or counts a failure against the request's tries.
        while !completed {
            do throws(DownloadError) {
                if resync {
                    switch try await ietfOffset(location, length: file.length, version: version) {
                    case .offset(let now):
                        // What a cut PATCH brought before the cut counts as sent: the server kept it.
                        if now > offset { sent += now - offset }
                        offset = now
                    case .complete:
                        completed = true
                        meter.sent(file.length)
                        continue
                    case .gone(let why):
                        throw DownloadError(kind: .protocolViolation, message: "the upload was lost while being sent (\(why))", url: location)
                    }
                    resync = false
                    meter.sent(offset)
                    continue
                }
                let count = min(chunkSize, file.length - offset)
                let last = offset + count == file.length
                var extra = Self.ietfHeaders(version, complete: last)
                extra["Upload-Offset"] = String(offset)
                // Version 6 made the type of an appending request's body its own.
                if version >= 6 { extra["Content-Type"] = "application/partial-upload" }
                let answer = try await transport.send(
                    .PATCH, url: location, headers: headers(extra),
                    body: body(file, from: offset, count: count, meter: meter), stallTimeout: stallTimeout)
                await HTTPTransport.discard(answer.body)
                if answer.head.status == 409 {
                    throw DownloadError.badResponse("the server holds another offset than \(offset) (409 Conflict)").with(url: location)
                }
                guard (200..<300).contains(answer.head.status) else { throw failure(answer).with(url: location) }
                let now = answer.headers.first(name: "Upload-Offset").flatMap { Int64($0) }
                if last {
                    // The final answer is the target's own (NIOResumableUpload adds the offset,
                    // and says it complete in the other version's form): judged by its status,
                    // and an offset it gives must be the whole file.
                    if let now, now != file.length {
                        throw DownloadError.badResponse("the server confirmed \(now) of \(file.length) bytes at the end of the upload")
                            .with(url: location)
                    }
                    completed = true
                    sent += count
                    offset = file.length
                } else {
                    guard let now, now > offset, now <= offset + count else {
                        throw DownloadError.badResponse("the server's answer to PATCH has no valid Upload-Offset").with(url: location)
                    }
                    sent += now - offset
                    offset = now
                }
                progressed = true
                meter.sent(offset)
            } catch {
                try await backOff(after: error, madeProgress: progressed, &retries, meter)
                progressed = false
                resync = true
            }
        }
        try await store.deleteUpload(file: request.file, url: request.url)
        return sent
    }
}
