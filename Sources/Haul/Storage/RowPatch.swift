import Foundation
import GRDB
import Synchronization

/// A change to one row; changes to the same row merge until they are written.
///
/// The columns a change can touch are a fixed set, so a patch is a bit mask and a slot per
/// column: building, merging and writing one costs no hashing, and the UPDATE statement of each
/// set of columns is made once.
struct RowPatch: Sendable {
    enum Column: Int, CaseIterable, Sendable {
        case status, errorKind, lastError, errorReason, finishOrder, path, resultBytes, fileModified, totalLength, etag,
            lastModified, acceptsRanges, ranges, priority, position, request, url, destinationKind, destination, sources,
            unsynced, sourceValidators

        /// The column's name in the `download` table.
        var name: String { Self.names[rawValue] }
        /// Written out, in case order: `"\(case)"` reflects on the enum and looks up a few
        /// protocol conformances, a scan of the binary's 11,000 records each (0.4 ms of every
        /// run's start).
        static let names = [
            "status", "errorKind", "lastError", "errorReason", "finishOrder", "path", "resultBytes", "fileModified", "totalLength",
            "etag", "lastModified", "acceptsRanges", "ranges", "priority", "position", "request", "url", "destinationKind",
            "destination", "sources", "unsynced", "sourceValidators",
        ]
    }

    /// Bit `c.rawValue` is set when column `c` changes.
    private(set) var mask: UInt32 = 0
    /// A value per column (empty until one is set).
    private var values: [DatabaseValue] = []

    var isEmpty: Bool { mask == 0 }

    subscript(column: Column) -> DatabaseValue? {
        mask & (1 << column.rawValue) != 0 ? values[column.rawValue] : nil
    }

    mutating func set(_ column: Column, _ value: (any DatabaseValueConvertible)?) {
        if values.isEmpty { values = Array(repeating: .null, count: Column.allCases.count) }
        values[column.rawValue] = value?.databaseValue ?? .null
        mask |= 1 << column.rawValue
    }

    mutating func merge(_ later: RowPatch) {
        guard mask != 0 else {
            self = later
            return
        }
        var bits = later.mask
        while bits != 0 {
            let column = bits.trailingZeroBitCount
            values[column] = later.values[column]
            bits &= bits - 1
        }
        mask |= later.mask
    }

    /// The changed values, in column order (the order of ``updateSQL``'s placeholders).
    var changedValues: [DatabaseValue] {
        var result: [DatabaseValue] = []
        result.reserveCapacity(mask.nonzeroBitCount + 2)
        var bits = mask
        while bits != 0 {
            result.append(values[bits.trailingZeroBitCount])
            bits &= bits - 1
        }
        return result
    }

    /// The names of the columns of `mask`, in column order.
    static func columnNames(_ mask: UInt32) -> [String] {
        Column.allCases.filter { mask & (1 << $0.rawValue) != 0 }.map(\.name)
    }

    /// `UPDATE download SET a = ?, …, updatedAt = ? WHERE id = ?` for this patch's columns.
    var updateSQL: String {
        if let known = Self.statements.withLock({ $0[mask] }) { return known }
        let columns = Column.allCases.filter { mask & (1 << $0.rawValue) != 0 }
        let sql = "UPDATE download SET " + columns.map { "\($0.name) = ?" }.joined(separator: ", ") + ", updatedAt = ? WHERE id = ?"
        Self.statements.withLock { $0[mask] = sql }
        return sql
    }

    private static let statements = Mutex<[UInt32: String]>([:])

    /// Status, with the error (or none) and the finish order that go with it.
    static func status(_ status: DownloadStatus, error: DownloadError? = nil, finishOrder: Int64? = nil) -> RowPatch {
        var patch = RowPatch()
        patch.set(.status, status.storedValue)
        patch.set(.errorKind, error?.kind.storedValue)
        patch.set(.lastError, error?.message)
        patch.set(.errorReason, error?.reason?.description)
        patch.set(.finishOrder, finishOrder)
        return patch
    }

    /// What a finished transfer leaves: the file, its size and time, and every byte recorded.
    static func finished(path: String, bytes: Int64, fileModified: Double?) -> RowPatch {
        var patch = RowPatch()
        patch.set(.path, path)
        patch.set(.resultBytes, bytes)
        patch.set(.fileModified, fileModified)
        patch.set(.totalLength, bytes)
        patch.set(.ranges, ByteRanges([0..<bytes]))
        patch.set(.unsynced, nil)
        return patch
    }

    /// What the engine knows about the file on the server and on disk.
    static func engine(path: String?, totalLength: Int64?, validators: Validators, acceptsRanges: Bool, ranges: ByteRanges) -> RowPatch {
        var patch = RowPatch()
        patch.set(.path, path)
        patch.set(.totalLength, totalLength)
        patch.set(.etag, validators.etag)
        patch.set(.lastModified, validators.lastModified)
        patch.set(.acceptsRanges, acceptsRanges)
        patch.set(.ranges, ranges)
        patch.set(.unsynced, nil)
        return patch
    }

    /// Each source's validators, by URI (``DownloadRow/sourceValidators``).
    static func sourceValidators(_ validators: [String: Validators]) throws(DownloadError) -> RowPatch {
        var patch = RowPatch()
        do {
            patch.set(.sourceValidators, try DownloadRow.storedSourceValidators(validators))
        } catch {
            throw .io("cannot record the validators of the download's sources: \(error)")
        }
        return patch
    }

    /// Everything recorded of the part file: `ranges`, flushed, and nothing besides.
    static func ranges(_ ranges: ByteRanges) -> RowPatch {
        var patch = RowPatch()
        patch.set(.ranges, ranges)
        patch.set(.unsynced, nil)
        return patch
    }

    /// Bytes flushed to disk (a record of bytes written since, ``unsynced(_:boot:)``, stays).
    static func flushed(_ ranges: ByteRanges) -> RowPatch {
        var patch = RowPatch()
        patch.set(.ranges, ranges)
        return patch
    }

    /// Bytes written to the part file, flushed or not, in the boot `boot` (``BootID``).
    static func unsynced(_ ranges: ByteRanges, boot: String) -> RowPatch {
        var patch = RowPatch()
        patch.set(.unsynced, DownloadRow.storedUnsynced(ranges, boot: boot))
        return patch
    }

    static func order(priority: Int, position: Int64) -> RowPatch {
        var patch = RowPatch()
        patch.set(.priority, priority)
        patch.set(.position, position)
        return patch
    }

    static func request(_ request: DownloadRequest) throws -> RowPatch {
        var patch = RowPatch()
        patch.set(.request, try DownloadRow.storedOptions(of: request))
        patch.set(.url, request.url)
        patch.set(.sources, try DownloadRow.storedSources(of: request))
        patch.set(.destinationKind, request.destination.storedKind)
        patch.set(.destination, request.destination.path)
        return patch
    }
}
