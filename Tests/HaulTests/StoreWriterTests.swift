import Foundation
import GRDB
import HaulTestSupport
import Synchronization
import Testing
@testable import Haul

/// The group-committing writer: whoever waits for it is woken, whatever arrives meanwhile.
@Suite struct StoreWriterTests {
    func row(_ index: Int) -> DownloadRow {
        DownloadRow(
            id: DownloadID(rawValue: UInt64(index + 1)), queue: "q",
            request: DownloadRequest(url: "http://h.example/f\(index)", file: "/w/f\(index)"))
    }

    /// Waits (boundedly) for `condition`; false when it never held.
    func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<2000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }

    /// The columns' names are written out (reflecting on the enum cost every run's start a few
    /// conformance scans): they stay the cases' names, which are the `download` table's.
    @Test func aPatchsColumnNamesAreTheirCasesNames() {
        #expect(RowPatch.Column.names == RowPatch.Column.allCases.map { "\($0)" })
    }

    @Test func aFlushAskedBetweenTransactionsReturnsWhenAChangeArrivesBehindIt() async throws {
        let store = try Store(inMemory: ())
        let writer = store.writer
        var caughtBetween = 0
        var next = 0
        for round in 0..<20 {
            // Enough rows that the transaction takes a while: once the writer has taken them,
            // nothing is pending and a transaction is under way.
            for _ in 0..<2000 {
                writer.insert(row(next))
                next += 1
            }
            _ = await eventually { writer.pendingCount == 0 }
            // A flush asked now has nothing of its own to wait for but the transaction under
            // way, and a change arriving behind it must not make it wait forever.
            let returned = Mutex(false)
            Task {
                try? await writer.flush()
                returned.withLock { $0 = true }
            }
            if await eventually({ writer.flushWaiters == 1 || returned.withLock { $0 } }), writer.flushWaiters == 1 {
                caughtBetween += 1
            }
            writer.insert(row(next))
            next += 1
            #expect(await eventually { returned.withLock { $0 } }, "round \(round): the flush never returned")
        }
        try await writer.flush()
        #expect(caughtBetween > 0, "the flush never landed between transactions")
        #expect(try await store.fetch("SELECT COUNT(*) AS rows FROM download") { $0["rows"] as Int } == [next])
    }
}

extension StoreWriterTests {
    /// Whoever starts waiting while the writer lingers is served at once, not at the end of
    /// the step (an hour here: without that the test's time limit ends it).
    @Test(.timeLimit(.minutes(1))) func aFlushEndsTheLingerAtOnce() async throws {
        let writer = StoreWriter(database: try SQLiteStoreDatabase(inMemory: ()), linger: .seconds(7200), lingerStep: .seconds(3600))
        writer.insert(row(0))
        // The worker starts lingering meanwhile (before it does, a flush needs no waking).
        try await Task.sleep(for: .milliseconds(100))
        #expect(writer.transactions == 0 && writer.pendingCount == 1)
        try await writer.flush()
        #expect(writer.transactions == 1 && writer.pendingCount == 0)
    }

    /// A touch with no row changed still makes one transaction (what a fleet member publishes
    /// rides on it), after the linger; a second touch before it is written adds none.
    @Test(.timeLimit(.minutes(1))) func aTouchMakesOneTransactionOfItsOwn() async throws {
        let writer = StoreWriter(database: try SQLiteStoreDatabase(inMemory: ()), linger: .milliseconds(50), lingerStep: .milliseconds(5))
        writer.touch()
        writer.touch()
        for _ in 0..<500 where writer.transactions == 0 { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(writer.transactions == 1)
    }

    /// A touch whose transaction fails (the store closed under it) loses no row: the writer has
    /// not failed; a row's write that fails does fail it.
    @Test(.timeLimit(.minutes(1))) func aTouchThatFailsIsNotTheStoresFailure() async throws {
        let writer = StoreWriter(database: Unwritable(), linger: .milliseconds(5), lingerStep: .milliseconds(5))
        writer.touch()
        for _ in 0..<500 where writer.transactions == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(writer.transactions == 1 && writer.failure == nil)
        writer.insert(row(0))
        await #expect(throws: DownloadError.self) { try await writer.flush() }
        #expect(writer.failure != nil)
    }

    @Test func manyWritersAndFlushersAllReturn() async throws {
        let store = try Store(inMemory: ())
        let writer = store.writer
        let finished = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for step in 0..<300 {
                        if step % 3 != 0 { writer.insert(self.row(worker * 1000 + step)) }
                        if step % 7 == 0 { try? await Task.sleep(for: .microseconds(Int.random(in: 0..<15_000))) }
                        try? await writer.flush()
                    }
                    return 1
                }
            }
            return await group.reduce(0, +)
        }
        #expect(finished == 8)
    }

    /// Later changes win column by column; the statement lists exactly the changed columns, in
    /// the order of the values.
    @Test func patchesMergeByColumn() throws {
        var patch = RowPatch.status(.running)
        patch.merge(.ranges(ByteRanges([0..<10])))
        patch.merge(.status(.completed, finishOrder: 7))
        #expect(patch[.status] == DownloadStatus.completed.storedValue.databaseValue)
        #expect(patch[.finishOrder] == 7.databaseValue)
        #expect(patch[.ranges] == ByteRanges([0..<10]).databaseValue)
        #expect(patch[.path] == nil)
        #expect(
            patch.updateSQL
                == "UPDATE download SET status = ?, errorKind = ?, lastError = ?, errorReason = ?, finishOrder = ?, ranges = ?, unsynced = ?, updatedAt = ? WHERE id = ?"
        )
        #expect(
            patch.changedValues == [
                DownloadStatus.completed.storedValue.databaseValue, .null, .null, .null, 7.databaseValue, ByteRanges([0..<10]).databaseValue,
                .null,
            ])
        #expect(RowPatch().isEmpty)
    }

    /// What the writer binds comes back as it went in: text beyond ASCII, whole and fractional
    /// numbers, nothing.
    /// Closing empties the log of a store this process changed (the old copies of its rows, and
    /// their credentials, leave with it), and leaves alone the log of one it only read, which
    /// then holds nothing but GRDB's mark: emptied, the next opening would write it again.
    @Test func closingEmptiesTheLogOfAChangedStoreAndKeepsTheMarkOfAnUnchangedOne() async throws {
        let dir = try TestDirectory()
        defer { dir.remove() }
        let log = dir.file("state/state.sqlite-wal")
        func logSize() -> Int {
            var info = stat()
            return stat(log, &info) == 0 ? Int(info.st_size) : -1
        }
        let changed = try Store(directory: dir.file("state"))
        changed.writer.insert(row(0))
        try await changed.close()
        #expect(logSize() == 0)
        let read = try Store(directory: dir.file("state"))
        #expect(try await read.row(row(0).id) != nil)
        let mark = logSize()
        #expect(mark > 0)
        try await read.close()
        #expect(logSize() == mark)
        // Opened again, the log is not empty: nothing is written, and the mark stays.
        let again = try Store(directory: dir.file("state"))
        #expect(try await again.row(row(0).id) != nil)
        try await again.close()
        #expect(logSize() == mark)
        let changedAgain = try Store(directory: dir.file("state"))
        changedAgain.writer.update(row(0).id, .status(.failed, error: .io("gone"), finishOrder: 1))
        try await changedAgain.close()
        #expect(logSize() == 0)
    }

    @Test func valuesComeBackAsWritten() async throws {
        let store = try Store(inMemory: ())
        let writer = store.writer
        var inserted = row(0)
        inserted.lastError = "before, after: é 🚀"
        writer.insert(inserted)
        try await writer.flush()
        #expect(try await store.row(inserted.id)?.lastError == "before, after: é 🚀")
        writer.update(inserted.id, .status(.failed, error: .io("halfway: ü"), finishOrder: 42))
        writer.update(inserted.id, .finished(path: "/w/ça.bin", bytes: 1 << 40, fileModified: 1_700_000_000.25))
        try await writer.flush()
        let read = try #require(try await store.row(inserted.id))
        #expect(read.lastError == "halfway: ü")
        #expect(read.finishOrder == 42)
        #expect(read.path == "/w/ça.bin")
        #expect(read.resultBytes == 1 << 40)
        #expect(read.fileModified == 1_700_000_000.25)
        #expect(read.totalLength == 1 << 40)
        #expect(read.validators.etag == nil)
    }

    /// A decoder for rows that may hold their columns in any order (PostgreSQL's are made from
    /// dictionaries) finds them in each row, instead of reading one column's value as
    /// another's; SQLite's rows keep the statement's order, and their columns are found once.
    @Test func rowsWhoseColumnsComeInAnyOrderAreReadRight() async throws {
        let store = try Store(inMemory: ())
        #expect(store.database.rowsKeepColumnOrder)
        var written = row(0)
        written.lastError = "halfway"
        written.finishOrder = 7
        store.writer.insert(written)
        store.writer.update(written.id, .finished(path: "/w/f0", bytes: 1234, fileModified: 1_700_000_000.5))
        try await store.writer.flush()
        let columns = DownloadRow.storedColumns
        let forward = "SELECT \(columns.joined(separator: ", ")) FROM download"
        let backward = "SELECT \(columns.reversed().joined(separator: ", ")) FROM download"
        let read = try #require(try await store.fetch(forward, [], DownloadRow.decoder(sameOrder: true)).first)
        #expect(read.id == written.id && read.path == "/w/f0" && read.resultBytes == 1234 && read.lastError == "halfway")
        let anyOrder = DownloadRow.decoder(sameOrder: false)
        #expect(try await store.fetch(forward, [], anyOrder) == [read])
        #expect(try await store.fetch(backward, [], anyOrder) == [read])
    }

    /// A whole row written back (``StoreWriter/insert(_:)`` replaces) keeps the ranges this boot
    /// wrote but did not flush: dropping them would make a rerun fetch them again.
    @Test func aRowWrittenBackKeepsThisBootsWrittenRanges() async throws {
        try #require(BootID.current != nil, "this machine has no boot id")
        let store = try Store(inMemory: ())
        var inserted = row(0)
        inserted.ranges = ByteRanges([0..<100])
        inserted.unsynced = ByteRanges([0..<300])
        store.writer.insert(inserted)
        try await store.writer.flush()
        let read = try #require(try await store.row(inserted.id))
        #expect(read.unsynced == ByteRanges([0..<300]))
        store.writer.insert(read)
        try await store.writer.flush()
        #expect(try await store.row(inserted.id)?.recorded == ByteRanges([0..<300]))
    }

    @Test func anErrorsReasonIsKeptInTheStore() async throws {
        let store = try Store(inMemory: ())
        let inserted = row(1)
        store.writer.insert(inserted)
        store.writer.update(inserted.id, .status(.failed, error: .stalled(after: .seconds(30))))
        try await store.writer.flush()
        let stalled = try #require(try await store.row(inserted.id)?.error)
        #expect(stalled.reason == .stalled && stalled.kind == .network)
        store.writer.update(inserted.id, .status(.failed, error: .io("write to", path: "/w/f", errno: ENOSPC)))
        try await store.writer.flush()
        #expect(try await store.row(inserted.id)?.error?.reason == .diskFull)
        // A message alone says nothing to the mapping: "disk space" in a 404's text is no full disk.
        store.writer.update(inserted.id, .status(.failed, error: .io("no disk space words here, but EIO")))
        try await store.writer.flush()
        #expect(try await store.row(inserted.id)?.error?.reason == nil)
    }

    /// Every column a patch can change is a column of the table.
    @Test func patchColumnsAreTableColumns() {
        for column in RowPatch.Column.allCases { #expect(DownloadRow.storedColumns.contains(column.name)) }
    }
}

/// A file at its final name always has its download's row in the store: a `kill -9` right after
/// the rename must not leave a file no record knows (`haul mirror` would take it for someone
/// else's, and never update or delete it).
@Suite struct RowBeforeFileTests {
    @Test func theRowIsWrittenBeforeTheFileAppears() async throws {
        let server = try await FaultServer.start()
        let harness = try Harness()
        defer { harness.remove() }
        server.serve("/small.bin", Route(content: testBytes(1000, seed: 67)))
        let downloader = try harness.downloader()
        let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 4))
        let path = harness.directory.file("small.bin")
        // As `haul mirror` adds its files: a batch through the manager.
        let added = try await manager.add(contentsOf: [harness.request(server.url("/small.bin"), file: "small.bin")])
        let id = try added[0].get()
        // Look as often as possible until the file is there, then at once at the store.
        var appeared = false
        let deadline = ContinuousClock.now + .seconds(20)
        while !appeared, ContinuousClock.now < deadline {
            appeared = FileManager.default.fileExists(atPath: path)
            if !appeared { await Task.yield() }
        }
        #expect(appeared)
        let row = try await Store(directory: harness.stateDirectory).committedRow(id)
        #expect(row != nil, "the file is at its final name, its row is not in the store")
        await manager.shutdown()
        try await downloader.shutdown()
        try await server.shutdown()
    }
}

extension StoreWriterTests {
    /// A transfer's record of the bytes it wrote does not linger for company: after a `kill -9`,
    /// whatever lingered is fetched again.
    @Test func aPromptChangeIsWrittenWithoutLingering() async throws {
        // A linger no test waits out: only a prompt change can be written within the test.
        let store = try Store(inMemory: (), linger: .seconds(600))
        let writer = store.writer
        writer.insert(row(0))
        writer.insert(row(1))
        // The first transaction lingers, and takes everything pending when it ends: a prompt
        // change cuts it short.
        try await Task.sleep(for: .milliseconds(50))
        #expect(writer.transactions == 0, "a change that did not ask to be prompt was written before its linger")
        writer.update(row(0).id, .unsynced(ByteRanges([0..<10]), boot: "b"), promptly: true)
        #expect(await eventually { writer.transactions == 1 }, "the prompt change lingered")
        #expect(writer.pendingCount == 0)
        // Once written, the writer lingers again for changes that did not ask.
        writer.update(row(1).id, .status(.running))
        try await Task.sleep(for: .milliseconds(50))
        #expect(writer.transactions == 1)
        #expect(writer.pendingCount == 1)
        writer.update(row(1).id, .unsynced(ByteRanges([0..<5]), boot: "b"), promptly: true)
        #expect(await eventually { writer.transactions == 2 })
    }
}

/// A database every write to fails (a store closed, a server gone).
private struct Unwritable: StoreDatabase {
    var location: String { "nowhere" }
    func fetch<T: Sendable>(_ sql: String, _ values: [DatabaseValue], _ decode: @escaping @Sendable (Row) throws -> T) async throws -> [T] { [] }
    func write(_ statements: [StoreStatement]) async throws { throw StoreClosed() }
    func upsertSQL(table: String, columns: [String], key: [String]) -> String { "" }
    func close() async throws {}
    func reason(_ error: any Error) -> String { "the store is closed" }
    func advice(_ error: any Error) -> String { "" }
}
