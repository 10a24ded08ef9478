import Foundation
import GRDB
import Logging
import PostgresNIO

/// The fleet: the members of a queue, their leases, the takeover of a gone member's rows, and
/// the pool of downloads offered and claimed (``PostgreSQLStoreDatabase`` says how they fit).
extension PostgreSQLStoreDatabase {
    var isShared: Bool { true }

    var lostMembership: (any Error)? { queues.withLock { $0.lost }.map { QueueTaken(message: $0) } }

    var leaseRenewals: Int { renewals.load(ordering: .relaxed) }

    var memberIdentity: (id: String, name: String)? { (member.id, member.name) }

    var heldCondition: (sql: String, values: [DatabaseValue]) { (" AND owner = ?", [member.id.databaseValue]) }

    /// Makes this store a member of `queue`, which any number of daemons may share, and takes
    /// over what no live member holds (``takeOver(_:)``), all in one transaction.
    func join(_ queue: String) async throws(DownloadError) -> FleetLook {
        let logger = logger
        let member = member
        let lease = Int(lease.components.seconds)
        do {
            _ = try await retrying(on: writer, rows: 1) { connection in
                try await connection.query(
                    """
                    INSERT INTO fleetMember (queue, member, host, machine, pid, leaseUntil, joinedAt)
                    VALUES (\(queue), \(member.id), \(member.host), \(member.machine), \(member.pid),
                    extract(epoch from clock_timestamp()) + \(lease), extract(epoch from clock_timestamp()))
                    ON CONFLICT (queue, member) DO UPDATE SET leaseUntil = EXCLUDED.leaseUntil
                    """, logger: logger)
            }
        } catch {
            throw .io("cannot open the store \(location): \(reason(error)); \(advice(error))")
        }
        queues.withLock { queues in
            queues.held.insert(queue)
            guard queues.renewal == nil else { return }
            // Renewed while nothing else is written; a renewal that fails says so at the next write.
            queues.renewal = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.leaseRenewal)
                    guard !Task.isCancelled, let self else { return }
                    try? await self.transaction([], rows: 0)
                }
            }
        }
        return try await takeOver(queue)
    }

    /// Takes over the downloads and uploads of `queue` that no live member holds: those of
    /// members whose lease ran out, or that were processes of this machine that are gone (a
    /// daemon killed with -9), or that left, and those of nobody; a batch of ``reapBatch`` rows
    /// a transaction, until none is left. Says how many rows became this store's, how many other
    /// members are live, and whether this store is the fleet's eldest; nothing when it is not a
    /// member.
    func takeOver(_ queue: String, publishing status: String) async throws(DownloadError) -> FleetLook {
        guard queues.withLock({ $0.held.contains(queue) }) else { return FleetLook() }
        let logger = logger
        let member = member
        var look = FleetLook()
        do {
            while true {
                let step = try await transaction(rows: Self.reapBatch) { connection in
                    try await Self.look(queue, for: member, publishing: status, on: connection, logger: logger)
                }
                look.taken += step.taken
                (look.others, look.eldest, look.pooled, look.members) = (step.others, step.eldest, step.pooled, step.members)
                guard step.more else { return look }
            }
        } catch {
            // Rows taken in an earlier batch are this store's: the caller loads them at its next look.
            throw .io("cannot take over the downloads of \(location): \(reason(error)); \(advice(error))")
        }
    }

    /// Rows moved to their new owner in one transaction of a takeover.
    static let reapBatch = 10_000

    /// In the transaction under way: what `member` sees of the fleet of `queue` (the live
    /// members, the pool), and, unless another member is reaping at this moment (an advisory lock
    /// of the queue's, tried, not waited for), the reaping: the members that may be gone are
    /// locked, skipping any in the middle of a transaction; those gone get `member` as their heir
    /// (their rows all go to one member, so a download and the one it depends on stay together),
    /// and up to ``reapBatch`` of the rows of the members it is heir of, and of nobody's when it is
    /// the eldest, become its own; a gone member with no rows left is removed. A lease that ran
    /// out is never renewed (``renew(_:of:lease:counts:on:logger:)``), so a member found out of
    /// its lease stays gone while its rows move over several batches.
    static func look(
        _ queue: String, for member: FleetMember, publishing status: String, on connection: PostgresConnection, logger: Logger
    ) async throws -> FleetLook {
        var look = FleetLook()
        try await connection.query(
            "UPDATE fleetMember SET status = \(status) WHERE queue = \(queue) AND member = \(member.id)", logger: logger)
        let live = try await connection.query(
            """
            SELECT member, host, pid, status FROM fleetMember
            WHERE queue = \(queue) AND leaseUntil >= extract(epoch from clock_timestamp()) ORDER BY joinedAt, member
            """, logger: logger)
        for try await (id, host, pid, status) in live.decode((String, String, Int64, String).self) {
            look.members.append(FleetLook.Member(id: id, name: FleetMember.name(host: host, pid: pid), status: status))
        }
        let members = look.members.map(\.id)
        look.others = members.filter { $0 != member.id }.count
        look.eldest = members.first == member.id
        let pooled = try await connection.query(
            "SELECT EXISTS (SELECT 1 FROM download WHERE queue = \(queue) AND owner = '' AND status = \(DownloadStatus.queued.storedValue))",
            logger: logger)
        for try await any in pooled.decode(Bool.self) { look.pooled = any }
        // One reaper at a time; a member that finds another reaping leaves it to it.
        guard try await tryLock("haul.fleet", of: queue, on: connection, logger: logger) else { return look }
        // The members that may be gone, read without a lock: a live member's row is locked by
        // each of its transactions (``renew(_:of:lease:counts:on:logger:)``), and locking it
        // here would hold its next one up for the whole look.
        let candidates = try await connection.query(
            """
            SELECT member, machine, pid, leaseUntil - extract(epoch from clock_timestamp()), coalesce(heir, '')
            FROM fleetMember WHERE queue = \(queue) AND member <> \(member.id)
            AND (leaseUntil < extract(epoch from clock_timestamp()) OR machine = \(member.machine))
            """, logger: logger)
        var maybeGone: [String] = []
        var killed: [String] = []
        // Without its pid namespace, a pid of "this machine" may be another container's.
        let pidsMeanSomething = !member.machine.hasSuffix("pid:[?]")
        for try await (id, machine, pid, left, heir) in candidates.decode((String, String, Int64, Double, String).self) {
            // A gone member's rows all go to one heir, over as many batches as it takes: a
            // download and the one it depends on stay together.
            if !heir.isEmpty, heir != member.id, members.contains(heir) { continue }
            if left < 0 {
                maybeGone.append(id)
            } else if pidsMeanSomething, machine == member.machine, kill(pid_t(truncatingIfNeeded: pid), 0) != 0, errno == ESRCH {
                maybeGone.append(id)
                killed.append(id)
            }
        }
        // Then locked, skipping any in the middle of a transaction (it renewed its lease, or
        // is about to find it ran out), and checked again under the lock.
        var gone: [String] = []
        if !maybeGone.isEmpty {
            let locked = try await connection.query(
                """
                SELECT member FROM fleetMember WHERE queue = \(queue) AND member = ANY(\(maybeGone))
                AND (leaseUntil < extract(epoch from clock_timestamp()) OR member = ANY(\(killed)))
                FOR UPDATE SKIP LOCKED
                """, logger: logger)
            for try await id in locked.decode(String.self) { gone.append(id) }
            killed = killed.filter(gone.contains)
        }
        if !gone.isEmpty {
            // Its shares of the hosts are free again; what it put into the pool is counted as
            // this member's (the rows stay there).
            try await connection.query("DELETE FROM fleetHost WHERE queue = \(queue) AND member = ANY(\(gone))", logger: logger)
            try await connection.query(
                """
                WITH folded AS (DELETE FROM fleetPool WHERE queue = \(queue) AND member = ANY(\(gone)) RETURNING queue, pooled)
                \(unescaped: countPool(from: "folded", adding: "sum(pooled)"))
                """, logger: logger)
            // A member killed here: its lease ends now, and nothing renews it again.
            try await connection.query(
                """
                UPDATE fleetMember SET heir = \(member.id),
                leaseUntil = CASE WHEN member = ANY(\(killed)) THEN 0 ELSE leaseUntil END
                WHERE queue = \(queue) AND member = ANY(\(gone))
                """, logger: logger)
        }
        // The rows of nobody (a queue of before the fleet) go whole to the eldest. Each condition
        // alone, so that the owner index finds the rows (an `OR` of both would read the table).
        var owners: [String] = []
        if look.eldest { owners.append("owner IS NULL") }
        if !gone.isEmpty { owners.append("owner = ANY($3)") }
        for table in ["download", "uploadJob"] where !owners.isEmpty {
            let count = try await connection.query(
                PostgresQuery(
                    unsafeSQL: """
                        WITH taken AS (
                            UPDATE \(table) SET owner = $1 WHERE id IN (
                                SELECT id FROM \(table) WHERE queue = $2 AND (\(owners.joined(separator: " OR "))) LIMIT $4
                            ) RETURNING 1
                        ) SELECT count(*) FROM taken
                        """,
                    binds: {
                        var binds = PostgresBindings()
                        binds.append(member.id)
                        binds.append(queue)
                        binds.append(gone)
                        binds.append(reapBatch)
                        return binds
                    }()), logger: logger)
            for try await rows in count.decode(Int64.self) { look.taken += Int(rows) }
        }
        look.more = look.taken >= reapBatch
        if !gone.isEmpty, !look.more {
            try await connection.query(
                """
                DELETE FROM fleetMember m WHERE queue = \(queue) AND member = ANY(\(gone))
                AND NOT EXISTS (SELECT 1 FROM download d WHERE d.queue = m.queue AND d.owner = m.member)
                AND NOT EXISTS (SELECT 1 FROM uploadJob u WHERE u.queue = m.queue AND u.owner = m.member)
                """, logger: logger)
        }
        return look
    }

    /// Adds `adding` (an aggregate over `rows`, rows with a `queue` column: put into the pool,
    /// or with a minus, taken out of it) to this member's count of each queue's pool, in the
    /// statement that moved them (`fleetPool`; `haul.member` is set on every connection).
    static func countPool(from rows: String, adding: String) -> String {
        """
        INSERT INTO fleetPool (queue, member, pooled) SELECT queue, current_setting('haul.member'), (\(adding))::bigint FROM \(rows)
        GROUP BY queue ON CONFLICT (queue, member) DO UPDATE SET pooled = fleetPool.pooled + EXCLUDED.pooled
        """
    }

    /// Takes the advisory lock `name` of `queue` for the transaction under way if no other
    /// transaction holds it; false when one does (never waits).
    static func tryLock(_ name: String, of queue: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        var locked = false
        for try await got in try await connection.query(
            "SELECT pg_try_advisory_xact_lock(hashtext(\(name)), hashtext(\(queue)))", logger: logger
        ).decode(Bool.self) { locked = got }
        return locked
    }

    /// How many rows this store holds in `queue`: the manager compares it with its book now and
    /// then, and reads what it misses (rows a retried transaction took, say).
    func heldCount(_ queue: String) async throws(DownloadError) -> Int {
        let sql = "SELECT count(*) AS n FROM download WHERE queue = ? AND owner = ?"
        do { return try await fetch(sql, [queue.databaseValue, member.id.databaseValue]) { Int($0["n"] as Int64) }.first ?? 0 } catch {
            throw .io("cannot read the download records in \(location): \(reason(error))")
        }
    }

    func offer(_ ids: [DownloadID]) async throws(DownloadError) {
        let logger = logger
        let member = member
        let values = ids.map(\.storedValue)
        do {
            _ = try await transaction(rows: ids.count) { connection in
                try await connection.query(
                    """
                    WITH offered AS (UPDATE download SET owner = '' WHERE id = ANY(\(values)) AND owner = \(member.id) RETURNING queue)
                    \(unescaped: Self.countPool(from: "offered", adding: "count(*)"))
                    """, logger: logger)
            }
        } catch {
            throw .io("cannot offer downloads to the fleet in \(location): \(reason(error)); \(advice(error))")
        }
    }

    /// The columns a claim returns: a download row's, named rather than `*`.
    static let claimedColumns = DownloadRow.storedColumns.joined(separator: ", ")

    func claim(_ queue: String, limit: Int) async throws(DownloadError) -> [DownloadRow] {
        let logger = logger
        let member = member
        let queued = DownloadStatus.queued.storedValue
        do {
            return try await transaction(rows: limit) { connection in
                // Prepared: its result names its columns, so a column a newer daemon of the fleet
                // adds does not change its shape (which a prepared statement keeps).
                let claimed = try await connection.prepared(
                    """
                    WITH claimed AS (
                        UPDATE download SET owner = \(member.id) WHERE id IN (
                            SELECT id FROM download WHERE queue = \(queue) AND owner = '' AND status = \(queued)
                            ORDER BY priority DESC, position LIMIT \(limit) FOR UPDATE SKIP LOCKED
                        ) RETURNING \(unescaped: Self.claimedColumns)
                    ), counted AS (\(unescaped: Self.countPool(from: "claimed", adding: "-count(*)")))
                    SELECT * FROM claimed
                    """, logger: logger)
                return try await PostgresColumns.downloads(claimed)
            }
        } catch {
            throw .io("cannot claim downloads of the fleet in \(location): \(reason(error)); \(advice(error))")
        }
    }

    func claim(ids: [DownloadID]) async throws(DownloadError) -> [DownloadRow] {
        let logger = logger
        let member = member
        let values = ids.map(\.storedValue)
        do {
            return try await transaction(rows: ids.count) { connection in
                let claimed = try await connection.prepared(
                    """
                    WITH claimed AS (
                        UPDATE download SET owner = \(member.id) WHERE id = ANY(\(values)) AND owner = ''
                        RETURNING \(unescaped: Self.claimedColumns)
                    ),
                    counted AS (\(unescaped: Self.countPool(from: "claimed", adding: "-count(*)")))
                    SELECT * FROM claimed
                    """, logger: logger)
                return try await PostgresColumns.downloads(claimed)
            }
        } catch {
            throw .io("cannot claim downloads of the fleet in \(location): \(reason(error)); \(advice(error))")
        }
    }

    func publish(_ counts: MemberCounts, of queue: String) -> Bool {
        published.withLock { published in
            guard published[queue] != counts else { return false }
            published[queue] = counts
            return true
        }
    }

    /// What this member publishes of its queues with its lease: `{"queue": [counts…]}`
    /// (``MemberCounts/json``); nil before its manager published any.
    func publishedJSON() -> String? {
        let counts = published.withLock { $0 }
        guard !counts.isEmpty else { return nil }
        let entries = counts.map { queue, counts in
            let key = (try? JSONEncoder().encode(queue)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
            return key + ":" + counts.json
        }
        return "{" + entries.joined(separator: ",") + "}"
    }

    /// Extends the lease of every queue in `held`, in the transaction under way, and publishes
    /// this member's `counts` of each (``publishedJSON()``; a queue missing there keeps what it
    /// had); throws ``QueueTaken`` when this store is no longer a member of one. A lease that ran
    /// out is not renewed, taken over or not yet: once out of it, a member is gone
    /// (``look(_:for:publishing:on:logger:)``).
    static func renew(
        _ held: Set<String>, of member: FleetMember, lease: Int, counts: String?, on connection: PostgresConnection, logger: Logger
    ) async throws {
        var renewed = Set<String>()
        // Run prepared (a transaction's first statement): `counts` may be NULL, so its type is
        // written in the text.
        let rows = try await connection.prepared(
            """
            UPDATE fleetMember SET leaseUntil = extract(epoch from clock_timestamp()) + \(lease),
            counts = coalesce(\(counts)::text::jsonb -> queue, counts)
            WHERE member = \(member.id) AND leaseUntil >= extract(epoch from clock_timestamp()) RETURNING queue
            """, logger: logger)
        for try await row in rows { renewed.insert(try row.decode(String.self)) }
        if let lost = held.subtracting(renewed).sorted().first {
            throw QueueTaken(
                message:
                    "another haul daemon took over this one's downloads of the queue \(lost) while this one did not renew its lease (it was paused, or cut off from the database, for over \(lease) s)"
            )
        }
    }

    func close() async throws {
        for task in listeners.withLock({ $0 }) { task.cancel() }
        await leave(because: "this daemon left the queue (it stopped)")
        await writer.close()
        await reader.close()
    }

    /// The writer failed for good: renewing the lease would only keep this store's downloads
    /// from a daemon that could run them.
    func failed() async {
        await leave(because: Self.wroteNothingAfterAFailure)
    }

    /// Why nothing is written once a write failed for good: the rows go to another member.
    static let wroteNothingAfterAFailure = "an earlier write failed, and nothing is written after one"

    /// Stops renewing and ends this store's lease at once, so that another member (or the next
    /// daemon to join) takes its downloads over now rather than when the lease would have run out.
    private func leave(because why: String) async {
        let (held, renewal) = queues.withLock { queues in
            defer {
                // Nothing is written after leaving: the rows are another member's from now on.
                if !queues.held.isEmpty { queues.lost = queues.lost ?? why }
                queues.held = []
                queues.renewal = nil
            }
            return (queues.held, queues.renewal)
        }
        renewal?.cancel()
        await renewal?.value
        guard !held.isEmpty else { return }
        let logger = logger
        let member = member
        // In a task of its own: a shutdown cancels the one closing the store, and the lease
        // must still be given back.
        let writer = writer
        let window = window
        let giving = Task {
            try await writer.use(within: window) { connection in
                try await connection.query("UPDATE fleetMember SET leaseUntil = 0 WHERE member = \(member.id)", logger: logger)
                try await connection.query("DELETE FROM fleetHost WHERE member = \(member.id)", logger: logger)
            }
        }
        do { _ = try await giving.value } catch {
            // Nothing is lost: the lease runs out by itself, and another member takes over then.
            logger.error(
                "cannot leave the queue \(held.sorted().joined(separator: ", ")) of \(location): \(reason(error)); another daemon takes its downloads over in \(Int(lease.components.seconds)) s"
            )
        }
    }
}

/// A store as a member of a queue's fleet: a random id, and the machine and pid it runs in, so that a
/// daemon of the same machine (the same boot and pid namespace) can tell that its predecessor is gone.
struct FleetMember: Sendable {
    var id: String
    /// The machine's name, for messages.
    var host: String
    /// Where `pid` means something: this boot of the kernel and its pid namespace (containers
    /// on one machine share its name, not their pids).
    var machine: String
    var pid: Int64

    /// How messages and lists name a member: `HOST/PID` (several daemons may run on one machine).
    static func name(host: String, pid: Int64) -> String { "\(host)/\(pid)" }

    /// This member's ``name(host:pid:)``.
    var name: String { Self.name(host: host, pid: pid) }

    static func make() -> FleetMember {
        FleetMember(id: UUID().uuidString, host: machineName, machine: machineIdentity, pid: Int64(getpid()))
    }

    /// `BOOT-ID pid:[INODE]`: the kernel's boot id and this process's pid namespace.
    static let machineIdentity: String = {
        let namespace = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) ?? "pid:[?]"
        return (BootID.current ?? machineName) + " " + namespace
    }()

    /// gethostname(2): the kernel's name for this machine, without a DNS lookup.
    static var machineName: String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "unknown" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// This store's downloads were taken over by another member of the queue.
struct QueueTaken: Error {
    var message: String
}
