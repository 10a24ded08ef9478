import Crypto
import Foundation
import Haul
import Logging
import ServiceLifecycle
import Synchronization

/// The daemons of a fleet, talking through their store (PostgreSQL's `LISTEN`/`NOTIFY`,
/// ``DownloadManager/sendToFleet(_:to:)``): a call about a download another daemon holds
/// (`pause`, `remove`, `changeOption`, `tellStatus`…) is carried to that one and its answer
/// brought back (``call(_:_:_:)``); the notifications of each go to the WebSocket clients of
/// every other (``relay(_:)``), while the others have any.
///
/// A message is `MAC JSON`: the JSON is `{"call": {"id", "method", "params"}, "to", "at"}`,
/// `{"reply": ID, "answer": …, "to"}` (the answer object as a call's: `result` or `error`) or
/// `{"events": [NOTIFICATION, …]}`, and the MAC its HMAC-SHA256 under a key made from the RPC
/// secret, with the sender's id: a role that may connect to the database but does not know the
/// secret can neither make a daemon act nor answer in one's name. Every daemon of a fleet needs
/// the same `--rpc-secret`. A call is answered only by the daemon it is addressed to, and only
/// within ``callTimeout`` of when it was sent. It is sent again while unanswered
/// (``callResends``): a `NOTIFY` sent while the other's listening connection is being made
/// again (PostgreSQL restarted, the connection cut) reaches no one. A call that arrives twice is
/// run once; the second time its answer is sent again, in case the first was the one lost.
final class FleetLink: Service {
    let manager: DownloadManager
    let logger: Logger
    /// Signs and checks messages: derived from the RPC secret (from "" without one).
    private let key: Data
    /// What this daemon hears from the others.
    private let messages: AsyncStream<FleetMessage>
    private struct State {
        /// Calls carried to another daemon, waiting for its reply.
        var waiting: [String: AsyncStream<JSONValue>.Continuation] = [:]
        /// Runs a call carried here.
        var answer: (@Sendable (String, [JSONValue]) async -> JSONValue)?
        /// Hands a notification from another daemon to this one's WebSocket clients.
        var deliver: (@Sendable (JSONValue) -> Void)?
        /// How many WebSocket clients this daemon has.
        var listeners: (@Sendable () -> Int)?
        /// Notifications waiting to go out (``relay(_:)``).
        var outgoing: [JSONValue] = []
        /// Another daemon has WebSocket clients, as of the last send.
        var othersListen = false
        /// The ids of the calls answered lately: one sent twice is run once.
        var answered = Recent<Void>(limit: FleetLink.rememberedCalls)
        /// The latest replies sent (signed), by call: sent again when their call comes again.
        var replies = Recent<String>(limit: FleetLink.rememberedReplies)
        /// A message that was not signed with this daemon's secret was said in the log.
        var badSignatureSaid = false
        /// Stopped: no call goes out any more.
        var closed = false
    }
    private let state = Mutex(State())

    /// How long a call carried to another daemon waits for its answer.
    static let callTimeout: Duration = .seconds(5)
    /// How often this daemon's notifications go out to the others, batched.
    static let relayInterval: Duration = .milliseconds(100)
    /// How many answered calls' ids are remembered.
    static let rememberedCalls = 4096
    /// How many replies are kept to be sent again (a reply matters only for a call's timeout).
    static let rememberedReplies = 512
    /// When an unanswered call is sent again, after it was first sent.
    static let callResends: [Duration] = [.seconds(1), .milliseconds(2500)]

    /// Listens for the others' messages before it returns: nothing sent after is missed.
    init(manager: DownloadManager, secret: String?, logger: Logger) async {
        self.manager = manager
        self.logger = logger
        key = Data(SHA256.hash(data: Data(("haul fleet " + (secret ?? "")).utf8)))
        messages = await manager.fleetMessages()
    }

    /// Answers the calls carried here with `answer` (a method, its parameters: the answer object).
    func answerCalls(with answer: @escaping @Sendable (String, [JSONValue]) async -> JSONValue) {
        state.withLock { $0.answer = answer }
    }

    /// Hands the others' notifications to `deliver`, which has `listeners` clients.
    func deliverNotifications(to deliver: @escaping @Sendable (JSONValue) -> Void, listeners: @escaping @Sendable () -> Int) {
        state.withLock { ($0.deliver, $0.listeners) = (deliver, listeners) }
    }

    func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await message in self.messages.cancelOnGracefulShutdown() { self.receive(message) }
            }
            group.addTask {
                while !Task.isCancelled, !Task.isShuttingDownGracefully {
                    try? await Task.sleep(for: Self.relayInterval)
                    await self.sendRelayed()
                }
            }
            await group.next()
            group.cancelAll()
        }
        // Whoever still waits gets no answer now, and no call goes out any more.
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for caller in waiting { caller.finish() }
        // The messages end when the store closes, before this service's turn to stop: returning
        // then would make the group cancel the listener instead of stopping it in order.
        try? await gracefulShutdown()
    }

    // MARK: Calls

    /// Runs `method` with `params` on `peer`, which holds the download it names, and returns
    /// its result (or throws its error); waits at most ``callTimeout`` from now.
    func call(_ peer: DownloadManager.FleetPeer, _ method: String, _ params: [JSONValue]) async throws(RPCError) -> JSONValue {
        let id = UUID().uuidString
        let (replies, reply) = AsyncStream.makeStream(of: JSONValue.self, bufferingPolicy: .bufferingNewest(1))
        let open = state.withLock { state in
            if !state.closed { state.waiting[id] = reply }
            return !state.closed
        }
        guard open else { throw .failed("this daemon is stopping: \(method) was not carried to the daemon \(peer.name)") }
        defer { state.withLock { $0.waiting.removeValue(forKey: id) }?.finish() }
        let body: JSONValue = [
            "call": ["id": .string(id), "method": .string(method), "params": .array(params)],
            "to": .string(peer.id), "at": .int(Int64(Date().timeIntervalSince1970)),
        ]
        let (manager, timeout) = (manager, Self.callTimeout)
        let signed = sign(body)
        // Sent apart: a send held up by the store (a connection being made) must not hold the
        // wait past its timeout; a failure to send is the answer. Sent again while unanswered.
        let sending = Task {
            let started = ContinuousClock.now
            for resend in [Duration.zero] + Self.callResends {
                do { try await Task.sleep(until: started + resend) } catch { return }
                do throws(DownloadError) { try await manager.sendToFleet(signed, to: peer.id) } catch {
                    reply.yield(["error": RPCError.failed("cannot carry \(method) to the daemon \(peer.name): \(error.message)").json])
                    return
                }
            }
        }
        defer { sending.cancel() }
        let answer: JSONValue? = await withTaskGroup(of: JSONValue?.self) { group in
            group.addTask { await replies.first { _ in true } }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        guard let answer else {
            throw .failed(
                "the daemon \(peer.name), which holds this download, did not answer \(method) within \(timeout.components.seconds) s; ask again (if it is gone, another daemon takes the download over within its lease; if it runs, give every daemon of the fleet the same --rpc-secret)"
            )
        }
        if let error = answer["error"], let message = error["message"]?.string {
            throw RPCError(code: Int(error["code"]?.integer ?? 1), message: message)
        }
        return answer["result"] ?? .null
    }

    /// `body` as a message: its MAC, a space, its JSON.
    private func sign(_ body: JSONValue) -> String {
        let json = body.description
        return Self.hex(HMAC<SHA256>.authenticationCode(for: Data(json.utf8), using: SymmetricKey(data: key))) + " " + json
    }

    /// The JSON of a message signed with this daemon's key, else nil.
    private func verified(_ message: FleetMessage) -> JSONValue? {
        guard let space = message.body.firstIndex(of: " ") else { return nil }
        let (mac, json) = (message.body[..<space], message.body[message.body.index(after: space)...])
        let expected = Self.hex(HMAC<SHA256>.authenticationCode(for: Data(json.utf8), using: SymmetricKey(data: key)))
        guard Aria2RPC.constantTimeEqual(String(mac), expected) else {
            let say = state.withLock { state in
                defer { state.badSignatureSaid = true }
                return !state.badSignatureSaid
            }
            if say {
                logger.warning(
                    "a message from the fleet was not signed with this daemon's --rpc-secret, and was ignored: give every daemon of the fleet the same secret"
                )
            }
            return nil
        }
        return try? JSONValue.parse(Data(json.utf8))
    }

    private static func hex(_ code: some Sequence<UInt8>) -> String {
        code.map { String(format: "%02x", $0) }.joined()
    }

    private func receive(_ message: FleetMessage) {
        guard let body = verified(message) else { return }
        let me = body["to"]?.string
        if let call = body["call"], let id = call["id"]?.string, let method = call["method"]?.string {
            // Addressed to another (a broadcast is never a call), or late: dropped.
            guard let me, me == manager.fleetMemberID,
                let at = body["at"]?.integer, abs(Int64(Date().timeIntervalSince1970) - at) <= Self.callAge
            else { return }
            let answer: @Sendable (String, [JSONValue]) async -> JSONValue
            switch firstTime(id) {
            case .run(let run): answer = run
            case .answered(let earlier):
                // Asked again: the reply may be what was lost.
                if let earlier { Task { await self.send(reply: earlier, to: message.from, about: "a call") } }
                return
            }
            let params = call["params"]?.array ?? []
            let manager = manager
            Task {
                var reply: JSONValue = ["reply": .string(id), "answer": await answer(method, params), "to": .string(message.from)]
                if self.sign(reply).utf8.count >= Self.largestMessage {
                    let tooLarge = RPCError.failed(
                        "the answer to \(method) is too large to carry between the daemons of the fleet; ask the daemon that holds the download (\(manager.fleetMemberName ?? "?"))"
                    )
                    reply = ["reply": .string(id), "answer": ["error": tooLarge.json], "to": .string(message.from)]
                }
                let signed = self.sign(reply)
                self.state.withLock { _ = $0.replies.insert(signed, for: id) }
                await self.send(reply: signed, to: message.from, about: method)
            }
        } else if let id = body["reply"]?.string, me == manager.fleetMemberID {
            state.withLock { $0.waiting[id] }?.yield(body["answer"] ?? .null)
        } else if let events = body["events"]?.array, let deliver = state.withLock({ $0.deliver }) {
            for event in events { deliver(event) }
        }
    }

    /// How old a call may be, in seconds, by the clocks of the machines (which may differ a
    /// little): one sent again later (a `NOTIFY` someone kept) is dropped.
    static let callAge: Int64 = 60

    /// What a message may hold: PostgreSQL's limit on a notification, less the envelope.
    static let largestMessage = 7800

    private enum Admission {
        /// A call not seen before (now remembered): run it with this.
        case run(@Sendable (String, [JSONValue]) async -> JSONValue)
        /// Seen before (or no answering function yet): its reply when it was sent and is kept.
        case answered(reply: String?)
    }

    private func firstTime(_ id: String) -> Admission {
        state.withLock { state in
            guard let answer = state.answer else { return .answered(reply: nil) }
            guard state.answered.insert((), for: id) else { return .answered(reply: state.replies[id]) }
            return .run(answer)
        }
    }

    /// Sends a reply to the daemon that asked; a failure is said in the log.
    private func send(reply signed: String, to asker: String, about what: String) async {
        do throws(DownloadError) { try await manager.sendToFleet(signed, to: asker) } catch {
            logger.warning("cannot answer \(what) carried from another daemon: \(error.message)")
        }
    }

    // MARK: Notifications

    /// Whether another daemon's clients listen, as last looked: a notification is relayed only then.
    var othersListen: Bool { state.withLock { $0.othersListen } }

    /// Sends `notification` (aria2's, as this daemon's WebSocket clients get it) to the other
    /// daemons' clients, with the others of the next ``relayInterval``; dropped while no other
    /// daemon has a client.
    func relay(_ notification: JSONValue) {
        state.withLock { state in
            if state.othersListen { state.outgoing.append(notification) }
        }
    }

    /// Sends the notifications gathered, as few messages as fit, and looks again at whether the
    /// others listen.
    private func sendRelayed() async {
        // Published at the manager's next look: the others send theirs only while someone listens.
        if let listeners = state.withLock({ $0.listeners }) { await manager.setFleetListeners(listeners()) }
        let othersListen = await manager.fleetPeers().contains { !$0.isThisDaemon && $0.listeners > 0 }
        let outgoing = state.withLock { state in
            defer { (state.outgoing, state.othersListen) = ([], othersListen) }
            return state.outgoing
        }
        guard othersListen, !outgoing.isEmpty else { return }
        var batch: [JSONValue] = []
        var size = 0
        for notification in outgoing {
            let length = notification.description.utf8.count + 1
            if size + length > Self.batchBytes, !batch.isEmpty {
                await send(batch)
                (batch, size) = ([], 0)
            }
            batch.append(notification)
            size += length
        }
        if !batch.isEmpty { await send(batch) }
    }

    /// How many bytes of notifications one message carries (PostgreSQL takes 8000 at most).
    static let batchBytes = 7000

    private func send(_ batch: [JSONValue]) async {
        do throws(DownloadError) { try await manager.sendToFleet(sign(["events": .array(batch)]), to: nil) } catch {
            logger.debug("cannot send notifications to the other daemons: \(error.message)")
        }
    }
}

/// Values by key, the latest `limit` of them: past it, the older half is forgotten.
private struct Recent<Value> {
    let limit: Int
    private var values: [String: Value] = [:]
    private var order: [String] = []

    init(limit: Int) { self.limit = limit }

    subscript(key: String) -> Value? { values[key] }

    /// Keeps `value` for `key`; false (and nothing changed) when `key` is kept already.
    mutating func insert(_ value: Value, for key: String) -> Bool {
        guard values[key] == nil else { return false }
        values[key] = value
        order.append(key)
        if order.count > limit {
            let forgotten = order.prefix(order.count / 2)
            for old in forgotten { values[old] = nil }
            order.removeFirst(forgotten.count)
        }
        return true
    }
}
