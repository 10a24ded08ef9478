import Foundation
import GRDB
import Synchronization

/// One row of the `download` table: everything about one download, the request it runs
/// with, where it stands in its queue, and what is on disk.
///
/// Progress is a set of durable byte ranges, never a single offset: only bytes that were
/// flushed before the row said so are trusted after a crash.
struct DownloadRow: Sendable, Hashable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "download"

    var id: DownloadID
    /// The manager's queue (``DownloadManager/Configuration/queue``); nil for a download a
    /// ``Downloader`` runs outside any manager.
    var queue: String?
    /// The request as given (its destination absolute).
    var request: DownloadRequest
    var priority = 0
    /// Order among downloads of the same priority; smaller starts first.
    var position: Int64 = 0
    /// Ids that must complete before this one starts.
    var dependencies: [DownloadID] = []
    var status: DownloadStatus = .queued
    /// When it finished, as a count that only grows: the order of `tellStopped`.
    var finishOrder: Int64?

    // What the engine learned and wrote.

    /// The final path once the server has answered (a folder destination resolves to a file).
    var path: String?
    var totalLength: Int64?
    var validators = Validators()
    var acceptsRanges = false
    /// Bytes flushed to disk before this row said so.
    var ranges = ByteRanges()
    /// Bytes written to the part file in this boot of the machine (``BootID``), flushed or not:
    /// a killed process leaves them in the page cache, so a rerun may trust them; a crash of the
    /// system may not have, so a record from another boot reads as empty. A row written whole
    /// (an insert that replaces) keeps them, as this boot's.
    var unsynced = ByteRanges()
    /// Each source's validators by URI, for a download from several: every mirror serves its
    /// own, and a rerun sends each mirror its own `If-Range`, so that a mirror whose file
    /// changed meanwhile is dropped instead of mixed in. Empty for a download from one URL.
    var sourceValidators: [String: Validators] = [:]
    /// The finished file's size and modification time, to tell Haul's own file from one
    /// someone put there later.
    var resultBytes: Int64?
    var fileModified: Double?
    var errorKind: DownloadError.Kind?
    var errorReason: DownloadError.Reason?
    var lastError: String?
    var createdAt = Date()
    var updatedAt = Date()

    init(id: DownloadID, queue: String?, request: DownloadRequest) {
        self.id = id
        self.queue = queue
        self.request = request
    }

    var url: String { request.url }

    /// The part file, once the final path is known.
    var partPath: String? { path.map { $0 + ".part" } }

    /// The file it writes: the final path once known, else the file asked for.
    var filePath: String? {
        if let path { return path }
        if case .file(let file) = request.destination { return file }
        return nil
    }

    var error: DownloadError? {
        guard status == .failed else { return nil }
        return .stored(kind: errorKind ?? .io, message: lastError ?? "failed", reason: errorReason)
    }

    // MARK: Columns

    enum Columns {
        static let id = Column("id")
        static let queue = Column("queue")
        static let destination = Column("destination")
        static let url = Column("url")
        static let path = Column("path")
        static let status = Column("status")
        static let finishOrder = Column("finishOrder")
        static let position = Column("position")
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    /// The request as the `request` column keeps it: its JSON without the URL and the
    /// destination (they have columns of their own). Downloads added together share their
    /// options, so the JSON of each set of options is made once (a list of 100,000 URLs costs
    /// one encoding, not 100,000).
    static func storedOptions(of request: DownloadRequest) throws -> String {
        var options = request
        options.sources = [DownloadRequest.Source(uri: "")]
        options.destination = .file("")
        return try remembered(options, in: optionsJSON) { String(decoding: try encoder.encode(options), as: UTF8.self) }
    }

    private static let optionsJSON = Mutex(Remembered<DownloadRequest, String>())
    private static let decodedOptions = Mutex(Remembered<String, DownloadRequest>())

    /// The last few dozen values made, by key; the last one asked for apart, compared before
    /// any key is hashed: a queue's rows carry one set of options, a few hundred bytes of JSON each.
    private struct Remembered<Key: Hashable & Sendable, Value: Sendable>: Sendable {
        var last: (key: Key, value: Value)?
        var values: [Key: Value] = [:]
    }

    /// `make()`'s value for `key`, made once while it is among the last few dozen asked for.
    private static func remembered<Key: Hashable & Sendable, Value: Sendable>(
        _ key: Key, in cache: borrowing Mutex<Remembered<Key, Value>>, make: () throws -> Value
    ) rethrows -> Value {
        let known = cache.withLock { cache -> Value? in
            if let last = cache.last, last.key == key { return last.value }
            guard let value = cache.values[key] else { return nil }
            cache.last = (key, value)
            return value
        }
        if let known { return known }
        let value = try make()
        cache.withLock { cache in
            if cache.values.count >= 64 { cache.values.removeAll() }
            cache.values[key] = value
            cache.last = (key, value)
        }
        return value
    }

    /// The `sources` column: empty for a download from its one URL (most of them, and every row
    /// written before v6), else the JSON of every source, the first one's URI in `url` too.
    static func storedSources(of request: DownloadRequest) throws -> String {
        request.hasMirrors ? String(decoding: try encoder.encode(request.sources), as: UTF8.self) : ""
    }

    /// The request from the `request` column and the URL, sources and destination columns.
    static func request(
        options json: String, url: String, sources: String = "", destinationKind: Int, destination: String
    ) throws -> DownloadRequest {
        // Rows of one list carry the same options: decoded once, and their copies share them.
        var request = try remembered(json, in: decodedOptions) { try JSONDecoder().decode(DownloadRequest.self, from: Data(json.utf8)) }
        if sources.isEmpty {
            request.sources = [DownloadRequest.Source(uri: url)]
        } else {
            request.sources = try JSONDecoder().decode([DownloadRequest.Source].self, from: Data(sources.utf8))
        }
        request.destination = destinationKind == 0 ? .file(destination) : .directory(destination)
        return request
    }

    init(row: Row) throws {
        try self.init(row, at: try ColumnIndexes(names: row.columnNames))
    }

    /// Where each column is in the rows of one result: found by name once for all of them. (GRDB
    /// finds a column by name with a lowercased copy of the name each time: 27 copies a row, and
    /// for a row made from PostgreSQL's, a lowercased copy of every column it passes on the way.)
    struct ColumnIndexes: Sendable {
        var id = 0, queue = 0, url = 0, destinationKind = 0, destination = 0, request = 0, priority = 0, position = 0
        var dependencies = 0, status = 0, finishOrder = 0, path = 0, totalLength = 0, etag = 0, lastModified = 0
        var acceptsRanges = 0, ranges = 0, unsynced = 0, sourceValidators = 0, resultBytes = 0, fileModified = 0
        var errorKind = 0, lastError = 0, errorReason = 0, createdAt = 0, updatedAt = 0, sources = 0

        /// Throws when `names` (a result's columns, in order) lack one of the table's columns.
        init(names: some Collection<String>) throws {
            var index: [String: Int] = Dictionary(minimumCapacity: names.count)
            for (offset, name) in names.enumerated() {
                // PostgreSQL's names are lowercase already: no copy of them.
                let key = name.utf8.contains(where: { (65...90).contains($0) }) ? name.lowercased() : name
                if index[key] == nil { index[key] = offset }
            }
            for (column, name) in Self.columns {
                guard let found = index[name] else { throw DatabaseError(message: "the download row has no column \(name)") }
                self[keyPath: column] = found
            }
        }

        /// Each index and its column's name, lowercased once.
        static let columns: [(WritableKeyPath<ColumnIndexes, Int> & Sendable, String)] = [
            (\.id, "id"), (\.queue, "queue"), (\.url, "url"), (\.destinationKind, "destinationKind"), (\.destination, "destination"),
            (\.request, "request"), (\.priority, "priority"), (\.position, "position"), (\.dependencies, "dependencies"),
            (\.status, "status"), (\.finishOrder, "finishOrder"), (\.path, "path"), (\.totalLength, "totalLength"), (\.etag, "etag"),
            (\.lastModified, "lastModified"), (\.acceptsRanges, "acceptsRanges"), (\.ranges, "ranges"), (\.unsynced, "unsynced"),
            (\.sourceValidators, "sourceValidators"), (\.resultBytes, "resultBytes"), (\.fileModified, "fileModified"),
            (\.errorKind, "errorKind"), (\.lastError, "lastError"), (\.errorReason, "errorReason"), (\.createdAt, "createdAt"),
            (\.updatedAt, "updatedAt"), (\.sources, "sources"),
        ].map { ($0, $1.lowercased()) }
    }

    /// Decodes the rows of one result. With `sameOrder` (rows that all hold their columns in one
    /// order: ``StoreDatabase/rowsKeepColumnOrder``), the columns are found once for all of
    /// them (``ColumnIndexes``); else again for each row.
    static func decoder(sameOrder: Bool) -> @Sendable (Row) throws -> DownloadRow {
        guard sameOrder else { return { row in try DownloadRow(row: row) } }
        final class Found: Sendable { let indexes = Mutex<ColumnIndexes?>(nil) }
        let found = Found()
        return { row in
            let indexes = try found.indexes.withLock { known in
                if let known { return known }
                let made = try ColumnIndexes(names: row.columnNames)
                known = made
                return made
            }
            return try DownloadRow(row, at: indexes)
        }
    }

    /// The row from `row`, whose columns are where `columns` says.
    init(_ row: some StoredColumns, at columns: ColumnIndexes) throws {
        func required<T>(_ value: T?, _ name: String) throws -> T {
            guard let value else { throw DatabaseError(message: "the download row has no \(name)") }
            return value
        }
        id = DownloadID(stored: try required(row.int64(at: columns.id), "id"))
        queue = try row.text(at: columns.queue)
        request = try Self.request(
            options: try required(row.text(at: columns.request), "request"), url: try required(row.text(at: columns.url), "url"),
            sources: try row.text(at: columns.sources) ?? "",
            destinationKind: Int(try required(row.int64(at: columns.destinationKind), "destinationKind")),
            destination: try required(row.text(at: columns.destination), "destination"))
        priority = Int(try required(row.int64(at: columns.priority), "priority"))
        position = try required(row.int64(at: columns.position), "position")
        dependencies = (try row.text(at: columns.dependencies) ?? "").split(separator: ",").compactMap { DownloadID(String($0)) }
        status = try row.int64(at: columns.status).flatMap { DownloadStatus(storedValue: Int($0)) } ?? .queued
        finishOrder = try row.int64(at: columns.finishOrder)
        path = try row.text(at: columns.path)
        totalLength = try row.int64(at: columns.totalLength)
        validators = Validators(etag: try row.text(at: columns.etag), lastModified: try row.text(at: columns.lastModified))
        acceptsRanges = try row.int64(at: columns.acceptsRanges).map { $0 != 0 } ?? false
        ranges = try row.text(at: columns.ranges).flatMap(ByteRanges.init(parsing:)) ?? ByteRanges()
        unsynced = Self.unsynced(stored: try row.text(at: columns.unsynced))
        sourceValidators = Self.sourceValidators(stored: try row.text(at: columns.sourceValidators))
        resultBytes = try row.int64(at: columns.resultBytes)
        fileModified = try row.double(at: columns.fileModified)
        errorKind = try row.int64(at: columns.errorKind).map { DownloadError.Kind(storedValue: Int($0)) }
        lastError = try row.text(at: columns.lastError)
        errorReason = try row.text(at: columns.errorReason).flatMap(DownloadError.Reason.init(storedName:))
        createdAt = Date(timeIntervalSince1970: try required(row.double(at: columns.createdAt), "createdAt"))
        updatedAt = Date(timeIntervalSince1970: try required(row.double(at: columns.updatedAt), "updatedAt"))
    }

    /// Every byte the part file holds by this row's record, as a rerun in this boot trusts it.
    var recorded: ByteRanges {
        var all = ranges
        for range in unsynced.ranges { all.insert(range) }
        return all
    }

    /// The `unsynced` column's text: the boot, a space, the ranges.
    static func storedUnsynced(_ ranges: ByteRanges, boot: String) -> String { boot + " " + ranges.description }

    /// The ranges of an `unsynced` column's text, if this boot wrote it.
    static func unsynced(stored: String?) -> ByteRanges {
        guard let stored, let boot = BootID.current, stored.hasPrefix(boot + " ") else { return ByteRanges() }
        return ByteRanges(parsing: String(stored.dropFirst(boot.count + 1))) ?? ByteRanges()
    }

    /// The `sourceValidators` column: empty, or the JSON of ``sourceValidators``.
    static func storedSourceValidators(_ validators: [String: Validators]) throws -> String {
        validators.isEmpty ? "" : String(decoding: try encoder.encode(validators), as: UTF8.self)
    }

    /// Whether `info` (a file's `stat`) is the file this completed download wrote: a regular
    /// file of the size and modification time it was written with.
    func isAsWritten(_ info: stat) -> Bool { Self.isAsWritten(info, bytes: resultBytes, modified: fileModified) }

    /// Whether `info` is a regular file of `bytes` bytes, modified at `modified`.
    static func isAsWritten(_ info: stat, bytes: Int64?, modified: Double?) -> Bool {
        guard let bytes, let modified, (info.st_mode & S_IFMT) == S_IFREG, Int64(info.st_size) == bytes else { return false }
        return abs(FileCommitter.modified(info) - modified) < 1e-6
    }

    /// The few columns of a row that say which file it is for and what became of it: what a
    /// mirror asks the server about (``Store/files(queue:)``). A resync's 5,000 of them are read
    /// in a fraction of the time of whole rows, whose options, ranges and dates it never looks at.
    struct File: Sendable {
        var id: DownloadID
        /// The URL it was fetched from (a download from several: the first).
        var url: String
        /// The file's path, as requested.
        var destination: String
        var status: DownloadStatus
        var validators: Validators
        var resultBytes: Int64?
        var fileModified: Double?

        /// The columns ``init(row:)`` reads, in its order.
        static let columns = "id, url, destination, status, etag, lastModified, resultBytes, fileModified"

        init(row: Row) {
            id = DownloadID(stored: row[0] as Int64)
            url = row[1] as String
            destination = row[2] as String
            status = (row[3] as Int?).flatMap(DownloadStatus.init(storedValue:)) ?? .queued
            validators = Validators(etag: row[4] as String?, lastModified: row[5] as String?)
            resultBytes = row[6] as Int64?
            fileModified = row[7] as Double?
        }

        /// ``DownloadRow/isAsWritten(_:)``.
        func isAsWritten(_ info: stat) -> Bool { DownloadRow.isAsWritten(info, bytes: resultBytes, modified: fileModified) }
    }

    /// The validators of a `sourceValidators` column's text (none when it is empty or unreadable:
    /// each mirror then tells its own again).
    static func sourceValidators(stored: String?) -> [String: Validators] {
        guard let stored, !stored.isEmpty else { return [:] }
        return (try? JSONDecoder().decode([String: Validators].self, from: Data(stored.utf8))) ?? [:]
    }

    /// The columns a row is written with, in the order of ``storedValues()``.
    static let storedColumns = [
        "id", "queue", "url", "destinationKind", "destination", "request", "priority", "position",
        "dependencies", "status", "finishOrder", "path", "totalLength", "etag", "lastModified",
        "acceptsRanges", "ranges", "resultBytes", "fileModified", "errorKind", "lastError",
        "createdAt", "updatedAt", "errorReason", "sources", "unsynced", "sourceValidators",
    ]

    /// ``storedColumns`` and then `owner`, as a store shared by a fleet inserts a row straight into
    /// its pool (the owner empty).
    static let pooledColumns = storedColumns + ["owner"]

    /// The row's values, in the order of ``storedColumns``.
    func storedValues() throws -> [(any DatabaseValueConvertible)?] {
        [
            id.storedValue,
            queue,
            request.url,
            request.destination.storedKind,
            request.destination.path,
            try Self.storedOptions(of: request),
            priority,
            position,
            dependencies.map(\.description).joined(separator: ","),
            status.storedValue,
            finishOrder,
            path,
            totalLength,
            validators.etag,
            validators.lastModified,
            acceptsRanges,
            ranges,
            resultBytes,
            fileModified,
            errorKind?.storedValue,
            lastError,
            // Seconds since 1970: formatting a date as text costs more than the rest of a row.
            createdAt.timeIntervalSince1970,
            updatedAt.timeIntervalSince1970,
            errorReason?.description,
            try Self.storedSources(of: request),
            // Read for this boot only, so written back as this boot's.
            BootID.current.flatMap { unsynced.isEmpty ? nil : Self.storedUnsynced(unsynced, boot: $0) },
            try Self.storedSourceValidators(sourceValidators),
        ]
    }

    func encode(to container: inout PersistenceContainer) throws {
        for (column, value) in zip(Self.storedColumns, try storedValues()) { container[column] = value }
    }
}

extension DownloadRequest.Destination {
    /// 0 for a file, 1 for a folder.
    var storedKind: Int {
        if case .file = self { return 0 }
        return 1
    }
}

extension ByteRanges: DatabaseValueConvertible {
    /// The text form of ``description``, as the store keeps it.
    public var databaseValue: DatabaseValue { description.databaseValue }

    /// Reads the text form of ``description``.
    public static func fromDatabaseValue(_ dbValue: DatabaseValue) -> ByteRanges? {
        String.fromDatabaseValue(dbValue).flatMap(ByteRanges.init(parsing:))
    }
}

extension ResumeToken {
    /// The token for the download `row` records.
    init(_ row: DownloadRow) {
        id = row.id.description
        url = row.url
        destination = row.path ?? row.request.destination.path
        totalLength = row.totalLength
        validators = row.validators
        ranges = row.ranges
        checksum = row.request.checksum
        sources = row.request.hasMirrors ? row.request.sources : nil
        sourceValidators = row.sourceValidators.isEmpty ? nil : row.sourceValidators
        pieces = row.request.pieces
    }
}

/// A row of a result as ``DownloadRow`` reads it: each column at its place, in the type the
/// table keeps it in. SQLite's are GRDB's `Row`s; PostgreSQL's are read from PostgresNIO's rows
/// as they come (``PostgresColumns``), without making a `Row` of each first.
protocol StoredColumns {
    func int64(at index: Int) throws -> Int64?
    func double(at index: Int) throws -> Double?
    func text(at index: Int) throws -> String?
}

extension Row: StoredColumns {
    // Each read names its type, so that GRDB reads it straight from the statement.
    func int64(at index: Int) -> Int64? { self[index] }
    func double(at index: Int) -> Double? { self[index] }
    func text(at index: Int) -> String? { self[index] }
}
