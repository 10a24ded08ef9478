import Foundation

/// A queue shared by a fleet of daemons (a store on PostgreSQL): each member's manager holds
/// and runs the downloads and uploads it owns, and takes over those of members that are gone.
extension DownloadManager {
    /// How often a member looks at the fleet: for rows to take over (a daemon killed on this
    /// machine is taken over within about this long, one whose machine died once its lease has
    /// run out), and at the pool. A transaction of a few milliseconds on the server each time.
    static let fleetWatchInterval: Duration = .milliseconds(250)

    /// Starts looking for rows to take over, on a store that others may share; once.
    func watchFleet() {
        guard store.database.isShared, fleetWatch == nil, !isShutDown else { return }
        fleetWatch = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.fleetWatchInterval)
                guard !Task.isCancelled, let self else { return }
                await self.takeOver()
            }
        }
    }

    /// Takes over the rows of the queue no live member holds, and runs them as ``restore()``
    /// would: running ones continue from their recorded ranges (when their part files are
    /// where this daemon can see them), queued ones queue, finished ones are remembered.
    /// Then claims from the pool, or offers to it, as the queue here needs.
    func takeOver() async {
        guard !isShutDown else { return }
        if let failure = storeFailure {
            // A write failed (the database is gone, or another member took this one's rows
            // over): no transfer may go on writing what cannot be recorded, or is no longer ours.
            haltFleetMember(failure)
            return
        }
        looking = true
        removedWhileLooking = []
        defer { looking = false }
        looks += 1
        let watch = watchPool()
        do throws(DownloadError) {
            let look: FleetLook
            do { look = try await store.takeOver(queue, publishing: publishedStatus()) } catch {
                // Rows taken in an earlier batch of a look that then failed are loaded at the next.
                heldRowsToLoad = true
                throw error
            }
            (fleetOthers, isEldestOfFleet, fleetMembers) = (look.others, look.eldest, look.members)
            takenOverRows += look.taken
            // Now and then, the rows the store says are this member's against the book: rows a
            // transaction took but whose answer was lost (it was tried again) are read too.
            if looks % Self.heldCheckLooks == 0, !offering, !heldRowsToLoad,
                try await store.database.heldCount(queue) != book.entries.count
            {
                heldRowsToLoad = true
            }
            // Not while an offer is under way (the rows it hands over are still this member's in
            // the store): then at the next look.
            if look.taken > 0, offering { heldRowsToLoad = true }
            if look.taken > 0 || heldRowsToLoad, !isShutDown, !offering { try await loadHeldRows(reloading: look.taken == 0) }
            poolMayHaveRows = look.pooled || mayHaveMissed(watch)
            await claimFromPool()
            if !offering { try await offerSurplus() }
            await shareHosts()
        } catch {
            // Shutting down meanwhile: the store was closed under the look, and left the queue.
            if isShutDown { return }
            if let lost = store.database.lostMembership {
                // Another member took this one's downloads over: none of them may be written, or
                // run, here any more. They stop now, before a transfer writes on.
                haltFleetMember(store.writer.fail(lost))
                return
            }
            // The store says why at its next write, if it failed for good; what was missed now is
            // done at the next look.
            downloader.configuration.logger.warning("\(error.message)")
        }
    }

    /// Brings the rows the store holds for this member and the book does not into the book (taken
    /// over, or missed by an earlier look), but not the downloads removed since the look began.
    /// Their ids first: only the rows the book lacks are read (most of a member's are in its
    /// book, and a row costs far more to read than its id). On a failure, the next look tries again.
    private func loadHeldRows(reloading: Bool) async throws(DownloadError) {
        heldRowsToLoad = false
        do {
            let missing = try await store.heldIDs(queue: queue).filter { !book.entries.contains($0) && !removedWhileLooking.contains($0) }
            let rows = missing.isEmpty ? [] : try await store.heldRows(queue: queue, ids: missing)
            guard !isShutDown else { return }
            let inserted = insertRestored(rows.filter { !removedWhileLooking.contains($0.id) })
            linkDependencies(of: inserted)
            let uploads = try await takeOverUploads()
            guard !inserted.isEmpty || uploads > 0 else { return }
            downloader.configuration.logger.notice(
                reloading
                    ? "read \(inserted.count) download(s) and \(uploads) upload(s) of this daemon's that an earlier look of the fleet missed"
                    : "took over \(inserted.count) download(s) and \(uploads) upload(s) of the queue \(queue) from a daemon that is gone")
            schedule()
        } catch {
            heldRowsToLoad = true
            throw error
        }
    }

    /// Every how many looks the rows held are counted against the book (every 5 s).
    static let heldCheckLooks = 20

    /// The store failed, or this member lost its rows: every transfer stops now, and it no
    /// longer runs what only the eldest member may. Said once.
    func haltFleetMember(_ failure: DownloadError) {
        isEldestOfFleet = false
        // Said even when the downloads were halted first (by an attempt that ended, or by the
        // next scheduling: halt() says nothing).
        if !fleetFailureSaid {
            fleetFailureSaid = true
            downloader.configuration.logger.error("stopping every download and upload: \(failure.message)")
        }
        halt(failure)
        // Another member may be taking these over: no running upload goes on here.
        for id in uploadIDs([.running]) { Task { await self.stopUpload(id, .shutdown) } }
    }

    // MARK: Sharing the work

    /// A member keeps about this many queued downloads ready per download it may run at once
    /// (`-j`): it claims more from the pool below half of it, and offers what is past twice it.
    static let fleetReadyPerSlot = 4

    /// How many queued downloads a member keeps ready (``fleetReadyPerSlot`` × `-j`).
    var fleetKeep: Int { maxConcurrent * Self.fleetReadyPerSlot }

    /// Whether more downloads could start here than twice ``fleetKeep`` while other members
    /// could run them: those past ``fleetKeep`` then go to the pool as they are added.
    private var holdsSurplus: Bool {
        fleetOthers > 0 && startable > fleetKeep * 2 && !isShutDown && storeFailure == nil
    }

    /// Whether to offer the surplus (``holdsSurplus``) already written: once the pool is empty
    /// as far as this member knows, so that the other members, which run out of work first,
    /// take what is left of this one's share.
    private var offersSurplus: Bool { holdsSurplus && !poolMayHaveRows }

    /// Past this many downloads committing (every byte in, the file being put in place), no new
    /// one starts: ``DownloadBook/maxCommitting``, but `-j` in a fleet while other members are
    /// live. A member killed loses the files it received and had not put in place yet, and the
    /// member taking its downloads over fetches them again; with at most `-j` of them besides
    /// the `-j` transferring, a kill costs the fleet at most `2 × -j` files sent twice. A member
    /// alone, whose restart loses no more than one daemon on SQLite does, is not held to `-j`:
    /// held, one daemon on PostgreSQL took 5.0 s for 20,000 small files instead of 4.1 s (a
    /// batch of `-j` is written as soon as it is full, but no download starts meanwhile).
    var maxCommitting: Int { store.database.isShared && fleetOthers > 0 ? max(1, maxConcurrent) : DownloadBook.maxCommitting }

    /// Claims queued downloads offered by the fleet while fewer than `2 × -j` are ready here,
    /// up to `4 × -j`; one claim at a time. The pool is asked again at once after a full batch
    /// (there may be more), else at the next look.
    func claimFromPool(reserved: Bool = false) async {
        let keep = fleetKeep
        guard store.database.isShared, restored, poolMayHaveRows, reserved || !claiming, !isShutDown, storeFailure == nil,
            startable < keep / 2
        else {
            if reserved { claiming = false }
            return
        }
        claiming = true
        defer { claiming = false }
        let want = keep - startable
        let pauses = pausesOfAll
        let watch = watchPool()
        do throws(DownloadError) {
            let rows = try await store.claim(queue: queue, limit: want)
            poolMayHaveRows = rows.count == want || mayHaveMissed(watch)
            guard !rows.isEmpty, !isShutDown else { return }
            admitClaimed(rows, paused: pausesOfAll != pauses)
            schedule()
        } catch {
            // A claim that was written but whose answer was lost: its rows are read at the next look.
            poolMayHaveRows = false
            heldRowsToLoad = true
            // Shutting down meanwhile: the store was closed under the claim.
            guard !isShutDown else { return }
            downloader.configuration.logger.warning("\(error.message)")
        }
    }

    /// What this member had pooled with their insert (``poolsAsAdded(_:)``) when a look or a
    /// claim began: see ``mayHaveMissed(_:)``.
    struct PoolWatch {
        /// The last download pooled with its insert.
        var last: ID?
        /// Its insert was still in the store's writer.
        var unwritten: Bool
    }

    func watchPool() -> PoolWatch {
        PoolWatch(last: lastPooled, unwritten: lastPooled.map { store.writer.isInserting($0) } ?? false)
    }

    /// Whether a look or a claim that began at `watch` may have found the pool emptier than
    /// it is: this member's rows pooled with their insert were still in the store's writer
    /// (written in order: once the last is, all are), or more were pooled meanwhile (added
    /// while it waited on the store). Its "empty" then says nothing, and the share this member
    /// kept is not offered on its word.
    func mayHaveMissed(_ watch: PoolWatch) -> Bool {
        watch.unwritten || lastPooled != watch.last
    }

    /// Brings downloads claimed from the pool into the book, and counts them; with `paused`,
    /// paused. A claim that ``pauseAll()`` overtook (``pausesOfAll`` moved while it ran) passes
    /// `paused`: its downloads were in the queue when the whole of it was paused, and a pause
    /// carried through the fleet must leave none of them waiting to start.
    func admitClaimed(_ rows: [DownloadRow], paused: Bool) {
        let inserted = insertRestored(rows)
        claimedFromPool += rows.count
        guard paused else { return }
        for id in inserted where book.entries[id]?.lifecycle.isQueued == true { transition(id) { $0.pause() } }
    }

    /// Queued downloads that could start now but for the limits: ready, or set aside until their
    /// host has a free connection.
    var startable: Int {
        book.index.ready.count + book.index.blockedCount
    }

    /// Starts ``claimFromPool()`` when few downloads are ready here: after each step of the
    /// queue, not only at the next look.
    func claimFromPoolSoon() {
        guard store.database.isShared, poolMayHaveRows, !claiming, restored,
            startable < fleetKeep / 2
        else { return }
        // Reserved now: the steps until the task runs start no other.
        claiming = true
        Task { await self.claimFromPool(reserved: true) }
    }

    /// Offers the surplus as ``offerSurplus()`` does when more than `8 × -j` downloads could start
    /// here and the pool is empty, without waiting for the next look: those whose insert is
    /// not written yet go to the pool with it, at once; the others in a task.
    func offerSurplusSoon() {
        guard !offering, !looking, offersSurplus else { return }
        let written = handOverSurplus()
        guard !written.isEmpty else { return }
        offering = true
        Task {
            do throws(DownloadError) { try await self.offer(written) } catch {
                self.downloader.configuration.logger.warning("\(error.message)")
            }
            self.offering = false
        }
    }

    /// Once more than `8 × -j` downloads are ready here (or set aside for their host) and the
    /// pool is empty, offers those past the first `4 × -j` (the last in queue order) to the other
    /// live members: a list added through one daemon is run by all. Only downloads that never
    /// ran here and that no dependency ties to this member's others go
    /// (``DownloadBook/handOver(_:)``).
    func offerSurplus() async throws(DownloadError) {
        offering = true
        defer { offering = false }
        try await offer(handOverSurplus())
    }

    /// Takes the surplus ``offerSurplus()`` offers out of the book. Those whose insert the
    /// store's writer has not written yet go to the pool with it (``StoreWriter/pool(_:)``);
    /// returns the others, whose rows are written, for ``offer(_:)``.
    private func handOverSurplus() -> [ID] {
        guard offersSurplus else { return [] }
        var handed: [ID] = []
        for key in book.index.startable(from: fleetKeep) where board.progress(of: key.id) == nil {
            if book.handOver(key.id) != nil { handed.append(key.id) }
        }
        guard !handed.isEmpty else { return [] }
        publishCounts()
        let pooled = store.writer.pool(handed)
        offeredToPool += pooled.count
        return handed.filter { !pooled.contains($0) }
    }

    /// Whether download `id`, just added and not yet given to the store's writer, goes to the
    /// pool with its insert: when more than `8 × -j` downloads could start here and at least
    /// `4 × -j` come before it, except this member's own share of them (one in every live
    /// member's count), which stays here. A list added through one member then goes to the pool
    /// as it is written: one version of each row, where an insert and then an offer make two,
    /// each an entry in every index of the table; and the share this member would claim back
    /// skips the pool (a pooled insert and a claim cost the fleet about 170 µs of CPU a row).
    /// Decided before the insert is submitted, since a group commit may take it at any moment
    /// after.
    func poolsAsAdded(_ id: ID) -> Bool {
        guard store.database.isShared, holdsSurplus, book.canHandOver(id), let key = book.entries[id]?.key,
            book.index.startable(before: key) >= fleetKeep
        else { return false }
        addedPastKeep += 1
        guard addedPastKeep % (fleetOthers + 1) != 0 else { return false }
        poolMayHaveRows = true
        lastPooled = id
        return true
    }

    /// Waits for the offer under way to end, then for the writer to write what it holds (rows
    /// pooled with their insert among it): what this member was putting into the pool is in it
    /// when this returns. Nothing outside a fleet.
    func settleOffers() async {
        guard store.database.isShared else { return }
        while offering { await withCheckedContinuation { offerWaiters.append($0) } }
        do throws(DownloadError) { try await store.flush() } catch {
            // The store says why at its next write.
        }
    }

    /// Offers `ids`, handed over and written, to the pool.
    private func offer(_ ids: [ID]) async throws(DownloadError) {
        guard !ids.isEmpty else { return }
        do {
            try await store.offer(ids)
            offeredToPool += ids.count
        } catch {
            // Whether the offer was written is unknown (its answer may be what was lost): the
            // next look loads whichever of them are still this member's, and no other.
            heldRowsToLoad = true
            throw error
        }
    }

    // MARK: Sharing the hosts

    /// Asks the store for this member's shares of the connections to its hosts
    /// (`--max-connections-per-host` counts across the fleet), then starts what they allow; one
    /// request at a time. At every look, for every host it holds a share of or wants (another
    /// member may want some, and then this one keeps an even split), and at once when a
    /// download was set aside for want of a share (``shareHostsSoon()``), for the hosts whose
    /// want changed.
    func shareHosts(reserved: Bool = false) async {
        guard hosts.isShared, reserved || !sharingHosts, storeFailure == nil, !isShutDown else {
            if reserved { sharingHosts = false }
            return
        }
        sharingHosts = true
        defer { sharingHosts = false }
        let wanted = hosts.wanted(blocked: book.index.blockedByHost, everyHost: !reserved)
        guard !wanted.isEmpty else { return }
        hostsSharedAt = .now
        do throws(DownloadError) {
            // Nil: another member is sharing this moment; asked again at the next look.
            guard let shares = try await store.database.shareHosts(queue, limit: hosts.limit, wanted: wanted) else { return }
            hosts.share(shares, asked: wanted)
        } catch {
            // Asked again at the next look.
            downloader.configuration.logger.warning("\(error.message)")
            return
        }
        schedule()
    }

    /// Starts ``shareHosts()`` when a download was set aside for want of any share of its host
    /// since the shares were last asked for (a host it holds some of waits for the next look: a
    /// transaction each time a download of a busy host waits would hold up the group commit).
    func shareHostsSoon() {
        guard !sharingHosts, hosts.wantsMore, !isShutDown, ContinuousClock.now >= hostsSharedAt + Self.hostsShareSpacing else { return }
        sharingHosts = true
        Task { await self.shareHosts(reserved: true) }
    }

    /// The least time between two requests for shares outside the looks: a segmented transfer
    /// refused an extra connection asks again at each step.
    static let hostsShareSpacing: Duration = .milliseconds(100)

    /// Whether other daemons may share this manager's queue (its store is on PostgreSQL).
    public nonisolated var queueIsShared: Bool { store.database.isShared }

    // MARK: Counting

    /// What this manager did as a member of a fleet since it started. All 0 outside one.
    public struct FleetCounts: Sendable, Equatable {
        /// Downloads claimed from the pool other members offered to.
        public var claimed = 0
        /// Downloads offered to the pool.
        public var offered = 0
        /// Downloads and uploads taken over from members that were gone.
        public var takenOver = 0
        /// Renewals of this member's lease: one with every transaction its store wrote.
        public var leaseRenewals = 0

        /// Counts of 0.
        public init() {}
    }

    /// ``FleetCounts`` so far.
    public var fleetCounts: FleetCounts {
        var counts = FleetCounts()
        counts.claimed = claimedFromPool
        counts.offered = offeredToPool
        counts.takenOver = takenOverRows
        counts.leaseRenewals = store.database.leaseRenewals
        return counts
    }

    /// Stops looking for rows to take over.
    func stopWatchingFleet() {
        fleetWatch?.cancel()
        fleetWatch = nil
    }
}
