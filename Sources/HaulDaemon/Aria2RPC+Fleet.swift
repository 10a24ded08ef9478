import Foundation
import Haul

/// aria2's RPC in a fleet: calls about a download another daemon holds are carried to it
/// (``FleetLink``), those of the whole queue to every daemon, and those carried here answered.
extension Aria2RPC {
    /// Joins `fleet`: the calls it carries here are answered here.
    func link(_ fleet: FleetLink) {
        self.fleet = fleet
        fleet.answerCalls { [weak self] method, params in
            await self?.answerCarried(method, params) ?? ["error": RPCError.failed("this daemon is stopping").json]
        }
    }

    /// A call another daemon of the fleet carried here: answered as if asked here (that daemon
    /// checked the caller's token), as `{"result": …}` or `{"error": …}`.
    func answerCarried(_ method: String, _ params: [JSONValue]) async -> JSONValue {
        guard Self.carried.contains(method) else { return ["error": RPCError.noSuchMethod(method).json] }
        var exchange = Exchange(client: "another daemon of the fleet", carried: true)
        let answer: JSONValue
        do { answer = ["result": try await dispatch(method, Parameters(values: params), &exchange)] } catch {
            answer = ["error": error.json]
        }
        await settleForFleet()
        return answer
    }

    /// In a fleet, writes the changes made so far, so that the other daemons see them. The
    /// answer goes out either way (the change is made here); a failure is said in the log, and
    /// the store, failed for good, stops this daemon's downloads at its next look.
    func settleForFleet() async {
        guard manager.queueIsShared else { return }
        do { try await manager.flushForFleet() } catch {
            logger.warning("a change made through this daemon could not be written for the fleet to see: \(error.message)")
        }
    }

    /// In a fleet, carries `method` (one of the whole queue's: `pauseAll`, `unpauseAll`,
    /// `purgeDownloadResult`) to every other live daemon, all at once; says which did not answer.
    func carryEverywhere(_ method: String, _ exchange: Exchange) async throws(RPCError) {
        guard let fleet, !exchange.carried else { return }
        let peers = await manager.fleetPeers().filter { !$0.isThisDaemon }
        let failures = await withTaskGroup(of: String?.self) { group in
            for peer in peers {
                group.addTask {
                    do throws(RPCError) {
                        _ = try await fleet.call(peer, method, [])
                        return nil
                    } catch {
                        return "\(peer.name): \(error.message)"
                    }
                }
            }
            return await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
        }
        guard failures.isEmpty else {
            throw .failed("\(method) was done here, but not by every daemon of the fleet: \(failures.sorted().joined(separator: "; "))")
        }
    }

    /// In a fleet, the answer to a call about a download this daemon does not hold: from the
    /// daemon that does (carried to it), or after claiming it from the pool (nil: answered here).
    /// Nil outside a fleet, for a GID prefix, and for a download of this daemon's.
    func carry(_ method: String, _ p: Parameters, _ exchange: inout Exchange) async throws(RPCError) -> JSONValue? {
        guard let fleet, !exchange.carried, Self.carried.contains(method), p.count > 0, let gid = try? p.gid(0), gid.count == 16,
            let id = DownloadID(gid)
        else { return nil }
        switch try await holder(id, &exchange) {
        case .thisDaemon, .nobody:
            return nil
        case .pool:
            // Read where it waits (from its row); anything else claims it and acts here, or,
            // when another daemon claimed it first, is carried to that one.
            guard !Self.readOnlyMethods.contains(method) else { return nil }
            let claimed: Bool
            do { claimed = try await manager.claimOffered(id) } catch { throw .failed(error.message) }
            guard !claimed, case .peer(let peer) = try await holder(id, &exchange) else { return nil }
            return try await fleet.call(peer, method, p.values)
        case .gone:
            guard !Self.readOnlyMethods.contains(method) else { return nil }
            throw .failed("GID#\(gid) is being taken over from a daemon of the fleet that is gone; ask again in a moment")
        case .peer(let peer):
            do { return try await fleet.call(peer, method, p.values) } catch {
                // Its record answers a read when its daemon does not.
                guard Self.readOnlyMethods.contains(method) else { throw error }
                return nil
            }
        }
    }

    /// Who holds `id`; for a GID the fleet does not know, asked again until about a second after
    /// the request first met one: a download just added through another daemon by a batch or
    /// multicall may still be in that one's group commit. A request about many unknown GIDs (a
    /// multicall) waits that second once, not once for each.
    private func holder(_ id: DownloadID, _ exchange: inout Exchange) async throws(RPCError) -> DownloadManager.Holder {
        var pause = Duration.milliseconds(100)
        while true {
            let holder: DownloadManager.Holder
            do { holder = try await manager.holder(of: id) } catch { throw .failed(error.message) }
            guard holder == .nobody else { return holder }
            let end = exchange.unknownGIDsWaitEnds ?? .now + Self.unknownGIDWait
            exchange.unknownGIDsWaitEnds = end
            let left = end - .now
            guard left > .zero else { return holder }
            try? await Task.sleep(for: min(pause, left))
            pause += .milliseconds(100)
        }
    }

    /// How long a request waits for GIDs the fleet does not know to appear.
    static let unknownGIDWait = Duration.seconds(1)

    /// Where aria2's page of `count` at `offset` lies in a list of `total`, or nil when it is empty.
    static func pageBounds(total: Int, offset: Int, count: Int) -> (start: Int, limit: Int, reversed: Bool)? {
        guard count > 0 else { return nil }
        if offset >= 0 {
            guard offset < total else { return nil }
            return (offset, min(count, total - offset), false)
        }
        let last = total + offset
        guard last >= 0 else { return nil }
        let first = max(0, last - count + 1)
        return (first, last - first + 1, true)
    }
}
