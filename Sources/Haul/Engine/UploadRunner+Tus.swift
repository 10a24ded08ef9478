import Foundation
import NIOCore
import NIOHTTP1

/// What a tus server said of itself (`OPTIONS`).
struct TusCapabilities: Sendable, Hashable {
    /// `Tus-Extension`'s names (`creation`, `termination`, `checksum`, …); empty when not said.
    var extensions: Set<String> = []
    /// `Tus-Max-Size`: the largest upload it takes.
    var maxSize: Int64?
}

/// Where a resumable upload (tus, the IETF draft) stands on the server.
enum ResumableUploadState: Sendable, Equatable {
    /// The server holds this many bytes of it.
    case offset(Int64)
    /// The server has it whole (the IETF draft's answer to `HEAD` says it complete): nothing is
    /// left to send.
    case complete
    /// It cannot be continued, for this reason (one line).
    case gone(String)
}

/// tus 1.0.0 (https://tus.io/protocols/resumable-upload): `OPTIONS` for the server's
/// extensions and size limit, creation by `POST`, the bytes by `PATCH` from the offset the
/// server holds, and `HEAD` for that offset after an interruption.
extension UploadRunner {
    static let tusVersion = "1.0.0"

    /// The most one `PATCH` carries. A server that keeps nothing of an interrupted request
    /// (aiohttp-tus reads a request whole before writing it) loses at most this much to a
    /// `kill -9`; 8 MiB is tuspy's chunk too. Each `PATCH` is one round trip and one small store
    /// write, a few milliseconds against the tenth of a second 8 MiB takes on a fast link.
    static let tusChunkSize: Int64 = 8 << 20

    /// The server's tus capabilities, or nil when it does not speak tus (no `Tus-Version` or
    /// `Tus-Resumable` in its answer to `OPTIONS`).
    func askTus() async throws(DownloadError) -> TusCapabilities? {
        let answer = try await transport.send(
            .OPTIONS, url: request.url, headers: headers(["Tus-Resumable": Self.tusVersion]), stallTimeout: stallTimeout)
        await HTTPTransport.discard(answer.body)
        guard (200..<300).contains(answer.head.status), let capabilities = Self.tusCapabilities(answer.headers) else {
            if answer.head.status >= 500 { throw failure(answer) }
            return nil
        }
        return capabilities
    }

    /// The tus capabilities an answer to `OPTIONS` gives, or nil when it names no tus version.
    static func tusCapabilities(_ headers: HTTPHeaders) -> TusCapabilities? {
        guard headers.contains(name: "Tus-Version") || headers.contains(name: "Tus-Resumable") else { return nil }
        let extensions = headers[canonicalForm: "Tus-Extension"].map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return TusCapabilities(extensions: Set(extensions), maxSize: headers.first(name: "Tus-Max-Size").flatMap { Int64($0) })
    }

    /// Makes a new upload of `file` (`POST` with its length and name) and returns its URL.
    func tusCreate(_ file: UploadFile, server: TusCapabilities) async throws(DownloadError) -> String {
        if let maxSize = server.maxSize, file.length > maxSize {
            throw .invalidRequest("\(request.file) is \(file.length) bytes; the server takes at most \(maxSize) (Tus-Max-Size)")
        }
        if !server.extensions.isEmpty, !server.extensions.contains("creation") {
            throw DownloadError(
                kind: .protocolViolation,
                message: "the tus server does not offer uploads to be created (no 'creation' in Tus-Extension)", url: request.displayURL)
        }
        let name = Data((request.file as NSString).lastPathComponent.utf8).base64EncodedString()
        let answer = try await transport.send(
            .POST, url: request.url,
            headers: headers([
                "Tus-Resumable": Self.tusVersion, "Upload-Length": String(file.length), "Upload-Metadata": "filename \(name)",
                "Content-Length": "0",
            ]),
            stallTimeout: stallTimeout)
        await HTTPTransport.discard(answer.body)
        guard (200..<300).contains(answer.head.status) else { throw failure(answer) }
        guard let location = answer.headers.first(name: "Location"),
            let resolved = URL(string: location, relativeTo: URL(string: answer.url))?.absoluteString,
            let scheme = HTTPURL(resolved)?.scheme, scheme == "http" || scheme == "https"
        else {
            throw DownloadError(kind: .protocolViolation, message: "the tus server made an upload but sent no usable Location", url: request.displayURL)
        }
        return resolved
    }

    /// The offset the server holds of the upload at `location` (`HEAD`), or why it cannot be
    /// continued.
    func tusOffset(_ location: String, length: Int64) async throws(DownloadError) -> ResumableUploadState {
        let answer = try await transport.send(.HEAD, url: location, headers: headers(["Tus-Resumable": Self.tusVersion]), stallTimeout: stallTimeout)
        await HTTPTransport.discard(answer.body)
        let status = answer.head.status
        if [403, 404, 410].contains(status) {
            return .gone("the server no longer has the upload (HTTP \(status)): starting a new upload")
        }
        guard (200..<300).contains(status) else { throw failure(answer).with(url: location) }
        guard let offset = answer.headers.first(name: "Upload-Offset").flatMap({ Int64($0) }), (0...length).contains(offset) else {
            throw DownloadError.badResponse("the tus server's answer to HEAD has no valid Upload-Offset").with(url: location)
        }
        if let serverLength = answer.headers.first(name: "Upload-Length").flatMap({ Int64($0) }), serverLength != length {
            return .gone("the server's upload is \(serverLength) bytes long, the file \(length): starting a new upload")
        }
        return .offset(offset)
    }

    /// Sends `file` from `offset` by `PATCH`es of at most ``tusChunkSize`` until the server
    /// holds all of it; after a failure, the server's offset is asked again and sending goes on
    /// from there. Returns the bytes sent (and accepted) by this run.
    func tusSend(
        _ file: UploadFile, row: UploadRow, from offset: Int64, meter: UploadMeter, retries: inout RetryPolicy
    ) async throws(DownloadError) -> Int64 {
        guard let location = row.location else { throw .invalidRequest("no tus upload to continue") }
        var offset = offset
        var sent: Int64 = 0
        var resync = false
        var progressed = false
        // An empty file gets one empty PATCH: the protocol has it complete at its creation, but
        // some servers (aiohttp-tus) finish an upload only at the PATCH that reaches its length.
        var patched = file.length > 0
        meter.sent(offset)
        // Bounded: each pass sends a chunk or counts a failure against the request's tries.
        while offset < file.length || resync || !patched {
            do throws(DownloadError) {
                if resync {
                    switch try await tusOffset(location, length: file.length) {
                    case .offset(let now): offset = now
                    case .complete: offset = file.length
                    case .gone(let why):
                        throw DownloadError(kind: .protocolViolation, message: "the upload was lost while being sent (\(why))", url: location)
                    }
                    resync = false
                    meter.sent(offset)
                    continue
                }
                let count = min(Self.tusChunkSize, file.length - offset)
                let answer = try await transport.send(
                    .PATCH, url: location,
                    headers: headers([
                        "Tus-Resumable": Self.tusVersion, "Upload-Offset": String(offset),
                        "Content-Type": "application/offset+octet-stream",
                    ]),
                    body: body(file, from: offset, count: count, meter: meter), stallTimeout: stallTimeout)
                await HTTPTransport.discard(answer.body)
                if answer.head.status == 409 {
                    throw DownloadError.badResponse("the server holds another offset than \(offset) (409 Conflict)").with(url: location)
                }
                guard (200..<300).contains(answer.head.status) else { throw failure(answer).with(url: location) }
                guard let now = answer.headers.first(name: "Upload-Offset").flatMap({ Int64($0) }), now > offset || count == 0,
                    now <= offset + count
                else {
                    throw DownloadError.badResponse("the tus server's answer to PATCH has no valid Upload-Offset").with(url: location)
                }
                sent += now - offset
                offset = now
                progressed = true
                patched = true
                // Nothing is stored per PATCH: a rerun asks the server for its offset (HEAD), and
                // a commit per 8 MiB (an fsync each) cost a tenth of a 256 MiB upload's time.
                meter.sent(offset)
            } catch {
                try await backOff(after: error, madeProgress: progressed, &retries, meter)
                progressed = false
                resync = true
            }
        }
        // Complete only when the server's offset is the file's length (the loop's condition).
        try await store.deleteUpload(file: request.file, url: request.url)
        return sent
    }
}
