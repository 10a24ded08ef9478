import Foundation
import Logging
import PostgresNIO

extension PostgreSQLStoreDatabase {
    /// The schema's history on PostgreSQL, a version per step, each run once in order and
    /// recorded in `haul_migration`. v1 is where SQLite's reached at its v11 (``Store/migrator``):
    /// the same tables and columns, in PostgreSQL's types (integers as `bigint`, times as seconds
    /// since 1970 in `double precision`), so every record reads and writes the same way on both.
    static let migrations: [(version: Int, statements: [String])] = [
        (
            1,
            [
                """
                CREATE TABLE download (
                    id bigint PRIMARY KEY, queue text, url text NOT NULL, destinationKind bigint NOT NULL,
                    destination text NOT NULL, request text NOT NULL, priority bigint NOT NULL DEFAULT 0,
                    position bigint NOT NULL DEFAULT 0, dependencies text NOT NULL DEFAULT '', status bigint NOT NULL,
                    finishOrder bigint, path text, totalLength bigint, etag text, lastModified text,
                    acceptsRanges bigint NOT NULL DEFAULT 0, ranges text NOT NULL DEFAULT '', resultBytes bigint,
                    fileModified double precision, errorKind bigint, lastError text, createdAt double precision NOT NULL,
                    updatedAt double precision NOT NULL, errorReason text, sources text NOT NULL DEFAULT '', unsynced text,
                    sourceValidators text NOT NULL DEFAULT ''
                )
                """,
                "CREATE INDEX download_queue_destination ON download (queue, destination)",
                "CREATE INDEX download_path ON download (path)",
                "CREATE TABLE setting (queue text NOT NULL, name text NOT NULL, value text NOT NULL, PRIMARY KEY (queue, name))",
                """
                CREATE TABLE upload (
                    file text NOT NULL, url text NOT NULL, protocol text NOT NULL, location text, ietfInteropVersion bigint,
                    length bigint NOT NULL, modified double precision NOT NULL, sample text NOT NULL,
                    createdAt double precision NOT NULL, updatedAt double precision NOT NULL, PRIMARY KEY (file, url)
                )
                """,
                """
                CREATE TABLE uploadJob (
                    id bigint PRIMARY KEY, queue text NOT NULL, file text NOT NULL, url text NOT NULL, request text NOT NULL,
                    status bigint NOT NULL, priority bigint NOT NULL, position bigint NOT NULL, finishOrder bigint, result text,
                    errorKind bigint, errorReason text, lastError text, updatedAt double precision NOT NULL
                )
                """,
                "CREATE INDEX uploadJob_queue ON uploadJob (queue, file, url)",
            ]
        ),
        (
            2,
            [
                // The owner of each queue (PostgreSQLStoreDatabase.takeQueue): a store, the
                // machine it runs on (its name; its boot and pid namespace), its pid, and its lease
                // in seconds since 1970 (the server's clock).
                """
                CREATE TABLE queueOwner (
                    queue text PRIMARY KEY, owner text NOT NULL, host text NOT NULL, machine text NOT NULL,
                    pid bigint NOT NULL, leaseUntil double precision NOT NULL
                )
                """
            ]
        ),
        (
            3,
            [
                // A queue shared by a fleet (PostgreSQLStoreDatabase.join): every daemon is a
                // member with a lease; each download and upload is owned by one member, the
                // one whose manager runs it. `owner` defaults to the session's `haul.member`
                // (set on every connection the store makes), so each insert is its writer's.
                // NULL: nobody's yet (the rows of v2), for the next member to take whole; '':
                // offered to the fleet, for members to claim a batch at a time.
                """
                CREATE TABLE fleetMember (
                    queue text NOT NULL, member text NOT NULL, host text NOT NULL, machine text NOT NULL,
                    pid bigint NOT NULL, leaseUntil double precision NOT NULL, joinedAt double precision NOT NULL,
                    heir text, PRIMARY KEY (queue, member)
                )
                """,
                "CREATE INDEX fleetMember_member ON fleetMember (member)",
                // Added without a default, then given it: the rows already there stay NULL...
                "ALTER TABLE download ADD COLUMN owner text",
                "ALTER TABLE download ALTER COLUMN owner SET DEFAULT current_setting('haul.member', true)",
                "ALTER TABLE uploadJob ADD COLUMN owner text",
                "ALTER TABLE uploadJob ALTER COLUMN owner SET DEFAULT current_setting('haul.member', true)",
                // ...but those of a queue a daemon of before the fleet holds are its, until its
                // lease runs out (it stops at its next write: its table is gone).
                """
                INSERT INTO fleetMember (queue, member, host, machine, pid, leaseUntil, joinedAt)
                SELECT queue, owner, host, machine, pid, leaseUntil, 0 FROM queueOwner
                """,
                "UPDATE download d SET owner = q.owner FROM queueOwner q WHERE d.queue = q.queue",
                "UPDATE uploadJob u SET owner = q.owner FROM queueOwner q WHERE u.queue = q.queue",
                "DROP TABLE queueOwner",
                "CREATE INDEX download_owner ON download (queue, owner)",
                // The pool: queued downloads a member offered to the others ('' as owner),
                // claimed in queue order (PostgreSQLStoreDatabase.claim).
                "CREATE INDEX download_pool ON download (queue, priority DESC, position) WHERE owner = ''",
                "CREATE INDEX uploadJob_owner ON uploadJob (queue, owner)",
            ]
        ),
        (
            4,
            [
                // What each member publishes at every look (PostgreSQLStoreDatabase.look): its
                // speeds, its running downloads' progress, whether it has listeners for the
                // fleet's notifications; read by the others to answer for the whole fleet.
                "ALTER TABLE fleetMember ADD COLUMN status text NOT NULL DEFAULT ''",
                // Each member's share of a host's connections (--max-connections-per-host across
                // the fleet, PostgreSQLStoreDatabase.shareHosts): the slots it holds and how
                // many it would use.
                """
                CREATE TABLE fleetHost (
                    queue text NOT NULL, host text NOT NULL, member text NOT NULL, slots bigint NOT NULL,
                    wanted bigint NOT NULL, PRIMARY KEY (queue, host, member)
                )
                """,
            ]
        ),
        (
            5,
            [
                // Each member's counts of its downloads by status (MemberCounts, a JSON array),
                // written with the lease at every transaction: the others add them up for the
                // whole fleet's counts instead of counting every row. NULL: not published yet.
                "ALTER TABLE fleetMember ADD COLUMN counts jsonb"
            ]
        ),
        (
            6,
            [
                // The pool's size, kept as it changes instead of counted at every poll of the
                // fleet's counts (a count of 10,000 pooled rows took 10-22 ms of the server's
                // time on a busy table): each member's net rows put into the pool (pooled inserts
                // and offers less claims), changed by the statement that moves them, so the sum
                // over a queue is its pool. A row a member: none waits for another's lock. A gone
                // member's is folded into its reaper's (PostgreSQLStoreDatabase.look). Member '':
                // the pool as it stood at this migration.
                """
                CREATE TABLE fleetPool (
                    queue text NOT NULL, member text NOT NULL, pooled bigint NOT NULL, PRIMARY KEY (queue, member)
                )
                """,
                "INSERT INTO fleetPool (queue, member, pooled) SELECT queue, '', count(*) FROM download WHERE owner = '' GROUP BY queue",
            ]
        ),
        (
            7,
            [
                // The path index holds the rows that have a path (SQLite's v12): a row is inserted,
                // pooled and claimed without one, and each of those wrote an entry for no path.
                "DROP INDEX download_path",
                "CREATE INDEX download_path ON download (path) WHERE path IS NOT NULL",
            ]
        ),
    ]

    /// The type of each column of `download`, as v1 made it.
    static let downloadTypes: [String: String] = [
        "id": "bigint", "queue": "text", "url": "text", "destinationKind": "bigint", "destination": "text", "request": "text",
        "priority": "bigint", "position": "bigint", "dependencies": "text", "status": "bigint", "finishOrder": "bigint",
        "path": "text", "totalLength": "bigint", "etag": "text", "lastModified": "text", "acceptsRanges": "bigint",
        "ranges": "text", "resultBytes": "bigint", "fileModified": "double precision", "errorKind": "bigint",
        "lastError": "text", "createdAt": "double precision", "updatedAt": "double precision", "errorReason": "text",
        "sources": "text", "unsynced": "text", "sourceValidators": "text",
    ]

    /// Brings the schema up to date, in one transaction that holds a lock of its own: two
    /// daemons starting together migrate once.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("BEGIN", logger: logger)
        do {
            try await connection.query("SELECT pg_advisory_xact_lock(hashtext('haul.migration'))", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS haul_migration (version bigint PRIMARY KEY, appliedAt double precision NOT NULL)",
                logger: logger)
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM haul_migration", logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            if let newest = applied.max(), let known = migrations.last?.version, newest > known {
                throw DownloadError.io("its schema (version \(newest)) is newer than this haul knows (\(known)); run a newer haul")
            }
            for migration in migrations where !applied.contains(migration.version) {
                for statement in migration.statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                let now = Date().timeIntervalSince1970
                try await connection.query(
                    "INSERT INTO haul_migration (version, appliedAt) VALUES (\(migration.version), \(now))", logger: logger)
            }
            try await connection.query("COMMIT", logger: logger)
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw error
        }
    }
}
