import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The store's one writer: changes from every download arrive here and are written in group
/// commits. While one transaction is being written, everything that arrives meanwhile waits
/// and goes into the next one, so a thousand downloads finishing at once cost a few
/// transactions, not a thousand.
///
/// Nothing is lost quietly: a transaction that fails is thrown to everyone waiting in
/// ``flush()`` and kept as the store's ``failure``.
final class StoreWriter: Sendable {
    private struct Pending {
        var insert: DownloadRow?
        /// The insert puts the row in the fleet's pool, owned by no member (``pool(_:)``).
        var pooled = false
        var patch = RowPatch()
        var delete = false
    }

    private struct State {
        var pending: [DownloadID: Pending] = [:]
        /// Waiting for what is pending now to be written.
        var nextWaiters: [CheckedContinuation<Void, any Error>] = []
        /// Waiting for the transaction being written.
        var inflightWaiters: [CheckedContinuation<Void, any Error>] = []
        var worker: Task<Void, Never>?
        /// The first transaction that failed: the store's failure, which every holder of the
        /// store reads here (there is no other record of it).
        var failure: DownloadError?
        var transactions = 0

        /// Keeps `error` as the failure unless there is one; whether it was the first.
        mutating func recordFailure(_ error: DownloadError) -> Bool {
            guard failure == nil else { return false }
            failure = error
            return true
        }
        /// Rows whose insert is in the transaction being written.
        var insertsInFlight: Set<DownloadID> = []
        /// A pending change asked to be written within one ``lingerStep``, not ``linger``.
        var prompt = false
        /// The worker lingering through a step (``lingerOneStep()``), ended early by whoever
        /// starts to wait; the steps counted.
        var lingerer: (step: Int, continuation: CheckedContinuation<Bool, Never>)?
        var lingerSteps = 0
        /// A transaction is wanted though no row changed (``touch()``).
        var touched = false
    }

    private let database: any StoreDatabase
    /// The statement that inserts a row, or replaces the row of its id.
    private let insertSQL: String
    /// The same, the row owned by no member: offered to a fleet as it is inserted (``pool(_:)``).
    private let pooledInsertSQL: String
    private let state = Mutex(State())
    /// Told how long each transaction took (``EngineObserver/storeCommitted``).
    private let committed: @Sendable (Duration, Int) -> Void

    /// How long changes wait for company, and in what steps (``linger`` and ``lingerStep``, but
    /// for tests).
    private let lingering: Duration
    private let lingeringStep: Duration

    init(
        database: any StoreDatabase, linger: Duration = StoreWriter.linger, lingerStep: Duration = StoreWriter.lingerStep,
        committed: @escaping @Sendable (Duration, Int) -> Void = { _, _ in }
    ) {
        self.database = database
        insertSQL = database.upsertSQL(table: "download", columns: DownloadRow.storedColumns, key: ["id"])
        pooledInsertSQL = database.upsertSQL(table: "download", columns: DownloadRow.pooledColumns, key: ["id"])
        self.lingering = linger
        self.lingeringStep = lingerStep
        self.committed = committed
    }

    /// The first failed transaction's error, once one failed: nothing written since can be
    /// trusted to be there (the manager stops every download with it at its next step).
    var failure: DownloadError? { state.withLock { $0.failure } }

    /// Fails the writer as a failed transaction would, for `error` found outside it (this store's
    /// downloads were taken over by another member of its queue). Returns the writer's failure:
    /// the first one, if it had failed already.
    func fail(_ error: any Error) -> DownloadError {
        let candidate = failure(error)
        let (failure, first) = state.withLock { state in (state.failure ?? candidate, state.recordFailure(candidate)) }
        if first { tellDatabaseItFailed() }
        return failure
    }

    /// The first failure: the database is told, once (``StoreDatabase/failed()``).
    private func tellDatabaseItFailed() {
        let database = database
        Task { await database.failed() }
    }

    /// Transactions written so far (for tests: group commits make this much smaller than the changes).
    var transactions: Int { state.withLock { $0.transactions } }

    /// Rows with changes not yet written.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// Callers of ``flush()`` waiting now (for tests).
    var flushWaiters: Int { state.withLock { $0.nextWaiters.count + $0.inflightWaiters.count } }

    /// Whether the insert of row `id` is pending or being written: a file must not reach its
    /// final name before its row is in the store (after a crash, a file no row knows is
    /// someone else's).
    func isInserting(_ id: DownloadID) -> Bool {
        state.withLock { $0.pending[id]?.insert != nil || $0.insertsInFlight.contains(id) }
    }

    /// Inserts `row` in a coming group commit; with `pooled`, in the fleet's pool, owned by no
    /// member (decided before the insert is submitted: a commit may take it at any moment after).
    func insert(_ row: DownloadRow, pooled: Bool = false) {
        submit(row.id) { pending in
            pending.delete = false
            pending.insert = row
            pending.pooled = pooled
            pending.patch = RowPatch()
        }
    }

    /// Makes the inserts of those of `ids` not written yet put their rows in the fleet's pool,
    /// owned by no member, and returns those ids; the others' rows (written already, or being
    /// written) are the caller's to offer. A row offered as it is inserted is written once, where
    /// an insert and then an offer make two versions of it, each an entry in every index.
    func pool(_ ids: [DownloadID]) -> Set<DownloadID> {
        state.withLock { state in
            var pooled: Set<DownloadID> = []
            for id in ids where state.pending[id]?.insert != nil {
                state.pending[id]?.pooled = true
                pooled.insert(id)
            }
            return pooled
        }
    }

    /// Changes row `id` in a coming group commit.
    ///
    /// - Parameter promptly: write it within one ``lingerStep`` instead of lingering a whole
    ///   ``linger`` for company. A transfer's record of the bytes it wrote asks so: after a
    ///   `kill -9`, whatever the linger held back is fetched again, and a server that sends in
    ///   bursts (nginx's `limit_rate` sends 2 MiB at once) could make that a burst per connection.
    func update(_ id: DownloadID, _ patch: RowPatch, promptly: Bool = false) {
        submit(id, promptly: promptly) { $0.patch.merge(patch) }
    }

    func delete(_ id: DownloadID) {
        submit(id) { pending in
            pending = Pending()
            pending.delete = true
        }
    }

    /// Makes a coming transaction of the writer's carry what the database publishes with every
    /// transaction (a fleet member's counts, ``StoreDatabase/publish(_:of:)``), even if no row
    /// changes: one with the rows pending, or one of its own.
    func touch() {
        want { $0.touched = true }
    }

    private func submit(_ id: DownloadID, promptly: Bool = false, _ change: (inout Pending) -> Void) {
        want { state in
            change(&state.pending[id, default: Pending()])
            if promptly { state.prompt = true }
        }
    }

    /// Records what a coming transaction is to write, and starts the worker unless it runs.
    private func want(_ change: (inout State) -> Void) {
        state.withLock { state in
            change(&state)
            guard state.worker == nil else { return }
            state.worker = Task { await self.drain() }
        }
    }

    /// Returns once everything submitted before the call is written.
    ///
    /// - Throws: ``DownloadError`` (``DownloadError/Kind/io``) when that transaction failed.
    func flush() async throws(DownloadError) {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let now: Bool = state.withLock { state in
                    if !state.pending.isEmpty {
                        state.nextWaiters.append(continuation)
                    } else if state.worker != nil {
                        state.inflightWaiters.append(continuation)
                    } else {
                        return true
                    }
                    return false
                }
                if now { continuation.resume() } else { endLingerStep() }
            }
        } catch let error as DownloadError {
            throw error
        } catch {
            throw failure(error)
        }
    }

    /// How long changes may wait for others to share their transaction, unless someone waits
    /// for them: writing a page costs the same for one changed row as for fifty. (50 ms, not
    /// 10: with the checkpoint and cache settings of ``Store``, a list of 10,000 small files
    /// writes about a fifth of the pages it did.)
    static let linger: Duration = .milliseconds(50)
    /// How often a lingering writer looks whether a change asks to be written promptly or
    /// enough are pending (someone who starts waiting ends the step at once).
    static let lingerStep: Duration = .milliseconds(5)

    /// Writes batches until nothing is pending.
    private func drain() async {
        while true {
            // Linger in short steps, while there is something to wait with: someone who starts
            // waiting meanwhile (a pause, the end of a run) is served at once, not at the end of
            // the window.
            var lingered: Duration = .zero
            while lingered < lingering, await lingerOneStep() {
                lingered += lingeringStep
            }
            let (batch, stragglers): ([DownloadID: Pending]?, [CheckedContinuation<Void, any Error>]) = state.withLock { state in
                guard !state.pending.isEmpty || state.touched else {
                    // Nothing left. Whoever asked to wait since the last transaction was written
                    // asked after everything pending then: it is all written.
                    state.worker = nil
                    defer { state.inflightWaiters = [] }
                    return (nil, state.inflightWaiters)
                }
                let batch = state.pending
                state.pending = [:]
                state.prompt = false
                state.touched = false
                state.insertsInFlight = Set(batch.compactMap { $0.value.insert == nil ? nil : $0.key })
                // Whoever asked while nothing was pending (between transactions) waits for nothing.
                let stragglers = state.inflightWaiters
                state.inflightWaiters = state.nextWaiters
                state.nextWaiters = []
                return (batch, stragglers)
            }
            for waiter in stragglers { waiter.resume() }
            guard let batch else { return }
            let outcome: Result<Void, DownloadError>
            let started = ContinuousClock.now
            do {
                try await database.write(try statements(batch))
                outcome = .success(())
            } catch {
                // A transaction of nothing but what the database publishes (``touch()``) loses no
                // row: its failure (the store closing under it, say) is not the store's.
                outcome = batch.isEmpty ? .success(()) : .failure(failure(error))
            }
            committed(.now - started, batch.count)
            let (waiters, firstFailure) = state.withLock { state in
                state.transactions += 1
                state.insertsInFlight = []
                let first = if case .failure(let error) = outcome { state.recordFailure(error) } else { false }
                defer { state.inflightWaiters = [] }
                return (state.inflightWaiters, first)
            }
            if firstFailure { tellDatabaseItFailed() }
            switch outcome {
            case .success:
                for waiter in waiters { waiter.resume() }
            case .failure(let error):
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }

    /// Waits one ``lingerStep`` while there is something to wait with, and returns whether it
    /// did; someone who starts waiting meanwhile ends the step at once (the end of a `haul get`
    /// waited up to a step for nothing).
    private func lingerOneStep() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let step: Int? = state.withLock { state in
                guard !state.pending.isEmpty || state.touched, state.nextWaiters.isEmpty, state.pending.count < 1000, !state.prompt else {
                    return nil
                }
                state.lingerSteps += 1
                state.lingerer = (state.lingerSteps, continuation)
                return state.lingerSteps
            }
            guard let step else { return continuation.resume(returning: false) }
            Task {
                try? await Task.sleep(for: self.lingeringStep)
                self.endLingerStep(step)
            }
        }
    }

    /// Ends the worker's linger step: `step` when its time is up (a later one is left alone),
    /// any when someone starts waiting.
    private func endLingerStep(_ step: Int? = nil) {
        let lingerer = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let lingerer = state.lingerer, step == nil || lingerer.step == step else { return nil }
            state.lingerer = nil
            return lingerer.continuation
        }
        lingerer?.resume(returning: true)
    }

    /// The statements that write `batch`.
    private func statements(_ batch: [DownloadID: Pending]) throws -> [StoreStatement] {
        let now = Date()
        var statements: [StoreStatement] = []
        statements.reserveCapacity(batch.count)
        for (id, pending) in batch {
            if pending.delete {
                statements.append(StoreStatement("DELETE FROM download WHERE id = ?", [id.storedValue.databaseValue], batching: .delete))
                continue
            }
            if var row = pending.insert {
                row.updatedAt = now
                // Ids never repeat (a random prefix per process, then a count): a row is inserted
                // once; a later insert of the same id (a resumed library download) replaces it.
                var values = try row.storedValues().map { $0?.databaseValue ?? .null }
                if pending.pooled {
                    values.append("".databaseValue)
                    statements.append(StoreStatement(pooledInsertSQL, values, batching: .pooledInsert))
                } else {
                    statements.append(StoreStatement(insertSQL, values, batching: .insert))
                }
            }
            guard !pending.patch.isEmpty else { continue }
            var values = pending.patch.changedValues
            values.append(now.timeIntervalSince1970.databaseValue)
            values.append(id.storedValue.databaseValue)
            statements.append(StoreStatement(pending.patch.updateSQL, values, batching: .update(mask: pending.patch.mask)))
        }
        return statements
    }

    private func failure(_ error: any Error) -> DownloadError {
        if let failure = error as? StoreOpenFailure { return failure.error }
        return .io(
            "cannot save the download records in \(database.location): \(database.reason(error)); \(database.advice(error)), then run again"
        )
    }
}

extension Statement {
    /// Binds `values` to the statement's placeholders in order and runs it once.
    ///
    /// The values go to SQLite as they are: GRDB's `StatementArguments` would first map them
    /// again and check them against the statement, some thirty allocations for a row of a
    /// download (most of the store's cost on a list of small files). Only their count is checked.
    func run(binding values: [DatabaseValue]) throws {
        // A value for every placeholder, or the statement would run with NULLs for the rest.
        guard values.count == Int(sqlite3_bind_parameter_count(sqliteStatement)) else {
            throw DatabaseError(resultCode: .SQLITE_RANGE, message: "\(values.count) values for the placeholders of \(sql)")
        }
        // Resets the statement and clears what an earlier run bound; it binds nothing.
        setUncheckedArguments(StatementArguments())
        for (index, value) in zip(CInt(1)..., values) {
            let code: CInt
            switch value.storage {
            case .null: code = sqlite3_bind_null(sqliteStatement, index)
            case .int64(let number): code = sqlite3_bind_int64(sqliteStatement, index, number)
            case .double(let number): code = sqlite3_bind_double(sqliteStatement, index, number)
            case .string(let text): code = Self.bind(text, to: sqliteStatement, at: index)
            case .blob(let data):
                code = data.withUnsafeBytes { bytes in
                    sqlite3_bind_blob(sqliteStatement, index, bytes.baseAddress, CInt(bytes.count), Self.transient)
                }
            }
            guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot bind value \(index)") }
        }
        try execute()
    }

    /// Binds `text` from its own bytes: passed as a C string, a Swift string is first copied
    /// into a new array (fourteen allocations for each download's rows).
    private static func bind(_ text: String, to statement: SQLiteStatement, at index: CInt) -> CInt {
        let bound = text.utf8.withContiguousStorageIfAvailable { bytes in
            // An empty buffer may have no address, and a null pointer would bind NULL.
            bytes.withMemoryRebound(to: CChar.self) { chars in
                guard let start = chars.baseAddress else { return sqlite3_bind_text(statement, index, "", 0, Self.transient) }
                return sqlite3_bind_text(statement, index, start, CInt(chars.count), Self.transient)
            }
        }
        return bound ?? sqlite3_bind_text(statement, index, text, CInt(text.utf8.count), Self.transient)
    }

    /// SQLite copies what it is given (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
