import Foundation
import GRDB

/// One row of the `job` table: a download as the ``DownloadManager`` queues it, with the
/// request that starts it again after a restart. The engine's progress stays in `download`,
/// keyed by the final path.
struct JobRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "job"

    /// The request's options, stored as one JSON column so adding one needs no migration.
    struct Options: Codable, Sendable, Hashable {
        struct Header: Codable, Sendable, Hashable {
            var name: String
            var value: String
        }

        var headers: [Header]
        var checksum: Checksum?
        var maxTries: Int
        var retryWaitMilliseconds: Int64
        var overwrite: Bool
        var connections: Int
        var minimumSplitSize: Int64
        var rateLimit: Int64?
    }

    var id: String
    /// The manager's queue name (see ``DownloadManager/Configuration/queue``).
    var queue: String
    var url: String
    /// `file` or `directory`.
    var destinationKind: String
    /// The absolute path asked for: the file, or the folder it goes into.
    var destinationPath: String
    /// The final path once the server has answered (a folder destination resolves to a file).
    var resolvedPath: String?
    var options: Options
    var priority: Int
    /// Order among downloads of the same priority; smaller starts first.
    var position: Int
    /// Ids that must complete before this one starts, comma-separated.
    var dependencies: String
    var status: DownloadStatus
    var resultBytes: Int64?
    var errorKind: String?
    var lastError: String?
    var createdAt: Date
    var updatedAt: Date
}

extension JobRecord {
    init(id: String, queue: String, request: DownloadRequest, priority: Int, position: Int, dependencies: [String]) {
        let (kind, path) = request.destination.stored
        let now = Date()
        self.init(id: id, queue: queue, url: request.url, destinationKind: kind, destinationPath: path, resolvedPath: nil,
                  options: Options(request), priority: priority, position: position,
                  dependencies: dependencies.joined(separator: ","), status: .queued, resultBytes: nil,
                  errorKind: nil, lastError: nil, createdAt: now, updatedAt: now)
    }

    /// The request that (re)starts this download.
    var request: DownloadRequest {
        var request = destinationKind == "file"
            ? DownloadRequest(url: url, file: destinationPath) : DownloadRequest(url: url, directory: destinationPath)
        request.headers = options.headers.map { ($0.name, $0.value) }
        request.checksum = options.checksum
        request.maxTries = options.maxTries
        request.retryWait = .milliseconds(options.retryWaitMilliseconds)
        request.overwrite = options.overwrite
        request.connections = options.connections
        request.minimumSplitSize = options.minimumSplitSize
        request.rateLimit = options.rateLimit
        return request
    }

    var dependencyIDs: [String] { dependencies.split(separator: ",").map(String.init) }
}

extension JobRecord.Options {
    init(_ request: DownloadRequest) {
        self.init(headers: request.headers.map { Header(name: $0.name, value: $0.value) }, checksum: request.checksum,
                  maxTries: request.maxTries,
                  retryWaitMilliseconds: Int64(request.retryWait.components.seconds * 1000
                                               + request.retryWait.components.attoseconds / 1_000_000_000_000_000),
                  overwrite: request.overwrite, connections: request.connections,
                  minimumSplitSize: request.minimumSplitSize, rateLimit: request.rateLimit)
    }
}

extension DownloadRequest.Destination {
    /// The kind and absolute path, as stored and as compared when deduplicating.
    var stored: (kind: String, path: String) {
        switch self {
        case .file(let path): ("file", DestinationResolver.absolute(path))
        case .directory(let path): ("directory", DestinationResolver.absolute(path))
        }
    }
}
