import Foundation
import NIOCore
import NIOHTTP1

/// The IETF draft "Resumable Uploads for HTTP" (httpbis), as its interop version 6 has it:
/// the upload made by a request to the target that says `Upload-Complete: ?0`, its URL in the
/// answer's `Location`, the bytes appended by `PATCH` (`application/partial-upload`) from the
/// offset the server holds, the last one saying `Upload-Complete: ?1`, and `HEAD` for that
/// offset after an interruption.
///
/// The upload is created without bytes, then filled: its URL is in the store before the first
/// byte goes, as a tus upload's is. Sending the first bytes with the creation would save a round
/// trip, but the URL would then come only in the interim `104 Upload Resumption Supported`,
/// which NIO's HTTP/1.1 decoder drops (as most clients' do) and proxies may not pass on: a
/// `kill -9` in the middle of that request would leave an upload no rerun can find.
///
/// Checked against Apple's NIOResumableUpload (swift-nio-extras), which speaks interop
/// versions 3, 5 and 6; 6 is the one spoken here, the first with `application/partial-upload`.
extension UploadRunner {
    static let ietfInteropVersion = "6"

    /// The most one `PATCH` carries, as for tus (``tusChunkSize``): a server that keeps
    /// nothing of a cut request loses at most this much to a `kill -9`. NIOResumableUpload keeps
    /// every byte it read.
    static let ietfChunkSize: Int64 = 8 << 20

    /// Makes a new upload of `file` at the request's URL (`POST` with `Upload-Complete: ?0` and
    /// its length) and returns its URL; an empty file is sent whole by the creation, and nil
    /// returned.
    func ietfCreate(_ file: UploadFile) async throws(DownloadError) -> String? {
        let complete = file.length == 0
        let answer = try await transport.send(
            .POST, url: request.url,
            headers: headers([
                "Upload-Draft-Interop-Version": Self.ietfInteropVersion, "Upload-Complete": complete ? "?1" : "?0",
                "Upload-Length": String(file.length), "Content-Length": "0",
            ]),
            stallTimeout: stallTimeout)
        await HTTPTransport.discard(answer.body)
        guard (200..<300).contains(answer.head.status) else { throw failure(answer) }
        if complete { return nil }
        guard let location = answer.headers.first(name: "Location"),
            let resolved = URL(string: location, relativeTo: URL(string: answer.url))?.absoluteString,
            let scheme = HTTPURL(resolved)?.scheme, scheme == "http" || scheme == "https"
        else {
            throw DownloadError(
                kind: .protocolViolation,
                message: "the server sent no upload URL (Location) for a resumable upload: it may not speak the IETF draft (try --protocol put)",
                url: request.displayURL)
        }
        return resolved
    }

    /// The offset the server holds of the upload at `location` (`HEAD`), or why it cannot be
    /// continued.
    func ietfOffset(_ location: String, length: Int64) async throws(DownloadError) -> ResumableUploadState {
        let answer = try await transport.send(
            .HEAD, url: location, headers: headers(["Upload-Draft-Interop-Version": Self.ietfInteropVersion]), stallTimeout: stallTimeout)
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
        if answer.headers.first(name: "Upload-Complete") == "?1" {
            guard offset == length else {
                return .gone("the server finished the upload at \(offset) of \(length) bytes: starting a new upload")
            }
            return .complete
        }
        return .offset(offset)
    }

    /// Sends `file` from `offset` by `PATCH`es of at most ``ietfChunkSize`` until the server
    /// has taken all of it, the last `PATCH` saying so; after a failure (a `409 Conflict`
    /// included), the server's offset is asked again and sending goes on from there. Returns
    /// the bytes sent (and accepted) by this run.
    func ietfSend(
        _ file: UploadFile, row: UploadRow, from offset: Int64, meter: UploadMeter, retries: inout RetryPolicy
    ) async throws(DownloadError) -> Int64 {
        guard let location = row.location else { throw .invalidRequest("no resumable upload to continue") }
        var offset = offset
        var sent: Int64 = 0
        var resync = false
        var progressed = false
        // The last PATCH carries `Upload-Complete: ?1`, even an empty one (a rerun after a
        // kill that came after the last byte but before the server's answer): only the server's
        // answer to it says the upload is whole.
        var completed = false
        meter.sent(offset)
        // Bounded: each pass sends a chunk or counts a failure against the request's tries.
        while !completed {
            do throws(DownloadError) {
                if resync {
                    switch try await ietfOffset(location, length: file.length) {
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
                let count = min(Self.ietfChunkSize, file.length - offset)
                let last = offset + count == file.length
                let answer = try await transport.send(
                    .PATCH, url: location,
                    headers: headers([
                        "Upload-Draft-Interop-Version": Self.ietfInteropVersion, "Upload-Offset": String(offset),
                        "Upload-Complete": last ? "?1" : "?0", "Content-Type": "application/partial-upload",
                    ]),
                    body: body(file, from: offset, count: count, meter: meter), stallTimeout: stallTimeout)
                await HTTPTransport.discard(answer.body)
                if answer.head.status == 409 {
                    throw DownloadError.badResponse("the server holds another offset than \(offset) (409 Conflict)").with(url: location)
                }
                guard (200..<300).contains(answer.head.status) else { throw failure(answer).with(url: location) }
                let now = answer.headers.first(name: "Upload-Offset").flatMap { Int64($0) }
                if last {
                    // The final answer is the target's own (NIOResumableUpload adds the offset);
                    // an offset it gives must be the whole file.
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
