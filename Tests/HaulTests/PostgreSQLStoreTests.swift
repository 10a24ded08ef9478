import Foundation
import HaulTestSupport
import Logging
import PostgresNIO
import Synchronization
import Testing
@testable import Haul

/// The store on a real PostgreSQL server (Debian's `postgresql`, started in a temp folder):
/// every record reads back as SQLite's does, the schema migrates once, daemons share a queue,
/// and a bad URL or an unreachable server is said in one line.
@Suite(.serialized)
struct PostgreSQLStoreTests {
    static func store(_ postgres: PostgresServer, connectTimeout: Int? = nil) throws -> Store {
        let location = try StoreLocation(parsing: postgres.url(connectTimeout: connectTimeout))
        guard case .postgreSQL(let server) = location.kind else { throw DownloadError.io("not a server") }
        return Store(database: PostgreSQLStoreDatabase(server, logger: Logger(label: "test")))
    }

    /// Everything a manager and an upload write, written alike to both stores.
    static func fill(_ store: Store) async throws {
        var request = DownloadRequest(url: "http://a.example/f.bin", file: "/w/f.bin")
        request.sources.append(.init(uri: "http://b.example/f.bin"))
        request.headers = [.init(name: "X-Test", value: "é ünïcode ✓")]
        var first = DownloadRow(id: DownloadID(rawValue: 0xFFFF_0000_0000_0001), queue: "q", request: request)
        first.priority = 2
        first.position = 30
        first.createdAt = Date(timeIntervalSince1970: 1_700_000_000.25)
        var second = DownloadRow(
            id: DownloadID(rawValue: 7), queue: "q", request: DownloadRequest(url: "http://a.example/g.bin", directory: "/w/dir"))
        second.createdAt = first.createdAt
        var other = DownloadRow(id: DownloadID(rawValue: 8), queue: "other", request: DownloadRequest(url: "http://c.example/h", file: "/w/h"))
        other.createdAt = first.createdAt
        for row in [first, second, other] { store.writer.insert(row) }
        store.writer.update(
            first.id,
            .engine(
                path: "/w/f.bin", totalLength: 10 << 20, validators: Validators(etag: "\"e1\"", lastModified: "Tue, 03 Mar 2026 10:00:00 GMT"),
                acceptsRanges: true, ranges: ByteRanges([0..<4096, 8192..<9000])))
        store.writer.update(first.id, try .sourceValidators(["http://b.example/f.bin": Validators(etag: "\"b\"")]))
        store.writer.update(second.id, .status(.failed, error: .io("the disk is full"), finishOrder: 4))
        var finished = RowPatch.finished(path: "/w/h", bytes: 12, fileModified: 1_700_000_123.456789)
        finished.merge(.status(.completed, finishOrder: 5))
        store.writer.update(other.id, finished)
        try await store.flush()
        try await store.saveSettings(["max-concurrent-downloads": "3", "dir": "/w"], queue: "q")
        try await store.removeSettings(["dir"], queue: "q")
        try await store.saveUpload(
            UploadRow(
                file: "/w/u.bin", url: "http://u.example/files", protocol: .tus, location: "http://u.example/files/1",
                ietfInteropVersion: nil, identity: UploadFile.Identity(length: 99, modified: 1_700_000_000.5, sample: "abc"),
                createdAt: Date(timeIntervalSince1970: 1_700_000_000), updatedAt: Date(timeIntervalSince1970: 1_700_000_001)))
        try await store.saveUploadJob(
            UploadJobRow(
                id: DownloadID(rawValue: 9), queue: "q", request: UploadRequest(file: "/w/u.bin", url: "http://u.example/files"),
                status: .queued, priority: 1, position: 3, finishOrder: nil, result: nil, error: nil))
        // Replaced, not added.
        try await store.saveUploadJob(
            UploadJobRow(
                id: DownloadID(rawValue: 9), queue: "q", request: UploadRequest(file: "/w/u.bin", url: "http://u.example/files"),
                status: .paused, priority: 1, position: 3, finishOrder: nil, result: nil, error: nil))
    }

    /// What a manager reads back, as comparable values.
    static func readBack(_ store: Store) async throws -> [String] {
        var lines: [String] = []
        for row in try await store.rows(queue: "q") {
            var row = row
            row.updatedAt = Date(timeIntervalSince1970: 0)
            lines.append("\(row) \(row.request.headers)")
        }
        lines.append("\(try await store.rows(queue: "q", destinations: ["/w/f.bin", "/w/dir", "/w/none"]).map(\.id).sorted())")
        lines.append("\(try await store.row(path: "/w/h").map { ($0.status, $0.resultBytes, $0.fileModified, $0.finishOrder) } as Any)")
        lines.append("\(try await store.counters(queue: "q"))")
        lines.append("\(try await store.counters(queue: "empty"))")
        lines.append("\(try await store.settings(queue: "q"))")
        lines.append("\(try await store.upload(file: "/w/u.bin", url: "http://u.example/files") as Any)")
        lines.append("\(try await store.uploadJobs(queue: "q").jobs)")
        lines.append("\(try await store.committedRow(DownloadID(rawValue: 7))?.error as Any)")
        return lines
    }

    @Test func everyRecordReadsBackAsSQLitesDoes() async throws {
        try await PostgresServer.with { postgres in
            let store = try Self.store(postgres)
            let sqlite = try Store(inMemory: ())
            try await Self.fill(store)
            try await Self.fill(sqlite)
            let fromPostgres = try await Self.readBack(store)
            let fromSQLite = try await Self.readBack(sqlite)
            #expect(fromPostgres == fromSQLite)
            #expect(fromPostgres.first?.contains("é ünïcode ✓") == true, "\(fromPostgres)")

            // Deleted, and gone from both.
            store.writer.delete(DownloadID(rawValue: 7))
            try await store.deleteUpload(file: "/w/u.bin", url: "http://u.example/files")
            try await store.deleteUploadJob(DownloadID(rawValue: 9))
            #expect(try await store.row(DownloadID(rawValue: 7)) == nil)
            #expect(try await store.upload(file: "/w/u.bin", url: "http://u.example/files") == nil)
            #expect(try await store.uploadJobs(queue: "q").jobs.isEmpty)
            try await store.close()
        }
    }

    /// The writer's batches are merged into a few statements on PostgreSQL: thousands of rows
    /// inserted, updated with several sets of columns and deleted read back as SQLite's.
    @Test func aBatchOfThousandsOfRowsReadsBackAsSQLitesDoes() async throws {
        #expect(Set(DownloadRow.storedColumns) == Set(PostgreSQLStoreDatabase.downloadTypes.keys))
        #expect(RowPatch.Column.allCases.allSatisfy { PostgreSQLStoreDatabase.downloadTypes[$0.name] != nil })
        try await PostgresServer.with { postgres in
            let store = try Self.store(postgres)
            let sqlite = try Store(inMemory: ())
            for target in [store, sqlite] {
                for index in 0..<2500 {
                    var row = DownloadRow(
                        id: DownloadID(rawValue: UInt64(index + 1)), queue: "q",
                        request: DownloadRequest(url: "http://a.example/f\(index)", file: "/w/f\(index)"))
                    row.position = Int64(index)
                    row.createdAt = Date(timeIntervalSince1970: 1_700_000_000)
                    target.writer.insert(row)
                }
                try await target.flush()
                for index in 0..<2500 {
                    let id = DownloadID(rawValue: UInt64(index + 1))
                    switch index % 4 {
                    case 0: target.writer.delete(id)
                    case 1: target.writer.update(id, .status(.running))
                    case 2: target.writer.update(id, .finished(path: "/w/f\(index)", bytes: Int64(index), fileModified: 1_700_000_001.5))
                    default:
                        var patch = RowPatch.status(.failed, error: .io("it's \"quoted\" and 'single'"), finishOrder: Int64(index))
                        patch.merge(.ranges(ByteRanges([0..<Int64(index)])))
                        target.writer.update(id, patch)
                    }
                }
                // Some new rows in the same batch as the changes.
                for index in 2500..<2600 {
                    target.writer.insert(
                        DownloadRow(
                            id: DownloadID(rawValue: UInt64(index + 1)), queue: "q",
                            request: DownloadRequest(url: "http://a.example/f\(index)", file: "/w/f\(index)")))
                }
                try await target.flush()
            }
            func normalized(_ rows: [DownloadRow]) -> [DownloadRow] {
                rows.map { row in
                    var row = row
                    row.updatedAt = Date(timeIntervalSince1970: 0)
                    row.createdAt = Date(timeIntervalSince1970: 0)
                    return row
                }.sorted { $0.id.rawValue < $1.id.rawValue }
            }
            let fromPostgres = normalized(try await store.rows(queue: "q"))
            let fromSQLite = normalized(try await sqlite.rows(queue: "q"))
            #expect(fromPostgres.count == 1975)
            #expect(fromPostgres == fromSQLite)
            try await store.close()
        }
    }

    /// How many statements a batch becomes: one a kind (an array a column), not one a row.
    @Test func aWritersBatchBecomesAFewStatements() throws {
        let location = try StoreLocation(parsing: "postgresql://haul@127.0.0.1:1/haul")
        guard case .postgreSQL(let server) = location.kind else { return }
        let database = PostgreSQLStoreDatabase(server, logger: Logger(label: "test"))
        var statements: [StoreStatement] = []
        for index in 0..<6000 { statements.append(StoreStatement("DELETE", [Int64(index).databaseValue], batching: .delete)) }
        let row = try DownloadRow(id: DownloadID(rawValue: 1), queue: "q", request: DownloadRequest(url: "http://a.example/f", file: "/w/f"))
            .storedValues().map { $0?.databaseValue ?? .null }
        for _ in 0..<2500 { statements.append(StoreStatement("INSERT", row, batching: .insert)) }
        let running = RowPatch.status(.running)
        for index in 0..<1500 {
            statements.append(
                StoreStatement("UPDATE", running.changedValues + [Double(0).databaseValue, Int64(index).databaseValue], batching: .update(mask: running.mask)))
        }
        let ranges = RowPatch.ranges(ByteRanges([0..<1]))
        for index in 0..<10 {
            statements.append(
                StoreStatement("UPDATE", ranges.changedValues + [Double(0).databaseValue, Int64(index).databaseValue], batching: .update(mask: ranges.mask)))
        }
        let queries = try database.queries(statements)
        // One statement a kind, an array a column: the same text whatever the batch's size.
        #expect(queries.count == 1 + 1 + 1 + 1)
        #expect(queries.map(\.binds.count) == [1, row.count, running.changedValues.count + 2, ranges.changedValues.count + 2])
        let few = try database.queries(Array(statements[5999..<6001]) + Array(statements[8499..<8501]))
        #expect(few.map(\.sql) == queries.prefix(3).map(\.sql))
        // One statement alone, or one not the writer's, goes as it is.
        #expect(try database.queries([StoreStatement("SELECT ?", [1.databaseValue])]).map(\.sql) == ["SELECT $1"])
    }

    @Test func theSchemaMigratesOnceThoughTwoStoresOpenTogether() async throws {
        try await PostgresServer.with { postgres in
            let stores = try [Self.store(postgres), Self.store(postgres), Self.store(postgres)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { _ = try await store.settings(queue: "q") } }
                try await group.waitForAll()
            }
            let versions = try await stores[0].fetch("SELECT version FROM haul_migration") { $0["version"] as Int64 }
            #expect(versions == [1, 2, 3, 4, 5, 6, 7])
            // The path index holds only the rows that have one (v7).
            let definition = try await stores[0].fetch("SELECT indexdef FROM pg_indexes WHERE indexname = 'download_path'") {
                $0["indexdef"] as String
            }
            #expect(definition.first?.hasSuffix("WHERE (path IS NOT NULL)") == true, "\(definition)")
            for store in stores { try await store.close() }
            // A store opened later finds it done.
            let later = try Self.store(postgres)
            #expect(try await later.counters(queue: "q") == (0, 0))
            try await later.close()
        }
    }

    /// The writer's batches run as statements prepared once on its connection, not parsed and
    /// planned again at every transaction; a placeholder whose first value is NULL keeps the type
    /// its cast names, so a later value of that type is taken.
    @Test func theWritersBatchesRunPreparedOnItsConnection() async throws {
        try await PostgresServer.with { postgres in
            let store = try Self.store(postgres)
            let database = try #require(store.database as? PostgreSQLStoreDatabase)
            let logger = Logger(label: "test")
            for round in 0..<3 {
                for index in 0..<4 {
                    store.writer.insert(Self.row(UInt64(round * 10 + index)))
                }
                try await store.flush()
                for index in 0..<4 { store.writer.update(DownloadID(rawValue: UInt64(round * 10 + index)), .status(.running)) }
                try await store.flush()
            }
            #expect(try await store.rows(queue: "daemon").filter { $0.status == .running }.count == 12)
            let prepared = try await database.writer.use { connection in
                var texts: [String] = []
                for try await text in try await connection.query("SELECT statement FROM pg_prepared_statements", logger: logger)
                    .decode(String.self)
                {
                    texts.append(text)
                }
                return texts
            }
            // The insert and the update, each prepared once though each ran three times.
            #expect(prepared.count == 2, "\(prepared)")
            #expect(prepared.contains { $0.hasPrefix("INSERT INTO download") })
            #expect(prepared.contains { $0.hasPrefix("UPDATE download AS d SET status = v.status") })
            let values = try await database.writer.use { connection in
                var values: [String?] = []
                for value in [nil, "second"] as [String?] {
                    for try await row in try await connection.prepared("SELECT \(value)::text", logger: logger) {
                        values.append(try row.decode(String?.self))
                    }
                }
                return values
            }
            #expect(values == [nil, "second"])
            try await store.close()
        }
    }

    /// A claim runs prepared, and a column added to the table meanwhile (a newer daemon of the
    /// fleet migrated it) does not break it: its result names its columns.
    @Test func aPreparedClaimOutlivesAColumnAddedToTheTable() async throws {
        try await PostgresServer.with { postgres in
            let first = try Self.store(postgres)
            let second = try Self.store(postgres)
            try await first.join("daemon")
            try await second.join("daemon")
            for number in 1...6 {
                var row = Self.row(UInt64(number))
                row.position = Int64(number)
                first.writer.insert(row, pooled: true)
            }
            try await first.flush()
            #expect(try await second.claim(queue: "daemon", limit: 2).map(\.id.rawValue).sorted() == [1, 2])
            #expect(try await second.claim(ids: [DownloadID(rawValue: 3)]).map(\.id.rawValue) == [3])
            _ = try postgres.query("ALTER TABLE download ADD COLUMN newer text")
            #expect(try await second.claim(queue: "daemon", limit: 2).map(\.id.rawValue).sorted() == [4, 5])
            #expect(try await second.claim(ids: [DownloadID(rawValue: 6)]).map(\.id.rawValue) == [6])
            try await first.close()
            try await second.close()
        }
    }

    /// A queue written by a haul of before the fleet (schema v2, one daemon per queue) is the
    /// first joiner's once the schema is brought up to date.
    @Test func aQueueOfBeforeTheFleetIsTheFirstJoinersAfterTheMigration() async throws {
        try await PostgresServer.with { postgres in
            let location = try StoreLocation(parsing: postgres.url())
            guard case .postgreSQL(let server) = location.kind else { throw DownloadError.io("not a server") }
            let logger = Logger(label: "test")
            let old = try await PostgreSQLStoreDatabase.connect(server, logger: logger)
            try await old.query("CREATE TABLE haul_migration (version bigint PRIMARY KEY, appliedAt double precision NOT NULL)", logger: logger)
            for migration in PostgreSQLStoreDatabase.migrations where migration.version <= 2 {
                for statement in migration.statements { try await old.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await old.query("INSERT INTO haul_migration VALUES (\(migration.version), 0)", logger: logger)
            }
            try await old.query(
                "INSERT INTO download (id, queue, url, destinationKind, destination, request, status, createdAt, updatedAt) VALUES (12, 'daemon', 'http://a.example/12', 0, '/w/12', '{}', 0, 0, 0)",
                logger: logger)
            try await old.query(
                "INSERT INTO queueOwner VALUES ('daemon', 'old', 'elsewhere', 'another machine', 4242, 0)", logger: logger)
            // A queue whose daemon of before still runs (its lease holds) stays its until the lease runs out.
            try await old.query(
                "INSERT INTO download (id, queue, url, destinationKind, destination, request, status, createdAt, updatedAt) VALUES (13, 'live', 'http://a.example/13', 0, '/w/13', '{}', 0, 0, 0)",
                logger: logger)
            let future = Date().timeIntervalSince1970 + 60
            try await old.query(
                "INSERT INTO queueOwner VALUES ('live', 'running', 'elsewhere', 'another machine', 4243, \(future))", logger: logger)
            try await old.close()
            let store = try Self.store(postgres)
            do {
                try await store.join("daemon")
                try await store.join("live")
                let owners = try await store.fetch("SELECT id, owner FROM download ORDER BY id") { ($0["id"] as Int64, $0["owner"] as String?) }
                let member = (store.database as? PostgreSQLStoreDatabase)?.member.id
                #expect(owners.map(\.0) == [12, 13])
                #expect(owners.map(\.1) == [member, "running"])
            } catch {
                try? await store.close()
                throw error
            }
            try await store.close()
        }
    }

    static func row(_ id: UInt64, queue: String = "daemon") -> DownloadRow {
        DownloadRow(id: DownloadID(rawValue: id), queue: queue, request: DownloadRequest(url: "http://a.example/\(id)", file: "/w/\(id)"))
    }

    /// A transaction of another connection that runs `sql` (which takes a lock) and holds it
    /// for 1.5 s; close the store once the task is done.
    static func holdingLock(_ postgres: PostgresServer, _ sql: String) throws -> (Store, Task<Void, any Error>) {
        let locker = try store(postgres)
        guard let database = locker.database as? PostgreSQLStoreDatabase else { throw DownloadError.io("not a server") }
        let task = Task {
            try await database.transaction(rows: 0) { connection in
                try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test"))
                try await connection.query("SELECT pg_sleep(1.5)", logger: Logger(label: "test"))
            }
        }
        return (locker, task)
    }

    /// Whether a statement whose text has `text` came to wait for a lock within 3 s.
    static func waitsForALock(_ postgres: PostgresServer, _ text: String) async throws -> Bool {
        for _ in 0..<150 {
            if try postgres.query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%\(text)%'") == "1" {
                return true
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    static func held(_ store: Store, queue: String = "daemon") async throws -> Set<UInt64> {
        Set(try await store.heldRows(queue: queue).map(\.id.rawValue))
    }

    @Test func membersShareAQueueAndEachHoldsTheRowsItWrote() async throws {
        try await PostgresServer.with { postgres in
            let first = try Self.store(postgres)
            let second = try Self.store(postgres)
            try await first.join("daemon")
            try await second.join("daemon")
            first.writer.insert(Self.row(1))
            second.writer.insert(Self.row(2))
            // Another queue of the same database is apart.
            second.writer.insert(Self.row(3, queue: "other"))
            try await first.flush()
            try await second.flush()
            #expect(try await Self.held(first) == [1])
            #expect(try await Self.held(second) == [2])
            #expect(try await first.rows(queue: "daemon").count == 2, "every member sees the whole queue")
            // Both live: nothing to take over.
            #expect(try await first.takeOver("daemon", publishing: "").taken == 0)
            // A member that leaves hands its rows to the next to look, at once.
            try await second.close()
            #expect(try await first.takeOver("daemon", publishing: "").taken == 1)
            #expect(try await Self.held(first) == [1, 2])
            try await first.close()
        }
    }

    /// A host's connections are shared out among the members that want them: never more than
    /// the limit in all, counting the connections a member still has open past its share, an
    /// even split while several want more than they hold, and a member's share is free again
    /// once it has left.
    @Test func theHostsConnectionsAreSharedOutAcrossTheFleet() async throws {
        try await PostgresServer.with { postgres in
            let first = try Self.store(postgres)
            let second = try Self.store(postgres)
            try await first.join("daemon")
            try await second.join("daemon")
            let share = { (store: Store, wanted: [String: (Int, Int)]) in
                try await store.database.shareHosts(
                    "daemon", limit: 4, wanted: wanted.mapValues { HostWant(want: $0.0, open: $0.1) })
            }
            // Alone in wanting: all it asks, up to the limit.
            #expect(try await share(first, ["a": (9, 0), "b": (1, 0)]) == ["a": 4, "b": 1])
            // The other finds nothing free, and says it wants some.
            #expect(try await share(second, ["a": (3, 0), "b": (2, 0)]) == ["a": 0, "b": 2])
            // The first, asking again while the other wants, keeps an even split; but its 4 open
            // connections still count until they end...
            #expect(try await share(first, ["a": (4, 4)]) == ["a": 2])
            #expect(try await share(second, ["a": (3, 0)]) == ["a": 0])
            // ...and once only 2 are open, the other gets the rest, no more.
            #expect(try await share(first, ["a": (4, 2)]) == ["a": 2])
            #expect(try await share(second, ["a": (3, 0)]) == ["a": 2])
            // Given back: a host wanted 0, with nothing open, is free for the other.
            #expect(try await share(first, ["a": (0, 0)]) == ["a": 0])
            #expect(try await share(second, ["a": (3, 2)]) == ["a": 3])
            // A member that left holds nothing.
            try await second.close()
            #expect(try await share(first, ["a": (4, 0), "b": (3, 0)]) == ["a": 4, "b": 3])
            try await first.close()
        }
    }

    /// Rows pooled before their insert was written go to the pool as they are inserted: one
    /// version of each row (the transaction that wrote a row not pooled wrote them too), not an
    /// insert and then an update that adds a second version to every index.
    @Test func rowsPooledBeforeTheirInsertIsWrittenAreInsertedIntoThePool() async throws {
        try await PostgresServer.with { postgres in
            let offering = try Self.store(postgres)
            let claimer = try Self.store(postgres)
            try await offering.join("daemon")
            try await claimer.join("daemon")
            offering.writer.insert(Self.row(1))
            var ids: [DownloadID] = []
            for number in 2...101 {
                var row = Self.row(UInt64(number))
                row.position = Int64(number)
                offering.writer.insert(row)
                ids.append(row.id)
            }
            #expect(offering.writer.pool(ids) == Set(ids))
            #expect(try await Self.held(offering) == [1])
            let transactions = try await offering.fetch("SELECT count(DISTINCT xmin::text) AS n FROM download") { $0["n"] as Int64 }
            #expect(transactions == [1])
            let claimed = try await claimer.claim(queue: "daemon", limit: 200)
            #expect(Set(claimed.map(\.id.rawValue)) == Set(2...101))
            try await claimer.close()
            try await offering.close()
        }
    }

    /// The pool's size is kept as rows go in (pooled inserts, offers) and out (claims, of a batch
    /// or by id), whichever member moves them, and outlives a member that is gone: its count is
    /// folded into its reaper's. A retried pooled insert (its commit's answer lost) counts once.
    @Test func thePoolsSizeIsKeptAsRowsComeAndGo() async throws {
        try await PostgresServer.with { postgres in
            let first = try Self.store(postgres)
            let second = try Self.store(postgres)
            try await first.join("daemon")
            try await second.join("daemon")
            func kept() async throws -> Int64 {
                try await second.fetch("SELECT coalesce(sum(pooled), 0)::bigint AS n FROM fleetPool WHERE queue = 'daemon'") { $0["n"] as Int64 }[0]
            }
            // The kept size, and the pool's rows counted.
            func sizes() async throws -> [Int64] {
                let rows = try await second.fetch("SELECT count(*) AS n FROM download WHERE queue = 'daemon' AND owner = ''") { $0["n"] as Int64 }
                return [try await kept(), rows[0]]
            }
            var offered: [DownloadID] = []
            for number in 1...15 {
                var row = Self.row(UInt64(number))
                row.position = Int64(number)
                first.writer.insert(row, pooled: number <= 10)
                if number > 10 { offered.append(row.id) }
            }
            // Another queue's pool is apart.
            first.writer.insert(Self.row(99, queue: "other"), pooled: true)
            try await first.flush()
            try await first.offer(offered)
            #expect(try await sizes() == [15, 15])
            #expect(try await second.claim(queue: "daemon", limit: 6).count == 6)
            #expect(try await second.claim(ids: [DownloadID(rawValue: 14), DownloadID(rawValue: 1)]).count == 1)
            #expect(try await sizes() == [8, 8])
            // The same pooled insert again (as a transaction tried again after its commit would).
            let database = try #require(first.database as? PostgreSQLStoreDatabase)
            var again = Self.row(12)
            again.position = 12
            let values = try again.storedValues().map { $0?.databaseValue ?? .null } + ["".databaseValue]
            try await database.transaction([PostgreSQLStoreDatabase.pooledInsert([values])], rows: 1)
            #expect(try await kept() == 8)
            // The first leaves; the second reaps it at its next look and keeps its count.
            try await first.close()
            for _ in 0..<50 where try await second.fetch("SELECT count(*) AS n FROM fleetMember") { $0["n"] as Int64 } != [1] {
                _ = try await second.takeOver("daemon", publishing: "")
                try await Task.sleep(for: .milliseconds(100))
            }
            let members = try await second.fetch("SELECT member FROM fleetPool WHERE queue = 'daemon'") { $0["member"] as String }
            #expect(members.count == 1, "\(members)")
            #expect(try await sizes() == [8, 8])
            #expect(try await second.claim(queue: "daemon", limit: 100).count == 8)
            #expect(try await kept() == 0)
            try await second.close()
        }
    }

    /// A member alone lets as many finished downloads wait to be put in place as one daemon on
    /// SQLite does (held to `-j`, one daemon on PostgreSQL took 5.0 s for 20,000 small files
    /// instead of 4.1 s); `-j` from the look that finds another member live, whose taking over
    /// after a kill would fetch them again.
    @Test func aMemberAloneBoundsWhatWaitsToBePutInPlaceAsOneDaemonDoes() async throws {
        try await PostgresServer.with { postgres in
            let dir = try TestDirectory()
            defer { dir.remove() }
            var configuration = Downloader.Configuration(stateDirectory: dir.file("state"))
            configuration.store = try StoreLocation(parsing: postgres.url())
            let downloader = try Downloader(configuration)
            let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 3, queue: "daemon"))
            try await manager.restore()
            #expect(await manager.maxCommitting == DownloadBook.maxCommitting)
            let other = try Self.store(postgres)
            try await other.join("daemon")
            await manager.takeOver()
            #expect(await manager.maxCommitting == 3)
            await manager.shutdown()
            try await downloader.shutdown()
            try await other.close()
        }
    }

    /// The URL of a download that holds a slot for 30 s without a byte (nothing of it to save
    /// when it stops), served by `server`.
    static func slotHolder(_ server: FaultServer) -> String {
        var slow = Route(content: testBytes(1 << 10, seed: 7))
        slow.answerDelay = .seconds(30)
        server.serve("/slow.bin", slow)
        return server.url("/slow.bin")
    }

    /// A fleet of two on queue "daemon": a store joined, and a manager (`-j 1`) through which
    /// downloads of `urls` were just added.
    static func listAddedThroughAMemberOfTwo(
        _ postgres: PostgresServer, _ dir: TestDirectory, urls: [String]
    ) async throws -> (other: Store, downloader: Downloader, manager: DownloadManager, added: [Result<DownloadID, DownloadError>]) {
        let other = try Self.store(postgres)
        try await other.join("daemon")
        var configuration = Downloader.Configuration(stateDirectory: dir.file("state"))
        configuration.store = try StoreLocation(parsing: postgres.url())
        let downloader = try Downloader(configuration)
        let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 1, queue: "daemon"))
        try await manager.restore()
        let requests = urls.map { DownloadRequest(url: $0, directory: dir.file("downloads")) }
        return (other, downloader, manager, try await manager.add(contentsOf: requests))
    }

    /// A list added through one member of a fleet keeps `8 × -j` downloads there, and its own
    /// share of the rest (one in every live member's count); the others go to the pool as their
    /// rows are inserted: no row is written a second time to offer it (every update of a row adds
    /// an entry to each of the table's indexes).
    @Test func aListAddedThroughOneMemberGoesToThePoolAsItIsInserted() async throws {
        try await PostgresServer.with { postgres in
            let dir = try TestDirectory()
            defer { dir.remove() }
            // Nothing listens there: a download that starts fails, its row written again.
            let urls = (0..<300).map { "http://127.0.0.1:9/f\($0).bin" }
            let (other, downloader, manager, added) = try await Self.listAddedThroughAMemberOfTwo(postgres, dir, urls: urls)
            #expect(added.allSatisfy { (try? $0.get()) != nil })
            // A kill costs the fleet at most the `-j` transferring and the `-j` being put in place.
            #expect(await manager.maxCommitting == 1)
            await manager.shutdown()
            try await downloader.shutdown()
            let pooled = try await other.fetch("SELECT count(*) AS n FROM download WHERE owner = ''") { $0["n"] as Int64 }
            // Two members: one in two of those past the 8 kept ready stays as this member's share.
            #expect(pooled == [(300 - 8) / 2])
            // The server's count of the table's inserts and updates, once the member's sessions
            // have ended (each reports its counts as it ends).
            var counts: (inserted: Int64, updated: Int64) = (0, 0)
            for _ in 0..<100 {
                let rows = try await other.fetch("SELECT n_tup_ins AS i, n_tup_upd AS u FROM pg_stat_user_tables WHERE relname = 'download'") {
                    ($0["i"] as Int64, $0["u"] as Int64)
                }
                counts = rows.first ?? (0, 0)
                if counts.inserted >= 300 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(counts.inserted == 300)
            #expect(counts.updated < 100, "rows offered by an update after their insert: \(counts.updated) updates")
            try await other.close()
        }
    }

    /// The share of a list that the member it was added through kept goes to the pool once the
    /// pool is empty (the other members ran out of work first), but for the `4 × -j` it keeps
    /// ready.
    @Test func theShareKeptByTheAddingMemberIsOfferedOnceThePoolIsEmpty() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                // The first holds the one slot; none of the others starts.
                let urls = [Self.slotHolder(server)] + (1..<300).map { server.url("/f\($0).bin") }
                let (other, downloader, manager, _) = try await Self.listAddedThroughAMemberOfTwo(postgres, dir, urls: urls)
                await manager.settleOffers()
                func pooled() async throws -> Int64 {
                    try await other.fetch("SELECT count(*) AS n FROM download WHERE owner = ''") { $0["n"] as Int64 }.first ?? -1
                }
                #expect(try await pooled() == 146)
                // The look that finds the pool empty offers what is past the 4 kept ready: the 154
                // kept, less the one running and the 4.
                let claimed = try await other.claim(queue: "daemon", limit: 1000).count
                let table = try postgres.query("SELECT owner, status, count(*) FROM download GROUP BY 1, 2")
                #expect(claimed == 146, "claimed \(claimed); \(table)")
                await manager.takeOver()
                await manager.settleOffers()
                #expect(try await pooled() == 149)
                await manager.shutdown()
                try await downloader.shutdown()
                try await other.close()
            }
        }
    }

    /// A member of queue "daemon" that put rows 1 through `count` in the pool, in that order.
    static func memberPooling(_ count: Int, _ postgres: PostgresServer) async throws -> Store {
        let member = try Self.store(postgres)
        try await member.join("daemon")
        for number in 1...count {
            var row = Self.row(UInt64(number))
            row.position = Int64(number)
            member.writer.insert(row, pooled: true)
        }
        try await member.flush()
        return member
    }

    /// `pauseAll()` while a claim from the pool is on its way (here held up by a lock on the
    /// table): the rows the claim brings in arrive paused, as the whole queue is, and none starts.
    @Test func aClaimThatPauseAllOvertookAdmitsItsDownloadsPaused() async throws {
        try await PostgresServer.with { postgres in
            let dir = try TestDirectory()
            defer { dir.remove() }
            let other = try await Self.memberPooling(20, postgres)
            // Writes to the table wait for this transaction; reads do not.
            let (locker, lock) = try Self.holdingLock(postgres, "LOCK TABLE download IN SHARE MODE")
            var configuration = Downloader.Configuration(stateDirectory: dir.file("state"))
            configuration.store = try StoreLocation(parsing: postgres.url())
            let downloader = try Downloader(configuration)
            let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 1, queue: "daemon"))
            let restoring = Task { try await manager.restore() }
            #expect(try await Self.waitsForALock(postgres, "SKIP LOCKED"), "a claim waiting for the lock")
            await manager.pauseAll()
            try await lock.value
            try await restoring.value
            // The claim took the first four in queue order (`4 × -j`). Those claimed after the
            // pause may run: the daemon's pauseAll claims the whole pool first.
            var claimed: [DownloadManager.Download] = []
            for _ in 0..<100 where claimed.count < 4 {
                try await Task.sleep(for: .milliseconds(20))
                claimed = await manager.downloads().filter { $0.id.rawValue <= 4 }
            }
            #expect(claimed.count == 4 && claimed.allSatisfy { $0.status == .paused }, "\(claimed.map(\.status))")
            await manager.shutdown()
            try await downloader.shutdown()
            try await locker.close()
            try await other.close()
        }
    }

    /// `claimPool()`, with which a daemon's `pauseAll` takes the pool first, admits what it
    /// claims paused: queued, those past the `4 × -j` this member keeps ready would be its
    /// surplus, offered back to the pool before the pause reached them (and left waiting there
    /// while the rest of the queue is paused).
    @Test func thePoolClaimedToPauseTheQueueComesInPaused() async throws {
        try await PostgresServer.with { postgres in
            let dir = try TestDirectory()
            defer { dir.remove() }
            let other = try await Self.memberPooling(40, postgres)
            var configuration = Downloader.Configuration(stateDirectory: dir.file("state"))
            configuration.store = try StoreLocation(parsing: postgres.url())
            let downloader = try Downloader(configuration)
            let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 1, queue: "daemon"))
            // The restore claims the first four (`4 × -j`), queued.
            try await manager.restore()
            try await manager.claimPool()
            await manager.settleOffers()
            let pooled = try await other.fetch("SELECT count(*) AS n FROM download WHERE owner = ''") { $0["n"] as Int64 }
            #expect(pooled == [0])
            let downloads = await manager.downloads()
            let claimedToPause = downloads.filter { $0.id.rawValue > 4 }
            #expect(downloads.count == 40 && claimedToPause.allSatisfy { $0.status == .paused }, "\(downloads.map(\.status))")
            await manager.shutdown()
            try await downloader.shutdown()
            try await other.close()
        }
    }

    /// `pauseAll()` returns once the offer under way has put its rows in the pool (here held up
    /// by a lock on one of them): the daemon's pauseAll then claims them back, and none is left
    /// waiting there while the rest of the queue is paused.
    @Test func pauseAllReturnsOnceTheOfferUnderWayIsInThePool() async throws {
        try await PostgresServer.with { postgres in
            try await FaultServer.withServer { server in
                let dir = try TestDirectory()
                defer { dir.remove() }
                let slow = Self.slotHolder(server)
                var configuration = Downloader.Configuration(stateDirectory: dir.file("state"))
                configuration.store = try StoreLocation(parsing: postgres.url())
                let downloader = try Downloader(configuration)
                let manager = DownloadManager(downloader: downloader, configuration: .init(maxConcurrentDownloads: 1, queue: "daemon"))
                try await manager.restore()
                // Alone, it keeps them all: the slow one runs, the others wait.
                let urls = [slow] + (1..<40).map { server.url("/q\($0).bin") }
                let added = try await manager.add(contentsOf: urls.map { DownloadRequest(url: $0, directory: dir.file("downloads")) })
                let last = try #require(try added.last?.get())
                for _ in 0..<100 where try postgres.query("SELECT count(*) FROM download") != "40" {
                    try await Task.sleep(for: .milliseconds(20))
                }
                let (locker, lock) = try Self.holdingLock(postgres, "SELECT id FROM download WHERE id = \(last.storedValue) FOR UPDATE")
                // Another member joins: the first offers its surplus, and the offer waits for the lock.
                let other = try Self.store(postgres)
                try await other.join("daemon")
                #expect(try await Self.waitsForALock(postgres, "offered"), "an offer waiting for the lock")
                await manager.pauseAll()
                let pooled = try postgres.query("SELECT count(*) FROM download WHERE owner = ''")
                #expect(Int(pooled) ?? 0 > 0, "offered when pauseAll returned: \(pooled)")
                try await lock.value
                await manager.shutdown()
                try await downloader.shutdown()
                try await locker.close()
                try await other.close()
            }
        }
    }

    /// Downloads one member offers are claimed by the others in queue order, each by one member
    /// only, however many claim at once; a member that left is no longer counted as live.
    @Test func offeredDownloadsAreClaimedInQueueOrderEachByOneMember() async throws {
        try await PostgresServer.with { postgres in
            let offering = try Self.store(postgres)
            try await offering.join("daemon")
            var ids: [DownloadID] = []
            for number in 1...200 {
                var row = Self.row(UInt64(1000 + number))
                row.position = Int64(number)
                row.priority = number == 150 ? 5 : 0
                offering.writer.insert(row)
                ids.append(row.id)
            }
            let claimers = try [Self.store(postgres), Self.store(postgres)]
            for claimer in claimers { try await claimer.join("daemon") }
            let look = try await offering.takeOver("daemon", publishing: "")
            #expect(look.taken == 0 && look.others == 2 && look.members.count == 3)
            try await offering.offer(ids)
            #expect(try await Self.held(offering).isEmpty)
            // The first claimed is the one of the highest priority, then positions in order.
            let first = try await claimers[0].claim(queue: "daemon", limit: 3)
            #expect(first.map(\.id.rawValue).sorted() == [1001, 1002, 1150])
            let batches = try await withThrowingTaskGroup(of: [DownloadRow].self) { group in
                for claimer in claimers {
                    group.addTask {
                        var claimed: [DownloadRow] = []
                        for _ in 0..<40 { claimed += try await claimer.claim(queue: "daemon", limit: 7) }
                        return claimed
                    }
                }
                return try await group.reduce(into: [[DownloadRow]]()) { $0.append($1) }
            }
            let claimed = batches.flatMap { $0 }.map(\.id.rawValue) + first.map(\.id.rawValue)
            #expect(claimed.count == 200 && Set(claimed).count == 200, "each claimed once: \(claimed.count)")
            #expect(try await Self.held(claimers[0]).count + Self.held(claimers[1]).count == 200)
            #expect(try await claimers[0].claim(queue: "daemon", limit: 7).isEmpty)
            try await claimers[1].close()
            #expect(try await offering.takeOver("daemon", publishing: "").others == 1)
            try await claimers[0].close()
            try await offering.close()
        }
    }

    /// A member's row as another machine's daemon would have left it, owning `rows`.
    static func setMember(
        _ store: Store, queue: String = "daemon", host: String, machine: String = "another machine", pid: Int64,
        leaseLeft seconds: Double, owning rows: [UInt64] = []
    ) async throws {
        var statements = [
            StoreStatement(
                "INSERT INTO fleetMember (queue, member, host, machine, pid, leaseUntil, joinedAt) VALUES (?, ?, ?, ?, ?, ?, 0) ON CONFLICT (queue, member) DO UPDATE SET host = EXCLUDED.host, machine = EXCLUDED.machine, pid = EXCLUDED.pid, leaseUntil = EXCLUDED.leaseUntil",
                [
                    queue.databaseValue, "elsewhere-member".databaseValue, host.databaseValue, machine.databaseValue, pid.databaseValue,
                    (Date().timeIntervalSince1970 + seconds).databaseValue,
                ])
        ]
        for id in rows {
            statements.append(
                StoreStatement("UPDATE download SET owner = 'elsewhere-member' WHERE id = ?", [DownloadID(rawValue: id).storedValue.databaseValue]))
        }
        try await store.write(statements)
    }

    @Test func anotherMachinesDownloadsAreTakenOverOnlyOnceItsLeaseRanOut() async throws {
        try await PostgresServer.with { postgres in
            let admin = try Self.store(postgres)
            admin.writer.insert(Self.row(4))
            try await admin.flush()
            try await Self.setMember(admin, host: "elsewhere", pid: 4242, leaseLeft: 25, owning: [4])
            let store = try Self.store(postgres)
            try await store.join("daemon")
            #expect(try await Self.held(store).isEmpty)
            #expect(try await store.takeOver("daemon", publishing: "").taken == 0)
            try await Self.setMember(admin, host: "elsewhere", pid: 4242, leaseLeft: -1)
            #expect(try await store.takeOver("daemon", publishing: "").taken == 1)
            #expect(try await Self.held(store) == [4])
            // The member is gone from the queue.
            let members = try await admin.fetch("SELECT count(*) AS n FROM fleetMember WHERE member = 'elsewhere-member'") { $0["n"] as Int64 }
            #expect(members == [0])
            try await store.close()
            try await admin.close()
        }
    }

    @Test func aGoneProcessOfThisMachineIsTakenOverAtOnce() async throws {
        try await PostgresServer.with { postgres in
            let gone = Process()
            gone.executableURL = URL(fileURLWithPath: "/bin/true")
            try gone.run()
            gone.waitUntilExit()
            let admin = try Self.store(postgres)
            admin.writer.insert(Self.row(5))
            try await admin.flush()
            // Same name, another machine (a container's pid namespace, say): its pid means nothing here.
            try await Self.setMember(admin, host: FleetMember.machineName, pid: Int64(gone.processIdentifier), leaseLeft: 25, owning: [5])
            let store = try Self.store(postgres)
            try await store.join("daemon")
            #expect(try await Self.held(store).isEmpty)
            // This machine: the pid is gone, so is its daemon; joining takes its rows.
            try await Self.setMember(
                admin, host: FleetMember.machineName, machine: FleetMember.machineIdentity, pid: Int64(gone.processIdentifier), leaseLeft: 25)
            let later = try Self.store(postgres)
            try await later.join("daemon")
            #expect(try await Self.held(later) == [5])
            try await later.close()
            try await store.close()
            try await admin.close()
        }
    }

    /// A gone member's rows all go to one heir, over as many batches as they take, however many
    /// members look at once: a download and the one it depends on stay together.
    @Test func aGoneMembersRowsAllGoToOneHeir() async throws {
        try await PostgresServer.with { postgres in
            let admin = try Self.store(postgres)
            let count = PostgreSQLStoreDatabase.reapBatch + 50
            for number in 1...count { admin.writer.insert(Self.row(UInt64(100_000 + number))) }
            try await admin.flush()
            try await admin.write([StoreStatement("UPDATE download SET owner = 'elsewhere-member' WHERE queue = 'daemon'")])
            try await Self.setMember(admin, host: "elsewhere", pid: 4242, leaseLeft: -1)
            let heirs = try [Self.store(postgres), Self.store(postgres)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for heir in heirs { group.addTask { try await heir.join("daemon") } }
                try await group.waitForAll()
            }
            for heir in heirs { _ = try await heir.takeOver("daemon", publishing: "") }
            let held = try await [Self.held(heirs[0]).count, Self.held(heirs[1]).count]
            #expect(held.sorted() == [0, count], "\(held)")
            let members = try await admin.fetch("SELECT count(*) AS n FROM fleetMember WHERE member = 'elsewhere-member'") { $0["n"] as Int64 }
            #expect(members == [0], "removed once its rows were all taken")
            for heir in heirs { try await heir.close() }
            try await admin.close()
        }
    }

    /// The fleet's counts add up what each live member's manager published with its last
    /// transaction, not its rows (a poll once counted the whole table), and count the rows of a
    /// member that published nothing.
    @Test func theFleetsCountsAreWhatItsMembersPublishedAndTheRowsOfThoseThatDidNot() async throws {
        try await PostgresServer.with { postgres in
            let dir = try TestDirectory()
            defer { dir.remove() }
            let managers = try (0..<2).map { index in
                DownloadManager(
                    downloader: Downloader(.init(stateDirectory: dir.file("state-\(index)")), store: try Self.store(postgres)),
                    configuration: .init(queue: "daemon"))
            }
            for manager in managers { try await manager.restore() }
            // A member with no manager: it publishes nothing; its two rows are counted as rows.
            let bare = try Self.store(postgres)
            try await bare.join("daemon")
            bare.writer.insert(Self.row(1))
            bare.writer.insert(Self.row(2))
            try await bare.flush()
            _ = try await managers[0].add(
                contentsOf: (1...3).map { DownloadRequest(url: "http://a.example/\($0)", file: dir.file("f\($0)")) }, paused: true)
            var totals = try await managers[1].fleetTotals()
            let deadline = ContinuousClock.now + .seconds(10)
            while (totals.paused, totals.queued) != (3, 2), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                totals = try await managers[1].fleetTotals()
            }
            #expect((totals.paused, totals.queued) == (3, 2), "\(totals)")
            // Every row now says completed: the first manager's three are still counted as it
            // published them; the bare member's two as their rows say.
            try await bare.write([StoreStatement("UPDATE download SET status = \(DownloadStatus.completed.storedValue), resultBytes = 5")])
            totals = try await managers[1].fleetTotals()
            #expect((totals.paused, totals.queued, totals.completed, totals.bytesDone) == (3, 0, 2, 10), "\(totals)")
            // Counts published by another version, shorter than these: what is missing reads as 0.
            let bareID = try #require(bare.database.memberIdentity?.id)
            try await bare.write([StoreStatement("UPDATE fleetMember SET counts = '[1]' WHERE member = ?", [bareID.databaseValue])])
            totals = try await managers[1].fleetTotals()
            #expect((totals.paused, totals.queued, totals.completed) == (3, 1, 0), "\(totals)")
            for manager in managers {
                await manager.shutdown()
                try await manager.downloader.shutdown()
            }
            try await bare.close()
        }
    }

    /// A member cut off in the middle of a transaction holds its row's lock: it is skipped, not
    /// waited for, and taken over once that transaction ends.
    @Test func aMemberLockedByAnOpenTransactionIsSkippedNotWaitedFor() async throws {
        try await PostgresServer.with { postgres in
            let location = try StoreLocation(parsing: postgres.url())
            guard case .postgreSQL(let server) = location.kind else { throw DownloadError.io("not a server") }
            let admin = try Self.store(postgres)
            admin.writer.insert(Self.row(6))
            try await admin.flush()
            try await Self.setMember(admin, host: "elsewhere", pid: 4242, leaseLeft: -1, owning: [6])
            try await admin.close()
            // Another session, mid-transaction, holding the row.
            let holder = try await PostgreSQLStoreDatabase.connect(server, logger: Logger(label: "test"))
            try await holder.query("BEGIN", logger: Logger(label: "test"))
            try await holder.query("SELECT * FROM fleetMember WHERE member = 'elsewhere-member' FOR UPDATE", logger: Logger(label: "test"))
            let store = try Self.store(postgres)
            let started = ContinuousClock.now
            try await store.join("daemon")
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(try await Self.held(store).isEmpty)
            try await holder.query("ROLLBACK", logger: Logger(label: "test"))
            try await holder.close()
            #expect(try await store.takeOver("daemon", publishing: "").taken == 1)
            try await store.close()
        }
    }

    /// A daemon whose lease ran out while it was paused (or cut off) and whose downloads were
    /// taken over writes nothing more: its next transaction finds its membership gone and the
    /// store fails, saying so.
    @Test func aStoreWhoseDownloadsWereTakenOverWritesNothingMore() async throws {
        try await PostgresServer.with { postgres in
            let store = try Self.store(postgres)
            try await store.join("daemon")
            store.writer.insert(Self.row(11))
            try await store.flush()
            let admin = try Self.store(postgres)
            // Its lease ran out; another member took over.
            try await admin.write([StoreStatement("UPDATE fleetMember SET leaseUntil = 1 WHERE queue = 'daemon'")])
            let other = try Self.store(postgres)
            try await other.join("daemon")
            #expect(try await Self.held(other) == [11])
            store.writer.update(DownloadID(rawValue: 11), .status(.failed, error: .io("late"), finishOrder: 9))
            let failed = await #expect(throws: DownloadError.self) { try await store.flush() }
            #expect(failed?.message.contains("another haul daemon took over this one's downloads of the queue daemon") == true, "\(String(describing: failed))")
            #expect(failed?.message.contains("restart this daemon to join the queue again") == true, "\(String(describing: failed))")
            #expect(try await admin.row(DownloadID(rawValue: 11))?.status == .queued, "not written")
            // Nor anything after.
            let again = await #expect(throws: DownloadError.self) { try await store.saveSettings(["a": "b"], queue: "daemon") }
            #expect(again?.message.contains("took over this one's downloads") == true)
            try? await store.close()
            try await other.close()
            try await admin.close()
        }
    }

    @Test func aServerThatIsNotThereIsSaidInOneLine() async throws {
        let port = try await PostgresServer.with { $0.port }
        let location = try StoreLocation(parsing: "postgresql://haul@127.0.0.1:\(port)/haul?sslmode=disable&connect_timeout=1")
        guard case .postgreSQL(let server) = location.kind else { return }
        let store = Store(database: PostgreSQLStoreDatabase(server, logger: Logger(label: "test")))
        let started = ContinuousClock.now
        let error = await #expect(throws: DownloadError.self) { try await store.rows(queue: "q") }
        #expect(ContinuousClock.now - started < .seconds(20))
        let message = error?.message ?? ""
        #expect(message.contains("postgresql://haul@127.0.0.1:\(port)/haul"), "\(message)")
        #expect(message.contains("refused"), "\(message)")
        #expect(!message.contains("\n"))
        try? await store.close()
    }

    /// A server that stops answering without closing anything (its machine hangs): each attempt
    /// ends after the connect timeout and is tried again on a new connection; the write fails
    /// when the store's window does, with one line, instead of waiting forever.
    @Test func aServerGoneSilentIsGivenUpAfterTheWindow() async throws {
        try await PostgresServer.with { postgres in
            let store = try Self.store(postgres, connectTimeout: 1)
            try await store.saveSettings(["a": "1"], queue: "q")
            postgres.signal(SIGSTOP)
            let started = ContinuousClock.now
            let error = await #expect(throws: DownloadError.self) { try await store.saveSettings(["a": "2"], queue: "q") }
            let took = ContinuousClock.now - started
            postgres.signal(SIGCONT)
            #expect(took >= .seconds(3) && took < .seconds(15), "\(took)")
            // The statement went unanswered for the connect timeout, then each new connection did.
            let message = error?.message ?? ""
            #expect(message.contains("connecting timed out") || message.contains("the server did not answer for 1 s"), "\(message)")
            #expect(!message.contains("\n"))
            // Back: the next statement is answered on a new connection.
            try await store.saveSettings(["a": "3"], queue: "q")
            #expect(try await store.settings(queue: "q") == ["a": "3"])
            try await store.close()
        }
    }

    /// A statement's timer that wakes well after it was due slept through a pause of this
    /// process (here a sleep that wakes 500 ms late, as after `SIGSTOP` and `SIGCONT`): the answer
    /// that comes right after the wake-up is taken, not a timeout reported.
    @Test func aStatementsTimerThatWakesLateGivesTheAnswerItsTimeAgain() async throws {
        try await PostgresServer.with { postgres in
            let location = try StoreLocation(parsing: postgres.url())
            guard case .postgreSQL(let server) = location.kind else { return }
            let connection = try await PostgreSQLStoreDatabase.connect(server, logger: Logger(label: "test"))
            let woken = AsyncStream.makeStream(of: Void.self)
            let late: @Sendable (ContinuousClock.Instant) async throws -> Void = { due in
                try await Task.sleep(until: due + .milliseconds(500), clock: .continuous)
                woken.continuation.yield()
            }
            let answer: Result<Int?, any Error>
            do {
                answer = .success(
                    try await PostgreSQLConnectionSlot.answered(connection, within: .seconds(1), sleep: late) { connection in
                        // Sent before the pause; answered once the process runs again.
                        for await _ in woken.stream { break }
                        return try await connection.query("SELECT 7", logger: Logger(label: "test")).collect().first?.decode(Int.self)
                    })
            } catch {
                answer = .failure(error)
            }
            try? await connection.close()
            #expect(try answer.get() == 7)
        }
    }

    /// A process paused past the store's window in the middle of its first attempt (its
    /// connection closed meanwhile) tries the statement again once awake instead of failing it.
    @Test func aFirstAttemptThatEndsPastTheWindowIsTriedAgain() async throws {
        try await PostgresServer.with { postgres in
            let location = try StoreLocation(parsing: postgres.url(connectTimeout: 1))
            guard case .postgreSQL(let server) = location.kind else { return }
            let database = PostgreSQLStoreDatabase(server, logger: Logger(label: "test"))
            // Past the 3 s window; its timer wakes late (a pause), the statement then fails.
            let slot = PostgreSQLConnectionSlot(
                connect: { try await PostgreSQLStoreDatabase.connect(server, logger: Logger(label: "test")) }, exclusive: false,
                sleep: { due in try await Task.sleep(until: due + .milliseconds(3500), clock: .continuous) })
            let attempts = Mutex(0)
            let answer: Result<Int?, any Error>
            do {
                answer = .success(
                    try await database.retrying(on: slot, rows: 1) { connection in
                        if attempts.withLock({
                            $0 += 1; return $0
                        }) == 1 {
                            try await Task.sleep(for: .milliseconds(4700))
                            throw StoreTimeout(seconds: 1)
                        }
                        return try await connection.query("SELECT 8", logger: Logger(label: "test")).collect().first?.decode(Int.self)
                    })
            } catch {
                answer = .failure(error)
            }
            await slot.close()
            try await database.close()
            #expect(try answer.get() == 8)
            #expect(attempts.withLock { $0 } == 2)
        }
    }

    @Test(arguments: [
        ("mysql://u@h/db", "only postgresql:// is known"),
        ("postgresql://u@h:99999/db", "out of range"),
        ("postgresql://u@h/db?sslmode=allow", "sslmode allow"),
        ("postgresql://u@h/db/x", "a database name has no /"),
        ("postgresql://u@h/db?connect_timeout=0", "connect_timeout 0"),
    ])
    func aBadStoreURLIsSaidInOneLine(url: String, says: String) throws {
        let error = #expect(throws: DownloadError.self) { try StoreLocation(parsing: url) }
        #expect(error?.kind == .invalidRequest)
        #expect(error?.message.contains(says) == true, "\(String(describing: error?.message))")
    }

    @Test func aStoreURLShowsNoPassword() throws {
        let location = try StoreLocation(parsing: "postgres://haul:s3cret@db.example:6543/queue?sslmode=require")
        #expect("\(location)" == "postgresql://haul@db.example:6543/queue")
        guard case .postgreSQL(let server) = location.kind else { return }
        #expect(server.password == "s3cret" && server.sslMode == "require")
        let error = #expect(throws: DownloadError.self) { try StoreLocation(parsing: "postgresql://haul:s3cret@h/db?sslmode=bad") }
        #expect(error?.message.contains("s3cret") == false, "\(String(describing: error?.message))")
        let socket = try StoreLocation(parsing: "postgresql://haul@%2Fvar%2Frun%2Fpostgresql/haul")
        #expect("\(socket)" == "postgresql://haul@[/var/run/postgresql]/haul")
        // No host: libpq's socket folder.
        #expect("\(try StoreLocation(parsing: "postgresql://haul@/queue"))" == "postgresql://haul@[/var/run/postgresql]/queue")
        // A password with an @ of its own, or given as a parameter, is not shown either.
        #expect(StoreLocation.redacted("postgresql://u:p@ss/w@h/db?sslmode=bad") == "postgresql://u:***@h/db?sslmode=bad")
        #expect(StoreLocation.redacted("postgresql://u:pa?ss@h/db") == "postgresql://u:***@h/db")
        let leaky = #expect(throws: DownloadError.self) { try StoreLocation(parsing: "postgresql://u:pa?ss@h/db?sslmode=bad") }
        #expect(leaky?.message.contains("pa?ss") == false && leaky?.message.contains("ss@") == false, "\(String(describing: leaky))")
        // An empty parameter says nothing: the user falls back as without it.
        #expect("\(try StoreLocation(parsing: "postgresql://h/q?user=&dbname="))".contains("@h:5432/q"))
        #expect(StoreLocation.redacted("postgresql://u@h/db?password=s3cret&sslmode=x") == "postgresql://u@h/db?password=***&sslmode=x")
    }
}
